// memory.export: `msprof --export=on` run detached on the target, re-attachable.
// Markers next to the msprof output dir D: D.export.pid (started), D.export.rc
// (finished, exit code), D.export.log (console). A new attempt (worker or
// server restart) that finds the pid marker waits for that export instead of
// starting another. First, when the payload names msprof's console log, one
// command checks whether the output dir exists and whether msprof's
// application mode already exported every PROF dir (auto_export_check.h):
// then nothing is exported again, in one round trip (issue 42).

#include <algorithm>

#include <fmt/format.h>

#include "workers/handlers/auto_export_check.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"
#include "workers/remote_wait.h"

namespace npuprof::workers {

namespace {

// $1 = msprof output dir. Starts the export in its own session (setsid when
// present) so it outlives the SSH channel; writes the rc marker atomically.
constexpr const char* kStartExport = R"SH(d="$1"
if [ -f "$d.export.pid" ]; then echo adopted; exit 0; fi
S=; command -v setsid >/dev/null 2>&1 && S=setsid
$S nohup sh -c 'msprof --export=on --output="$1" >"$1.export.log" 2>&1; echo $? >"$1.export.rc.tmp"; mv "$1.export.rc.tmp" "$1.export.rc"' sh "$d" </dev/null >/dev/null 2>&1 &
echo $! >"$d.export.pid"
echo started)SH";

TaskOutcome NoMsprofData(const std::string& dir) {
  return TaskOutcome::Success(json{
      {"status", "no_msprof_data"},
      {"note", fmt::format("{} does not exist: the service did not run under the msprof wrap script", dir)}});
}

constexpr const char* kAlive = R"SH(p=$(cat "$1.export.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null && echo alive || echo gone)SH";

}  // namespace

TaskOutcome MemExport(const tasks::MemoryExport& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  auto& s = *c->session;
  const std::string& dir = p.msprof_dir();
  if (dir.empty() || dir[0] != '/') return TaskOutcome::Failure("bad_payload", "msprof_dir must be absolute", false);
  const int64_t timeout_s = std::clamp<int64_t>(p.timeout_s(), 1, 86400);

  // With msprof's console log named, one command says both whether the
  // output dir exists and whether msprof already exported it; else (or when
  // that command failed) the dir is looked at with a file operation.
  bool dir_seen = false;
  if (!p.stdout_log().empty()) {
    auto check = RunRemote(s, AutoExportCheckArgv(dir, p.stdout_log()), std::chrono::seconds(60));
    if (!check.ok()) return OutcomeFromSsh(check.status(), c->target);
    const AutoExportCheck found = ParseAutoExportCheck(check->stdout_data);
    if (check->exit_status == 0 && found.dir_missing) return NoMsprofData(dir);
    if (check->exit_status == 0 && !found.export_started && found.AllExported())
      return TaskOutcome::Success(json{{"status", "ok"},
                                       {"already_exported", true},
                                       {"prof_dirs", static_cast<int64_t>(found.profs.size())},
                                       {"note", found.Describe()}});
    dir_seen = check->exit_status == 0 && found.unparsed == 0;
  }
  if (!dir_seen) {
    auto st = s.Stat(dir);
    if (!st.ok()) {
      if (ssh::ErrorKindOf(st.status()) == ssh::SshErrorKind::kRemoteError) return NoMsprofData(dir);
      return OutcomeFromSsh(st.status(), c->target);
    }
  }

  bool adopted = false;
  auto rc_stat = s.Stat(dir + ".export.rc");
  if (!rc_stat.ok()) {
    auto start = RunRemote(s, {"sh", "-c", kStartExport, "sh", dir}, std::chrono::seconds(60));
    if (!start.ok()) return OutcomeFromSsh(start.status(), c->target);
    if (start->exit_status != 0)
      return TaskOutcome::Failure("export_failed", fmt::format("could not start msprof --export: {}",
                                                               TailLines(start->stderr_data, 5)),
                                  false);
    adopted = start->stdout_data.find("adopted") != std::string::npos;
  } else {
    adopted = true;
  }

  const auto t0 = std::chrono::steady_clock::now();
  int polls = 0;
  for (;;) {
    // Up to 1 s on the target for the exit-code file (workers/remote_wait.h):
    // the end of the export is seen within ~50 ms.
    auto w = RunRemoteWait(s, FileExistsCheck(dir + ".export.rc"), std::chrono::milliseconds(1000));
    if (!w.ok()) return OutcomeFromSsh(w.status(), c->target);
    auto rc = s.ReadFile(dir + ".export.rc");
    if (rc.ok()) {
      const int code = std::atoi(rc->c_str());
      auto log = ReadHeadTail(s, dir + ".export.log", kLogReadCap);
      TaskOutcome out = TaskOutcome::Success(
          json{{"status", code == 0 ? "ok" : "failed"},
               {"exit_code", code},
               {"adopted", adopted},
               {"waited_s", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count()},
               {"log_tail", log.ok() ? TailLines(*log, 5) : ""}});
      if (log.ok()) out.blobs.emplace_back("msprof_export.log", *log);
      return out;
    }
    if (ssh::ErrorKindOf(rc.status()) != ssh::SshErrorKind::kRemoteError) return OutcomeFromSsh(rc.status(), c->target);
    if (tc.cancelled.load()) return TaskOutcome::Failure("cancelled", "export wait cancelled", false);
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
    if (waited.count() > timeout_s)
      return TaskOutcome::Failure("export_timeout", fmt::format("msprof --export still running after {} s", waited.count()),
                                  false);
    if (++polls % 10 == 0) {
      auto alive = RunRemote(s, {"sh", "-c", kAlive, "sh", dir}, std::chrono::seconds(30));
      if (alive.ok() && alive->stdout_data.find("gone") != std::string::npos) {
        // Died without writing its rc (killed): give the rc file one more look, then fail.
        if (!s.Stat(dir + ".export.rc").ok())
          return TaskOutcome::Failure("export_died", "msprof --export ended without an exit code (killed?)", false);
      }
    }
    tc.progress(fmt::format("msprof export running for {} s", waited.count()));
  }
}

}  // namespace npuprof::workers
