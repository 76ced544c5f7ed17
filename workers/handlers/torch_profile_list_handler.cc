// torch_profile.list_profile_dirs: discover the *_ascend_pt directories of a
// profile root (the rank dirs torch_profile.analyse_rank then analyses), and
// read what the target has to analyse them with: its cores, free memory,
// free disk under the root and each dir's size
// (statemachine/torch_profile_analyse_limit.h chooses from them). Both come
// from one remote command (workers/profile_root_listing.h); where it cannot
// be used, the root is stat'ed and listed with file operations and the means
// read by a command of their own, as before.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "statemachine/torch_profile_analyse_limit.h"
#include "workers/target_means.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/profile_root_listing.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The means program: the root and the dir names travel as positional
// parameters. A real host reads /proc/meminfo; NPUPROF_MEMINFO names another
// file (the simulated target's own, tests/sim/README.md).
const std::string& MeansScript() {
  static const std::string script = std::string("r=$1; shift\nprintf 'cores %s\\n' \"$(nproc 2>/dev/null)\"\n") +
                                    kMemAvailableLine + "\n" + DiskFreeLine("r") + "\n" +
                                    R"sh(for d in "$@"; do printf 'dir_kb %s\n' "$(du -sk -- "$r/$d" 2>/dev/null | cut -f1)"; done
)sh";
  return script;
}

json MeansJson(const sm::AnalyseMeans& m);

// The means of the machine for analysing `names` under root; on a failed
// command only `error` is set.
json ReadMeans(ssh::SshSession& session, const std::string& root, const std::vector<std::string>& names) {
  std::vector<std::string> argv = {"sh", "-c", MeansScript(), "npuprof-means", root};
  argv.insert(argv.end(), names.begin(), names.end());
  auto r = RunRemote(session, argv, std::chrono::seconds(120));
  if (!r.ok()) return json{{"error", r.status().message()}};
  if (r->exit_status != 0)
    return json{{"error", "the means command " + ExitText(*r) + ": " + TailLines(r->stderr_data, 3)}};
  return MeansJson(sm::ParseAnalyseMeans(r->stdout_data, names.size()));
}

// The listing and the means in one command (profile_root_listing.h); nullopt
// when it cannot be used here (the file operations then run as before).
std::optional<ProfileRootListing> ListInOneCommand(ssh::SshSession& session, const std::string& root) {
  auto r = RunRemote(session, ProfileRootListingArgv(root), std::chrono::seconds(120));
  if (!r.ok() || r->exit_status != 0 || r->stdout_omitted) {
    spdlog::debug("profile root listing of {}: {}; listing with file operations", root,
                  r.ok() ? ExitText(*r) : r.status().ToString());
    return std::nullopt;
  }
  auto parsed = ParseProfileRootListing(r->stdout_data);
  if (!parsed.ok()) {
    spdlog::debug("profile root listing of {}: {}; listing with file operations", root, parsed.status().ToString());
    return std::nullopt;
  }
  return std::move(*parsed);
}

json Listed(const std::string& root, const std::vector<ssh::DirEntry>& entries, std::vector<std::string>* names) {
  std::vector<std::string> dirs;
  json others = json::array();
  for (const auto& e : entries) {
    if (e.is_dir && EndsWith(e.name, "_ascend_pt")) dirs.push_back(root + "/" + e.name);
    else others.push_back(e.name);
  }
  std::sort(dirs.begin(), dirs.end());
  for (const std::string& d : dirs) names->push_back(d.substr(root.size() + 1));
  return {{"profile_root", root}, {"root_exists", true}, {"dirs", dirs}, {"other_entries", others}};
}

json MeansJson(const sm::AnalyseMeans& m) {
  json out = {{"dir_bytes", json::array()}};
  if (m.cores) out["cores"] = *m.cores;
  if (m.mem_available_bytes) out["mem_available_bytes"] = *m.mem_available_bytes;
  if (m.disk_free_bytes) out["disk_free_bytes"] = *m.disk_free_bytes;
  for (const auto& b : m.rank_bytes) out["dir_bytes"].push_back(b ? *b : -1);
  return out;
}

}  // namespace

TaskOutcome TorchProfileListDirs(const tasks::TorchProfileListProfileDirs& p, const proto::Task&, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& root = p.profile_root();
  if (root.empty() || root[0] != '/') return TaskOutcome::Failure("bad_payload", "profile_root must be absolute", false);
  auto session = ctx.pool.Get(*target);
  // The analyses that follow each hold a connection of their own: opened
  // now, beside the listing (statemachine/torch_profile_analysis.h).
  if (p.warm_sessions() > 0) ctx.pool.WarmUpTo(*target, static_cast<size_t>(std::min<int64_t>(p.warm_sessions(), 64)));
  if (auto one = ListInOneCommand(*session, root)) {
    if (!one->exists)
      return TaskOutcome::Success(json{{"profile_root", root}, {"root_exists", false}, {"dirs", json::array()}});
    std::vector<std::string> names;
    json result = Listed(root, one->entries, &names);
    if (!names.empty()) result["means"] = MeansJson(sm::ParseAnalyseMeans(one->MeansText(names), names.size()));
    return TaskOutcome::Success(std::move(result));
  }
  auto st = session->Stat(root);
  if (!st.ok()) {
    if (ssh::ErrorKindOf(st.status()) == ssh::SshErrorKind::kRemoteError)
      return TaskOutcome::Success(json{{"profile_root", root}, {"root_exists", false}, {"dirs", json::array()}});
    return OutcomeFromSsh(st.status(), *target);
  }
  auto entries = session->ListDir(root);
  if (!entries.ok()) return OutcomeFromSsh(entries.status(), *target);
  std::vector<std::string> names;
  json result = Listed(root, *entries, &names);
  if (!names.empty()) result["means"] = ReadMeans(*session, root, names);
  return TaskOutcome::Success(std::move(result));
}

}  // namespace npuprof::workers
