// `npuprof export RUN DIR` and the exporter registry (see export_registry.h).
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/export_registry.h"
#include "cli/output_dir.h"

namespace npuprof::cli {

namespace {

std::map<std::string, Exporter>& Registry() {
  static std::map<std::string, Exporter> r;
  return r;
}

Result<std::vector<std::string>> ExportManifestOnly(ExportContext& ctx) {
  auto path = WriteManifestJson(ctx);
  if (!path.ok()) return path.status();
  return std::vector<std::string>{*path};
}

const ExporterRegistration kAnalyseRoot("analyse-root", &ExportManifestOnly);

}  // namespace

void RegisterExporter(const std::string& kind, Exporter exporter) { Registry()[kind] = std::move(exporter); }

const Exporter* FindExporter(const std::string& kind) {
  auto it = Registry().find(kind);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> ExporterKinds() {
  std::vector<std::string> out;
  for (const auto& [k, e] : Registry()) out.push_back(k);
  return out;
}

Result<std::string> WriteManifestJson(ExportContext& ctx) {
  auto manifest = ctx.client.CallJson("manifest", json{{"run_id", ctx.run_id}});
  if (!manifest.ok()) return manifest.status();
  const std::string path = (std::filesystem::path(ctx.dir) / "manifest.json").string();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return Status::Io(fmt::format("cannot write {}", tmp));
    f << manifest->dump(2) << "\n";
    if (!f) return Status::Io(fmt::format("write to {} failed", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Io(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
  return path;
}

void AddExportCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a run's artifacts (manifest.json, ...) into a local directory");
  auto addr = std::make_shared<ServerAddress>();
  auto run = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUN", *run, "Run id")->required();
  cmd->add_option("DIR", *dir, "Output directory (created if missing)")->required();
  cmd->callback([addr, run, dir] {
    Client client(*addr);
    auto summary = client.CallJson("show", json{{"run_id", *run}});
    if (!summary.ok()) return Fail(2, summary.status().message());
    const std::string kind = summary->value("kind", "");
    const Exporter* exporter = FindExporter(kind);
    if (!exporter)
      return Fail(2, fmt::format("runs of kind '{}' cannot be exported; exportable kinds: {}", kind,
                                 fmt::join(ExporterKinds(), ", ")));
    if (Status made = EnsureOutputDir(*dir); !made.ok()) return Fail(2, made.message());
    ExportContext ctx{client, *run, *summary, *dir};
    auto written = (*exporter)(ctx);
    if (!written.ok()) return Fail(2, written.status().message());
    PrintJson(json{{"run_id", *run}, {"kind", kind}, {"dir", *dir}, {"files", *written},
                   {"status", summary->value("status", "")}});
  });
}

}  // namespace npuprof::cli
