#include <fmt/format.h>

#include "parsers/npu_smi_parser.h"
#include "workers/handlers/handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

TaskOutcome ProbeNpuSmi(const tasks::ProbeNpuSmi& payload, const proto::Task&, TaskContext& ctx) {
  const tasks::Machine& machine = payload.machine();
  auto target = TargetFromMachine(machine);
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  auto session = ctx.pool.Get(*target);
  auto run = RunRemote(*session, {"npu-smi", "info"}, NpuSmiTimeout(machine));
  if (!run.ok()) return OutcomeFromSsh(run.status(), *target);

  const std::string& raw = run->stdout_data;
  const std::string machine_name = MachineName(machine);
  if (run->exit_status == 127 || (raw.empty() && run->stderr_data.find("not found") != std::string::npos)) {
    return TaskOutcome::Failure(
        "npu_smi_missing",
        fmt::format("npu-smi is not on PATH on {} (env script '{}'){}: install the Ascend driver or fix --env-script",
                    machine_name, target->env_script, EnvScriptHint(*session)),
        false);
  }
  TaskOutcome out;
  out.blobs.emplace_back("npu_smi_info.txt", raw);
  if (run->exit_status != 0) {
    out.error_kind = "npu_smi_failed";
    out.error = fmt::format("npu-smi info {}: {}", ExitText(*run), TailLines(run->stderr_data, 5));
    return out;
  }
  auto snap = parsers::ParseNpuSmi(raw);
  if (!snap.ok()) {
    out.error_kind = "unparseable";
    out.error = "npu-smi output could not be parsed (raw text kept as evidence): " + snap.status().message();
    return out;
  }
  const int64_t threshold = payload.has_busy_threshold_mb() ? payload.busy_threshold_mb() : parsers::kDefaultBusyThresholdMb;
  json free_ids = json::array(), busy = json::array();
  for (const auto& d : parsers::ClassifyDevices(*snap, threshold)) {
    if (d.busy)
      busy.push_back({{"logical_id", d.logical_id}, {"npu", d.npu}, {"chip", d.chip}, {"reason", d.reason},
                      {"used_mb", d.used_mb}, {"pids", d.pids}});
    else
      free_ids.push_back(d.logical_id);
  }
  json parsed = parsers::NpuSmiToJson(*snap);
  out.ok = true;
  out.result = {{"raw", "npu_smi_info.txt"},
                {"tool_version", snap->tool_version},
                {"driver_version", snap->driver_version},
                {"device_count", snap->devices.size()},
                {"devices", parsed["devices"]},
                {"processes", parsed["processes"]},
                {"process_table_present", parsed["process_table_present"]},
                {"hbm", parsers::HbmSnapshotJson(*snap)},
                {"free_devices", free_ids},
                {"busy_devices", busy},
                {"busy_threshold_mb", threshold}};
  NoteHostKeyAcceptance(*session, machine, out.result);
  return out;
}

}  // namespace npuprof::workers
