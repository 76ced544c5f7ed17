// memory.wait_flush: after the service stop, waits until msprof has exited
// (no process of the service's group is left) and its PROF_* dirs are
// complete (end_info markers, or its completion lines), in one remote
// command per poll (flush_signals.h), or until the deadline (flush_wait.h).
//
// With the payload's `collect` (one-node runs), each poll's command also
// looks whether msprof's application mode already exported every PROF dir
// and, where it did, streams the CSVs (flush_then_collect.h): when the wait
// ends on msprof's own signals and that look found everything exported, the
// result carries `exported` (as memory.export answers it then) and
// `collected` (as memory.collect_csvs answers, its msprof_csvs/<name> blobs
// this task's), and the run needs neither task. Anything else (an export
// missing or started, a stream that does not read whole) leaves both out:
// the export and the collection then run as their own tasks, as before.
// Read-only either way: a re-delivered attempt reads the same.
#include <fmt/format.h>

#include "workers/handlers/auto_export_check.h"
#include "workers/handlers/flush_signals.h"
#include "workers/handlers/flush_then_collect.h"
#include "workers/handlers/flush_wait.h"
#include "workers/handlers/service_common.h"
#include "workers/memory/csv_collection.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

namespace {

// The last poll's look for msprof's own export (the command's part after the poll).
struct LastLook {
  std::string check;
  int exit_status = 0;
  uint64_t omitted = 0;
};

// `exported` and `collected` into the wait's outcome, where the look found
// every PROF dir exported by msprof and the CSVs read whole.
void FoldCollection(const tasks::MemoryCollectCsvs& collect, const LastLook& look, TaskOutcome& out) {
  const auto [check_out, csvs_out] = SplitAtThen(look.check);
  if (!csvs_out) return;  // the check did not find everything exported: nothing after it
  const AutoExportCheck found = ParseAutoExportCheck(std::string(check_out));
  if (found.export_started || !found.AllExported()) return;
  ssh::ExecResult csvs;
  csvs.exit_status = look.exit_status;
  csvs.stdout_data = std::string(*csvs_out);
  csvs.stdout_omitted = look.omitted;
  TaskOutcome collected = CsvsFromStream(collect, csvs);
  if (!collected.ok) return;  // the collection step reads them on its own and says why
  out.result["exported"] = json{{"status", "ok"},
                                {"already_exported", true},
                                {"prof_dirs", static_cast<int64_t>(found.profs.size())},
                                {"note", found.Describe()}};
  out.result["collected"] = std::move(collected.result);
  for (auto& b : collected.blobs) out.blobs.push_back(std::move(b));
}

}  // namespace

TaskOutcome MemWaitFlush(const tasks::MemoryWaitFlush& p, const proto::Task&, TaskContext& ctx) {
  service::Call c = service::Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  auto dir = service::ResolveRemotePath(*c.session, p.msprof_dir());
  if (!dir.ok()) return service::RemoteFailure(dir.status(), c.target);
  auto rt = service::ResolveRemotePath(*c.session, p.runtime_dir());
  if (!rt.ok()) return service::RemoteFailure(rt.status(), c.target);
  const std::string log_in = !p.stdout_log().empty() ? p.stdout_log() : *rt + "/stdout.log";
  auto log = service::ResolveRemotePath(*c.session, log_in);
  if (!log.ok()) return service::RemoteFailure(log.status(), c.target);
  if (dir->empty() || (*dir)[0] != '/' || (*log)[0] != '/')
    return TaskOutcome::Failure("bad_payload", "msprof_dir and stdout_log must be absolute paths", false);
  int64_t pgid = p.pid();
  if (pgid > 0 && !service::ServiceMarker(*rt).ok()) pgid = 0;  // no marked group to look at: markers only
  auto argv = MsprofFlushPollArgv(*dir, *log, pgid, *rt);
  if (!argv.ok()) return TaskOutcome::Failure("bad_payload", argv.status().message(), false);

  bool fold = p.has_collect();
  tasks::MemoryCollectCsvs collect = p.collect();
  collect.set_msprof_dir(*dir);
  const std::vector<std::string> folded = FlushThenCollectArgv(*argv, AutoExportCheckArgv(*dir, *log, CsvStreamScript()));
  std::optional<LastLook> look;
  TaskOutcome out = WaitForFlush(ctx, c.target, p.timeout_s(), p.deadline_ms(), "msprof to finish its flush", [&](json& detail) -> Result<std::optional<std::string>> {
    look.reset();
    auto r = RunRemote(*c.session, fold ? folded : *argv, std::chrono::seconds(fold ? 600 : 30));
    if (!r.ok()) return r.status();
    std::string poll_out = r->stdout_data;
    int poll_exit = r->exit_status;
    if (fold) {
      auto split = SplitFlushThenCollect(r->stdout_data);
      if (!split.ok()) {
        // Not the folded command's output (a shell that could not run it):
        // the poll alone, from now on, and the steps after it as tasks.
        fold = false;
        r = RunRemote(*c.session, *argv, std::chrono::seconds(30));
        if (!r.ok()) return r.status();
        poll_out = r->stdout_data;
        poll_exit = r->exit_status;
      } else {
        poll_out = std::move(split->poll);
        poll_exit = split->poll_exit;
        look = LastLook{std::move(split->check), r->exit_status, r->stdout_omitted};
      }
    }
    if (poll_exit != 0)
      return Status::Io(fmt::format("checking {} failed (it {}): {}", *dir,
                                    look ? fmt::format("exited {}", poll_exit) : ExitText(*r),
                                    TailLines(r->stderr_data, 3)));
    MsprofFlushPoll poll = ParseMsprofFlushPoll(poll_out, pgid > 0);
    detail = MsprofFlushJson(poll);
    detail["msprof_dir"] = *dir;
    return MsprofFlushSignal(poll);
  });
  if (!out.ok || !look) return out;
  const json& sig = out.result["signal"];  // set by WaitForFlush on every success
  const std::string signal = sig.is_string() ? sig.get<std::string>() : "";
  // msprof is gone and every PROF dir is complete: what its own export left is final.
  if (signal == "end_info" || signal == "completion_line") FoldCollection(collect, *look, out);
  return out;
}

}  // namespace npuprof::workers
