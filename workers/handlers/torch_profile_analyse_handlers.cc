// torch_profile.analyse_rank: run analyse() on one *_ascend_pt directory
// detached (re-attachable through marker files), verify its outputs and
// summarise the rank's kernels (kernel_summary_stream.h).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "parsers/msprof_csv_parser.h"
#include "statemachine/torch_profile_gates.h"
#include "workers/handlers/kernel_summary_stream.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/remote.h"
#include "workers/remote_wait.h"

namespace npuprof::workers {

namespace {

constexpr uint64_t kKernelHeadBytes = 256 * 1024;
constexpr uint64_t kMaxTraceCheckBytes = 64ull << 20;

// Existence plus a light content check of one output file.
json CheckOutput(ssh::SshSession& session, const std::string& path, bool kernel_details) {
  json rec = {{"path", path}, {"exists", false}};
  auto st = session.Stat(path);
  if (!st.ok() || st->is_dir) return rec;
  rec["exists"] = true;
  rec["size"] = st->size;
  if (kernel_details) {
    auto head = session.ReadFile(path, 0, kKernelHeadBytes);
    if (!head.ok()) return rec;
    std::string text = *head;
    if (st->size > kKernelHeadBytes) text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    auto check = CheckKernelDetailsCsv(text);
    rec["valid"] = check.ok();
    if (check.ok()) {
      rec["columns"] = check->columns;
      rec["data_rows_checked"] = check->data_rows;
    } else {
      rec["problem"] = check.status().message();
    }
  } else if (st->size <= kMaxTraceCheckBytes) {
    auto body = session.ReadFile(path);
    if (!body.ok()) return rec;
    auto check = CheckTraceViewJson(*body);
    rec["valid"] = check.ok();
    if (check.ok()) rec["event_count"] = check->event_count;
    else rec["problem"] = check.status().message();
  }
  return rec;
}

// The device of a rank: N of the PROF_*/device_N directories under its dir
// when they all name one device; nullopt otherwise (none, several, unreadable).
std::optional<int> RankDevice(ssh::SshSession& session, const std::string& dir) {
  auto top = session.ListDir(dir);
  if (!top.ok()) return std::nullopt;
  std::optional<int> device;
  for (const auto& e : *top) {
    if (!e.is_dir || e.name.rfind("PROF_", 0) != 0) continue;
    auto sub = session.ListDir(dir + "/" + e.name);
    if (!sub.ok()) continue;
    for (const auto& d : *sub) {
      if (!d.is_dir || d.name.rfind("device_", 0) != 0) continue;
      const std::string digits = d.name.substr(7);
      if (digits.empty() || digits.size() > 6 ||
          !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
        continue;
      const int n = std::stoi(digits);
      if (device && *device != n) return std::nullopt;
      device = n;
    }
  }
  return device;
}

}  // namespace

TaskOutcome TorchProfileAnalyseRank(const tasks::TorchProfileAnalyseRank& p, const proto::Task& task, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& dir = p.dir();
  if (dir.empty() || dir[0] != '/') return TaskOutcome::Failure("bad_payload", "dir must be absolute", false);
  const auto timeout = std::chrono::seconds(std::clamp<int64_t>(p.analyse_timeout_s(), 1, 7 * 86400));
  const std::string marker = profiling::AnalyseMarker(dir, task.task_id());
  auto session = ctx.pool.Get(*target);

  auto launch = RunRemote(*session, profiling::DetachedAnalyseArgv(dir, marker), std::chrono::seconds(60));
  if (!launch.ok()) return OutcomeFromSsh(launch.status(), *target);
  if (launch->exit_status != 0)
    return TaskOutcome::Failure("analyse_launch_failed",
                                fmt::format("could not start analyse() in {}: it {}: {}", dir, ExitText(*launch),
                                            TailLines(launch->stderr_data, 5)),
                                false);
  std::string how = launch->stdout_data;
  while (!how.empty() && (how.back() == '\n' || how.back() == ' ')) how.pop_back();

  json analyse = {{"marker", marker}, {"launch", how}, {"reattached", how != "started"}};
  const auto start = std::chrono::steady_clock::now();
  bool finished = false;
  // Each round waits on the target (workers/remote_wait.h) up to 1 s for the
  // exit-code file, so the end is seen within ~50 ms; every 10th round also
  // asks whether the process still runs.
  for (int round = 0;; ++round) {
    const auto left = timeout - (std::chrono::steady_clock::now() - start);
    if (left.count() > 0) {
      auto w = RunRemoteWait(
          *session, FileExistsCheck(marker + ".rc"),
          std::min(std::chrono::duration_cast<std::chrono::milliseconds>(left), std::chrono::milliseconds(1000)));
      if (!w.ok()) return OutcomeFromSsh(w.status(), *target);
    }
    auto rc = session->ReadFile(marker + ".rc");
    if (rc.ok()) {
      finished = true;
      analyse["exit_code"] = std::atoi(rc->c_str());
      break;
    }
    if (ssh::ErrorKindOf(rc.status()) != ssh::SshErrorKind::kRemoteError) return OutcomeFromSsh(rc.status(), *target);
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "analyse wait cancelled (analyse() keeps running)", false);
    if (std::chrono::steady_clock::now() - start > timeout) {
      analyse["error"] = fmt::format("analyse() did not finish within {} s", timeout.count());
      break;
    }
    if (round % 10 == 9) {
      auto alive = RunRemote(*session, profiling::AnalyseAliveArgv(marker), std::chrono::seconds(30));
      if (alive.ok() && alive->stdout_data.rfind("gone", 0) == 0) {
        analyse["error"] = "the analyse() process vanished without an exit code";
        break;
      }
    }
    ctx.progress(fmt::format("analyse {}", dir));
  }
  analyse["finished"] = finished;
  TaskOutcome out;
  auto log = ReadHeadTail(*session, marker + ".log", kLogReadCap);
  if (log.ok()) {
    analyse["log_tail"] = TailLines(*log, 5);
    out.blobs.emplace_back("analyse.log", *log);
  }

  const std::string base = dir + "/ASCEND_PROFILER_OUTPUT/";
  json kd = CheckOutput(*session, base + "kernel_details.csv", true);
  json tv = CheckOutput(*session, base + "trace_view.json", false);
  const bool kd_ok = kd.value("exists", false) && kd.value("valid", true);
  const bool tv_ok = tv.value("exists", false) && tv.value("valid", true);
  std::string status = sm::RankAnalysisStatus(kd.value("exists", false), tv_ok);
  if (status == "ok" && !kd_ok) status = "partial";  // CSV present but unreadable
  out.ok = true;
  out.result = json{{"path", dir},
                    {"outputs", {{"kernel_details_csv", kd}, {"trace_view_json", tv}}},
                    {"analysis_status", status},
                    {"analyse", analyse}};
  if (auto device = RankDevice(*session, dir)) out.result["device_id"] = *device;
  if (kd_ok) {
    out.result["kernel_summary"] = StreamKernelSummary(
        *session, base + "kernel_details.csv", [&] { ctx.progress(fmt::format("kernel summary {}", dir)); },
        ctx.cancelled);
  }
  return out;
}

}  // namespace npuprof::workers
