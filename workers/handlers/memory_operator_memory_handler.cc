// memory.operator_memory: analyse() of every *_ascend_pt directory under the
// profile root, then the operator-memory digest of each rank, both on the
// target by one remote program per call (workers/profiling/
// operator_memory_program.h). Each call waits there up to a slice for
// analyse(), starting it (or attaching to it) in as many ranks at once as
// the target's cores and free memory allow (the first call chooses that
// limit; torch-profile's rule); a call after the timeout reads whatever the
// ranks hold. Only the digest crosses the link;
// a rank whose CSVs are missing or bad is said so in its digest, never an
// error of the task.
#include <algorithm>
#include <chrono>
#include <future>

#include <fmt/format.h>

#include "statemachine/operator_memory_digest.h"
#include "workers/memory/memory_tasks.h"
#include "workers/profiling/operator_memory_program.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// Beyond its wait, a call reads the ranks' CSVs on the target (capped at
// kOperatorCsvMaxBytes each: two 16 GiB files at some 50 MB/s of Python
// parsing are about 11 minutes; the lease is renewed meanwhile).
constexpr std::chrono::seconds kReadTimeout{1800};

}  // namespace

TaskOutcome MemOperatorMemory(const tasks::MemoryOperatorMemory& p, const proto::Task& task, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& root = p.profile_root();
  if (root.empty() || root[0] != '/') return TaskOutcome::Failure("bad_payload", "profile_root must be absolute", false);
  const int top_n = static_cast<int>(std::clamp<int64_t>(p.top_n() > 0 ? p.top_n() : 10, 1, 100));
  const auto timeout = std::chrono::seconds(std::clamp<int64_t>(p.analyse_timeout_s() > 0 ? p.analyse_timeout_s() : 1800,
                                                                1, 7 * 86400));
  const std::string marker = profiling::AnalyseMarkerName(task.task_id());
  auto session = ctx.pool.Acquire(*target);
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  // How many analyse() at once: chosen on the target by the first call (its
  // means), passed to every later one.
  int64_t limit = 0;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (std::chrono::steady_clock::now() - start));
    const bool final = left.count() <= 0;
    const auto budget = final ? std::chrono::milliseconds(0) : std::min(left, profiling::kOperatorMemoryWaitSlice);
    // The call runs on a thread of its own; the lease is extended every 5 s meanwhile.
    auto fut = std::async(std::launch::async, [&] {
      // Every call but the last may start analyse() (the launch attaches to a
      // running one); the last reads the ranks as they are.
      return RunRemote(*session, profiling::OperatorMemoryDigestArgv(root, marker, budget, final, top_n, !final, limit),
                       budget + kReadTimeout);
    });
    while (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
      ctx.progress(fmt::format("operator memory under {}", root));
    Result<ssh::ExecResult> run = fut.get();
    if (!run.ok()) return OutcomeFromSsh(run.status(), *target);
    if (run->exit_status != 0)
      return TaskOutcome::Failure(
          "operator_digest_failed",
          fmt::format("the operator-memory digest (python3, workers/profiling/remote/operator_memory_digest.py) "
                      "under {} {}: {}{}",
                      root, ExitText(*run), TailLines(run->stderr_data, 5),
                      run->exit_status == 127 ? "; python3 must be on the PATH of the machine's env script" : ""),
          run->timed_out);
    if (run->stdout_omitted > 0)
      return TaskOutcome::Failure("operator_digest_invalid",
                                  fmt::format("the operator-memory digest under {} printed more than it may", root),
                                  false);
    auto out = sm::ParseOperatorMemoryOutput(run->stdout_data);
    if (!out.ok())
      return TaskOutcome::Failure("operator_digest_invalid",
                                  fmt::format("the operator-memory digest under {} from {}: {}", root,
                                              target->Endpoint(), out.status().message()),
                                  false);
    if (out->analyse_limit && limit == 0) limit = out->analyse_limit->limit;
    if (!out->pending.empty() && !final) {
      if (ctx.cancelled.load())
        return TaskOutcome::Failure("cancelled", "analyse wait cancelled (analyse() keeps running)", false);
      ctx.progress(fmt::format("analyse: {} rank(s) running or waiting for their turn under {} ({} at a time)",
                               out->pending.size(), root, limit > 0 ? std::to_string(limit) : "?"));
      continue;
    }
    timed_out = final;
    json ranks = json::array();
    for (const auto& r : out->ranks) ranks.push_back(sm::OperatorMemoryRankJson(r));
    // (the limit the program applied is in the digest kept as a blob)
    json result = {{"profile_root", root}, {"ranks", ranks}};
    if (out->ranks.empty())
      result["note"] = "no *_ascend_pt directory under the profile root (the profiler wrote nothing)";
    else if (timed_out)
      result["note"] = fmt::format("analyse() did not finish within {} s: the ranks were read as they were",
                                   timeout.count());
    TaskOutcome o = TaskOutcome::Success(std::move(result));
    o.blobs.emplace_back("operator_memory_digest.json", run->stdout_data);
    return o;
  }
}

}  // namespace npuprof::workers
