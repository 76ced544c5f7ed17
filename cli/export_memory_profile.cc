// Exporter of memory-profile runs: the reference scripts' run-directory layout (docs/BEHAVIOUR.md#mem-manifest)
//   manifest.json, baseline_npu_smi.txt, after_ready_npu_smi.txt,
//   after_infer_npu_smi.txt, vllm_serve.log, msprof_csvs/<csv>,
//   model_config.json, weight_manifest.json, report.txt, report.json
// (plus inference_response.json, and operator_memory_digest.json with
// --operator-memory). Every file but the reports is the stored
// evidence blob, byte for byte; the manifest's "files" maps names to sha256.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli/export_registry.h"
#include "statemachine/memory_report_text.h"

namespace npuprof::cli {

namespace {

Status WriteFileAtomic(const std::filesystem::path& path, const std::string& data) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  const std::string tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::Io("cannot write " + tmp);
    f << data;
    if (!f) return Status::Io("write to " + tmp + " failed");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Io(fmt::format("cannot rename {}: {}", tmp, ec.message()));
  return Status::Ok();
}

// A stored file name must stay inside DIR.
bool SafeRelative(const std::string& name) {
  return !name.empty() && name[0] != '/' && name.find("..") == std::string::npos;
}

Result<std::vector<std::string>> ExportMemoryRun(ExportContext& ctx) {
  auto manifest = ctx.client.CallJson("manifest", json{{"run_id", ctx.run_id}});
  if (!manifest.ok()) return manifest.status();
  const std::filesystem::path dir(ctx.dir);
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& data) -> Status {
    Status st = WriteFileAtomic(dir / name, data);
    if (st.ok()) written.push_back((dir / name).string());
    return st;
  };
  const json files = manifest->value("files", json::object());
  for (const auto& [name, sha] : files.items()) {
    if (!SafeRelative(name) || !sha.is_string()) continue;
    auto r = ctx.client.Call("blob", json{{"sha256", sha.get<std::string>()}}, std::chrono::seconds(60));
    if (!r.ok()) return r.status();
    if (!r->ok()) return Status::NotFound(fmt::format("blob {} ({}) is missing: {}", sha.get<std::string>(), name, r->error()));
    if (Status st = put(name, r->body_json()); !st.ok()) return st;
  }
  if (manifest->contains("baseline_npu_smi_text") && (*manifest)["baseline_npu_smi_text"].is_string())
    if (Status st = put("baseline_npu_smi.txt", (*manifest)["baseline_npu_smi_text"].get<std::string>()); !st.ok())
      return st;
  const json report = manifest->value("report", json::object());
  if (Status st = put("report.json", report.dump(2) + "\n"); !st.ok()) return st;
  if (Status st = put("report.txt", sm::RenderMemoryReportText(report, "zh")); !st.ok()) return st;
  if (Status st = put("manifest.json", manifest->dump(2) + "\n"); !st.ok()) return st;
  return written;
}

const ExporterRegistration kMemoryProfile("memory-profile", &ExportMemoryRun);

}  // namespace

}  // namespace npuprof::cli
