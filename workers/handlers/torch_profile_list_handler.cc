// torch_profile.list_profile_dirs: discover the *_ascend_pt directories of a
// profile root (the rank dirs torch_profile.analyse_rank then analyses).
#include <algorithm>
#include <string>
#include <vector>

#include "workers/handlers/torch_profile_handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TaskOutcome TorchProfileListDirs(const tasks::TorchProfileListProfileDirs& p, const proto::Task&, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& root = p.profile_root();
  if (root.empty() || root[0] != '/') return TaskOutcome::Failure("bad_payload", "profile_root must be absolute", false);
  auto session = ctx.pool.Get(*target);
  auto st = session->Stat(root);
  if (!st.ok()) {
    if (ssh::ErrorKindOf(st.status()) == ssh::SshErrorKind::kRemoteError)
      return TaskOutcome::Success(json{{"profile_root", root}, {"root_exists", false}, {"dirs", json::array()}});
    return OutcomeFromSsh(st.status(), *target);
  }
  auto entries = session->ListDir(root);
  if (!entries.ok()) return OutcomeFromSsh(entries.status(), *target);
  std::vector<std::string> dirs;
  json others = json::array();
  for (const auto& e : *entries) {
    if (e.is_dir && EndsWith(e.name, "_ascend_pt")) dirs.push_back(root + "/" + e.name);
    else others.push_back(e.name);
  }
  std::sort(dirs.begin(), dirs.end());
  return TaskOutcome::Success(
      json{{"profile_root", root}, {"root_exists", true}, {"dirs", dirs}, {"other_entries", others}});
}

}  // namespace npuprof::workers
