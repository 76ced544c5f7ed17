// torch_profile.analyse_rank: run analyse() on one *_ascend_pt directory
// detached (re-attachable through marker files) and read the rank's digest:
// one remote program per call (workers/profiling/rank_digest.h) waits for
// analyse() on the target and, once it ended, checks the outputs and
// summarises the rank's kernels there; only the digest crosses the link.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "statemachine/torch_profile_gates.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/profiling/rank_digest.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// How long one digest call may take beyond its wait: the reading of the
// rank's outputs on the target (seconds for a 90 MB CSV, about a minute for
// a multi-GB trace_view.json).
constexpr std::chrono::seconds kDigestReadTimeout{300};

// While one digest call runs (its wait, then the reading of a large rank's
// files on the target, which may outlast the task's 60 s lease), the
// task's lease is extended every 15 s from a thread of its own; the
// progress callback only queues a message, from any thread.
class LeaseKeeper {
 public:
  LeaseKeeper(const std::function<void(const std::string&)>& progress, std::string message)
      : thread_([this, &progress, message = std::move(message)] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, std::chrono::seconds(15), [this] { return stop_; })) progress(message);
        }) {}
  ~LeaseKeeper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// One output file's check as the result carries it.
json OutputJson(const std::string& path, const profiling::OutputDigest& d, bool kernel_details) {
  json rec = {{"path", path}, {"exists", d.exists}};
  if (!d.exists) return rec;
  rec["size"] = d.size;
  if (d.valid) rec["valid"] = *d.valid;
  if (d.valid && !*d.valid) rec["problem"] = d.problem;
  if (kernel_details) {
    if (d.columns) rec["columns"] = *d.columns;
    if (d.data_rows) rec["data_rows_checked"] = *d.data_rows;
  } else if (d.event_count) {
    rec["event_count"] = *d.event_count;
  }
  return rec;
}

}  // namespace

TaskOutcome TorchProfileAnalyseRank(const tasks::TorchProfileAnalyseRank& p, const proto::Task& task, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& dir = p.dir();
  if (dir.empty() || dir[0] != '/') return TaskOutcome::Failure("bad_payload", "dir must be absolute", false);
  const auto timeout = std::chrono::seconds(std::clamp<int64_t>(p.analyse_timeout_s(), 1, 7 * 86400));
  const std::string marker = profiling::AnalyseMarker(dir, task.task_id());
  // A long call (each waits on the target up to a slice, then reads the
  // rank's outputs there): a session of its own (SshPool::Acquire), so the
  // ranks a worker analyses at once run at once. On the shared session they
  // queued behind each other, one analyse() per worker whatever the limit.
  auto session = ctx.pool.Acquire(*target);

  json analyse = {{"marker", marker}};
  const auto start = std::chrono::steady_clock::now();
  std::optional<profiling::RankDigest> digest;
  // Each call waits on the target up to one slice for analyse() to end (the
  // first one starts or attaches to it); the call that sees the end reads the
  // outputs in the same round trip. A call after the timeout reads them
  // whatever analyse() does.
  for (bool first = true; !digest; first = false) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (std::chrono::steady_clock::now() - start));
    const bool final = left.count() <= 0;
    const auto budget = final ? std::chrono::milliseconds(0) : std::min(left, profiling::kRankDigestWaitSlice);
    Result<ssh::ExecResult> run = Status::Internal("not run");
    {
      LeaseKeeper lease(ctx.progress, fmt::format("analyse {}", dir));
      // --analyse-export-type reaches analyse() through the launch script's environment.
      std::vector<std::pair<std::string, std::string>> env;
      if (!p.export_type().empty()) env.emplace_back(profiling::kAnalyseExportTypeEnv, p.export_type());
      run = RunRemote(*session, profiling::RankDigestArgv(dir, marker, budget, final, first),
                      budget + kDigestReadTimeout, env);
    }
    if (!run.ok()) return OutcomeFromSsh(run.status(), *target);
    if (run->exit_status != 0)
      return TaskOutcome::Failure(
          "rank_digest_failed",
          fmt::format("the rank digest program (python3, workers/profiling/remote/rank_digest.py) for {} {}: {}{}",
                      dir, ExitText(*run), TailLines(run->stderr_data, 5),
                      run->exit_status == 127 ? "; python3 must be on the PATH of the machine's env script" : ""),
          run->timed_out);
    if (run->stdout_omitted > 0 || run->stdout_data.size() > profiling::kMaxRankDigestBytes)
      return TaskOutcome::Failure("rank_digest_invalid",
                                  fmt::format("the rank digest for {} printed more than {} bytes", dir,
                                              profiling::kMaxRankDigestBytes),
                                  false);
    auto d = profiling::ParseRankDigest(run->stdout_data);
    if (!d.ok())
      return TaskOutcome::Failure("rank_digest_invalid",
                                  fmt::format("the rank digest for {} from {}: {}", dir, target->Endpoint(),
                                              d.status().message()),
                                  false);
    if (d->launch_exit)
      return TaskOutcome::Failure("analyse_launch_failed",
                                  fmt::format("could not start analyse() in {}: it exited {}: {}", dir,
                                              *d->launch_exit, TailLines(d->launch_stderr, 5)),
                                  false);
    if (first) {
      analyse["launch"] = d->launch;
      analyse["reattached"] = d->launch != "started";
    }
    if (d->finished) {
      analyse["exit_code"] = *d->exit_code;
    } else if (d->has_outputs) {
      analyse["error"] = d->alive ? fmt::format("analyse() did not finish within {} s", timeout.count())
                                  : std::string("the analyse() process vanished without an exit code");
    }
    if (d->finished || d->has_outputs) {
      digest = std::move(*d);
      break;
    }
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "analyse wait cancelled (analyse() keeps running)", false);
    ctx.progress(fmt::format("analyse {}", dir));
  }
  analyse["finished"] = digest->finished;
  TaskOutcome out;
  if (digest->log) {
    analyse["log_tail"] = TailLines(*digest->log, 5);
    out.blobs.emplace_back("analyse.log", *digest->log);
  }

  const std::string base = dir + "/ASCEND_PROFILER_OUTPUT/";
  json kd = OutputJson(base + "kernel_details.csv", digest->kernel_details, true);
  json tv = OutputJson(base + "trace_view.json", digest->trace_view, false);
  const bool kd_ok = kd.value("exists", false) && kd.value("valid", true);
  const bool tv_ok = tv.value("exists", false) && tv.value("valid", true);
  std::string status = sm::RankAnalysisStatus(kd.value("exists", false), tv_ok);
  if (status == "ok" && !kd_ok) status = "partial";  // CSV present but unreadable
  out.ok = true;
  out.result = json{{"path", dir},
                    {"outputs", {{"kernel_details_csv", kd}, {"trace_view_json", tv}}},
                    {"analysis_status", status},
                    {"analyse", analyse}};
  if (digest->device_id) out.result["device_id"] = *digest->device_id;
  if (kd_ok) {
    json ks;
    if (digest->kernel_summary) {
      ks = *digest->kernel_summary;
      ks["bytes_read"] = digest->kernel_details.bytes_read.value_or(0);
      ks["truncated"] = false;
    } else {
      ks = {{"error", digest->summary_error.empty() ? std::string("the digest carries no kernel summary")
                                                    : digest->summary_error}};
    }
    ks["path"] = base + "kernel_details.csv";
    out.result["kernel_summary"] = std::move(ks);
  }
  return out;
}

}  // namespace npuprof::workers
