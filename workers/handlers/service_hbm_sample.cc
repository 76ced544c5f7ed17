// service.hbm_sample (serve --watch-hbm): one sample of a ready service's
// HBM. One remote command over the worker's pooled connection to the
// machine: the target's clock, `npu-smi info`, the clock again
// (parsers/hbm_sample_output.h reads it); only the per-device figures cross
// back into the result. Read-only, so a re-dispatch samples again.
// Failures: npu_smi_missing (not on PATH; not retried), npu_smi_failed
// (non-zero exit) and unparseable (its raw text kept as a blob), SSH failures
// as OutcomeFromSsh.
#include <chrono>

#include <fmt/format.h>

#include "parsers/hbm_sample_output.h"
#include "workers/handlers/service_common.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

namespace {

// A fixed script (no value of the payload goes into it): the stamps go to
// stderr so stdout is npu-smi's table as it printed it.
constexpr const char* kSampleScript =
    "printf 'npuprof-t0 %s\\n' \"$(date +%s%N)\" >&2; npu-smi info; rc=$?; "
    "printf 'npuprof-t1 %s\\n' \"$(date +%s%N)\" >&2; exit $rc";

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TaskOutcome HbmSample(const tasks::ServiceHbmSample& p, const proto::Task&, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  const int64_t w0 = WallMs();
  auto run = RunRemote(*c.session, {"sh", "-c", kSampleScript, "npuprof-hbm-sample"}, NpuSmiTimeout(p.machine()));
  const int64_t w1 = WallMs();
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  if (run->exit_status == 127)
    return TaskOutcome::Failure("npu_smi_missing",
                                fmt::format("npu-smi is not on PATH on {} (env script '{}'){}: install the Ascend "
                                            "driver or fix the machine's env script",
                                            MachineName(p.machine()), c.target.env_script,
                                            EnvScriptHint(*c.session)),
                                false);
  TaskOutcome out;
  out.result = json{{"sample_no", p.sample_no()}};
  if (run->exit_status != 0) {
    out.blobs.emplace_back(fmt::format("hbm_sample_{}_npu_smi.txt", p.sample_no()), run->stdout_data);
    out.error_kind = "npu_smi_failed";
    out.error = fmt::format("npu-smi info {}: {}", ExitText(*run), TailLines(run->stderr_data, 5));
    out.result["error_detail"] = TailLines(run->stderr_data, 5);
    return out;
  }
  std::vector<int64_t> devices(p.devices().begin(), p.devices().end());
  auto reading = parsers::ParseHbmSampleOutput(run->stdout_data, run->stderr_data, devices, w0, w1);
  if (!reading.ok()) {
    out.blobs.emplace_back(fmt::format("hbm_sample_{}_npu_smi.txt", p.sample_no()), run->stdout_data);
    out.error_kind = "unparseable";
    out.error = "npu-smi output could not be read as a sample (raw text kept as evidence): " +
                reading.status().message();
    out.result["error_detail"] = reading.status().message();
    return out;
  }
  json devs = json::array();
  for (const auto& d : reading->devices)
    devs.push_back({{"device_id", d.device_id}, {"used_mb", d.used_mb}, {"total_mb", d.total_mb}});
  out.ok = true;
  out.result["t_ms"] = reading->t_ms;
  out.result["clock"] = reading->clock;
  out.result["devices"] = std::move(devs);
  return out;
}

}  // namespace npuprof::workers::service
