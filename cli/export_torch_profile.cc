// Exporter of torch-profile runs. One node: DIR/manifest.json (the
// analysis tool's input, unchanged). A multi-node run adds the layout of
// cli/profile_root_layout.h: every rank of every node under
// DIR/profile_root/<rank_dir>/ (its record and analyse()'s stored log) and
// DIR/ranks.json mapping each rank dir to its machine and clock offset. What
// is copied and what stays on the nodes: docs/MULTINODE.md ("Export").
#include <filesystem>

#include <fmt/format.h>

#include "cli/export_registry.h"
#include "cli/output_file.h"
#include "cli/profile_root_layout.h"
#include "common/json_field.h"

namespace npuprof::cli {

namespace {

namespace fs = std::filesystem;

Result<std::vector<std::string>> ExportTorchProfile(ExportContext& ctx) {
  auto manifest_path = WriteManifestJson(ctx);
  if (!manifest_path.ok()) return manifest_path.status();
  std::vector<std::string> written{*manifest_path};
  auto m = ctx.client.CallJson("manifest", json{{"run_id", ctx.run_id}});
  if (!m.ok()) return m.status();
  if (!Field(*m, "nodes").is_array()) return written;  // one node: as before
  auto evs = ctx.client.CallJson("events", json{{"run_id", ctx.run_id}}, std::chrono::seconds(60));
  if (!evs.ok()) return evs.status();
  auto plan = PlanProfileRootLayout(*m, *evs);
  if (!plan.ok()) return plan.status();
  const fs::path root = fs::path(ctx.dir) / kProfileRootDir;
  auto put = [&](const fs::path& p, const std::string& data) -> Status {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) return Status::Io(fmt::format("cannot create {}: {}", p.parent_path().string(), ec.message()));
    Status st = WriteFileAtomic(p.string(), data);
    if (st.ok()) written.push_back(p.string());
    return st;
  };
  size_t i = 0;
  for (const auto& d : (*m)["remote_profile_dirs"]) {
    if (!d.is_object()) continue;
    const json& row = (*plan)["ranks"][i++];
    const fs::path dir = root / row["rank_dir"].get<std::string>();
    if (Status st = put(dir / "npuprof_rank.json", RankRecord(d, row).dump(2) + "\n"); !st.ok()) return st;
    if (!row["analyse_log_sha256"].is_string()) continue;
    const std::string sha = row["analyse_log_sha256"].get<std::string>();
    auto r = ctx.client.Call("blob", json{{"sha256", sha}}, std::chrono::seconds(60));
    if (!r.ok()) return r.status();
    if (!r->ok())
      return Status::NotFound(fmt::format("blob {} (analyse.log of {} on {}) is missing: {}", sha,
                                          row["original_name"].get<std::string>(), row["machine"].get<std::string>(),
                                          r->error()));
    if (Status st = put(dir / "analyse.log", r->body_json()); !st.ok()) return st;
  }
  if (Status st = put(fs::path(ctx.dir) / "ranks.json", plan->dump(2) + "\n"); !st.ok()) return st;
  return written;
}

const ExporterRegistration kTorchProfile("torch-profile", &ExportTorchProfile);

}  // namespace

}  // namespace npuprof::cli
