// service.launch: launch (or adopt) one vLLM service in the run's runtime dir.
//
// Idempotent: the runtime dir is fixed by (run, launch number). The launch
// record (devices, port, argv) is published once (first writer wins), the
// service is started only by whoever creates <runtime>/.started, and every
// other attempt adopts the pid it finds. So a re-dispatched launch never
// starts a second vLLM.
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "parsers/npu_smi_parser.h"
#include "workers/handlers/handlers.h"
#include "workers/handlers/service_common.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

namespace {

TaskOutcome NotStarted(std::string kind, std::string error, bool retryable, json extra = json::object()) {
  TaskOutcome o = TaskOutcome::Failure(std::move(kind), std::move(error), retryable);
  o.result = std::move(extra);
  o.result["started"] = false;
  return o;
}

// Picks tp*dp free devices from `npu-smi info`; refusal lists free and busy ones.
std::optional<TaskOutcome> SelectDevices(Call& c, json& rec, TaskOutcome& out) {
  const int64_t need = rec.value("tp", 1) * rec.value("dp", 1);
  auto run = RunRemote(*c.session, {"npu-smi", "info"}, std::chrono::seconds(60));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  if (run->exit_status != 0)
    return NotStarted("npu_smi_failed",
                      fmt::format("npu-smi info exited {} on {} (needed to pick free devices; or pass --devices): {}",
                                  run->exit_status, c.target.Endpoint(), TailLines(run->stderr_data, 3)),
                      false);
  out.blobs.emplace_back("npu_smi_info.txt", run->stdout_data);
  auto snap = parsers::ParseNpuSmi(run->stdout_data);
  if (!snap.ok())
    return NotStarted("unparseable", "npu-smi output could not be parsed: " + snap.status().message(), false);
  json free_ids = json::array(), busy = json::array();
  std::vector<std::string> busy_text;
  for (const auto& d : parsers::ClassifyDevices(*snap, rec.value("busy_threshold_mb", parsers::kDefaultBusyThresholdMb))) {
    if (d.busy) {
      busy.push_back({{"device", d.logical_id}, {"reason", d.reason}, {"used_mb", d.used_mb}, {"pids", d.pids}});
      busy_text.push_back(fmt::format("{} ({})", d.logical_id, d.reason));
    } else {
      free_ids.push_back(d.logical_id);
    }
  }
  if (static_cast<int64_t>(free_ids.size()) < need)
    return NotStarted("devices_unavailable",
                      fmt::format("need {} free NPU(s) (tp*dp) but {} are free: free [{}]; busy: {}. Wait for the "
                                  "busy devices, lower --tp/--dp, or pass --devices",
                                  need, free_ids.size(),
                                  fmt::join(free_ids.get<std::vector<int>>(), ","),
                                  busy_text.empty() ? "none" : fmt::format("{}", fmt::join(busy_text, "; "))),
                      false, json{{"free_devices", free_ids}, {"busy_devices", busy}});
  json chosen = json::array();
  for (int64_t i = 0; i < need; ++i) chosen.push_back(free_ids[i]);
  rec["devices"] = chosen;
  rec["device_selection"] = {{"free_devices", free_ids}, {"busy_devices", busy}};
  return std::nullopt;
}

std::optional<TaskOutcome> PickPort(Call& c, json& rec) {
  auto run = RunRemote(*c.session, FreePortArgv(), std::chrono::seconds(30));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  const int port = std::atoi(run->stdout_data.c_str());
  if (run->exit_status != 0 || port <= 0 || port > 65535)
    return NotStarted("port_unavailable",
                      fmt::format("could not find a free port on {} with python3 ({}): pass --port",
                                  c.target.Endpoint(), TailLines(run->stderr_data, 2)),
                      false);
  rec["port"] = port;
  return std::nullopt;
}

// Writes the launch record unless one exists; returns the record in force.
Result<json> PublishRecord(Call& c, const json& rec, uint32_t attempt) {
  const std::string rt = rec.value("runtime_dir", "");
  auto mk = RunRemote(*c.session, {"mkdir", "-p", "--", rt}, std::chrono::seconds(30));
  if (!mk.ok()) return mk.status();
  if (mk->exit_status != 0) return Status::Io(fmt::format("cannot create {}: {}", rt, TailLines(mk->stderr_data, 2)));
  const std::string tmp = fmt::format("{}/launch.json.tmp-{}", rt, attempt);
  if (Status s = c.session->WriteFile(tmp, rec.dump(2) + "\n"); !s.ok()) return s;
  auto pub = RunRemote(*c.session, PublishOnceArgv(rt, tmp, rt + "/launch.json"), std::chrono::seconds(30));
  if (!pub.ok()) return pub.status();
  auto text = c.session->ReadFile(rt + "/launch.json");
  if (!text.ok()) return text.status();
  json in_force = json::parse(*text, nullptr, false);
  if (in_force.is_discarded()) return Status::Corruption(rt + "/launch.json is not JSON");
  return in_force;
}

void FaultPause(TaskContext& ctx) {
  // Crash tests: hold the task after the start so a worker can be killed mid-launch.
  const char* ms = std::getenv("NPUPROF_FAULT_SERVICE_LAUNCH_PAUSE_MS");
  if (!ms) return;
  ctx.progress("fault injection: pausing after the start");
  SleepUnlessCancelled(ctx, std::chrono::milliseconds(std::atol(ms)));
}

}  // namespace

TaskOutcome Launch(const proto::Task& task, TaskContext& ctx) {
  Call c = Open(task, ctx);
  if (c.failure) return *c.failure;
  const json& p = c.payload;
  const std::string rt = p.value("runtime_dir", "");
  if (rt.size() < 2 || rt[0] != '/') return NotStarted("bad_payload", "runtime_dir must be an absolute path", false);

  TaskOutcome out;
  json rec;
  auto existing = c.session->ReadFile(rt + "/launch.json");
  if (existing.ok()) {
    rec = json::parse(*existing, nullptr, false);
    if (rec.is_discarded()) return TaskOutcome::Failure("corrupt_runtime", rt + "/launch.json is not JSON", false);
  } else if (ssh::ErrorKindOf(existing.status()) != ssh::SshErrorKind::kRemoteError) {
    return OutcomeFromSsh(existing.status(), c.target);
  } else {
    rec = {{"run_id", p.value("run_id", "")},     {"launch_no", p.value("launch_no", 1)},
           {"runtime_dir", rt},                   {"model", p.value("model", "")},
           {"served_model_name", p.value("served_model_name", json(nullptr))},
           {"tp", p.value("tp", 1)},              {"dp", p.value("dp", 1)},
           {"devices", p.value("devices", json(nullptr))},
           {"port", p.value("port", json(nullptr))},
           {"env", p.value("env", json::object())},
           {"extra_args", p.value("extra_args", json::array())},
           {"wrap_script", p.value("wrap_script", json(nullptr))},
           {"env_script", c.target.env_script},   {"busy_threshold_mb", p.value("busy_threshold_mb", 4096)}};
    if (rec["devices"].is_null()) {
      ctx.progress("selecting free devices (npu-smi info)");
      if (auto fail = SelectDevices(c, rec, out)) {
        for (auto& b : out.blobs) fail->blobs.push_back(b);
        return *fail;
      }
    }
    if (rec["port"].is_null())
      if (auto fail = PickPort(c, rec)) return *fail;
    rec["argv"] = ServeArgv(rec);
    auto published = PublishRecord(c, rec, task.attempt());
    if (!published.ok()) return OutcomeFromSsh(published.status(), c.target);
    rec = *published;
  }

  // Scripts are a pure function of the record; written only before the start.
  auto started_marker = c.session->Stat(rt + "/.started");
  if (!started_marker.ok() && ssh::ErrorKindOf(started_marker.status()) != ssh::SshErrorKind::kRemoteError)
    return OutcomeFromSsh(started_marker.status(), c.target);
  if (!started_marker.ok()) {
    auto serve_sh = ServeScript(rec);
    auto start_sh = StartScript(rec);
    if (!serve_sh.ok()) return NotStarted("invalid_input", serve_sh.status().message(), false);
    if (!start_sh.ok()) return NotStarted("invalid_input", start_sh.status().message(), false);
    if (Status s = c.session->WriteFile(rt + "/_serve.sh", *serve_sh, 0755); !s.ok()) return OutcomeFromSsh(s, c.target);
    if (Status s = c.session->WriteFile(rt + "/_start.sh", *start_sh, 0755); !s.ok()) return OutcomeFromSsh(s, c.target);
    out.blobs.emplace_back("_serve.sh", *serve_sh);
  }

  ctx.progress("starting the service (or adopting a running one)");
  auto run = RunRemote(*c.session, StartOrAdoptArgv(rt), std::chrono::seconds(60));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  std::istringstream words(run->stdout_data);
  std::string how, pid_text, alive;
  words >> how >> pid_text >> alive;
  if (how == "nopid" || run->exit_status != 0)
    return TaskOutcome::Failure(
        "launch_lost",
        fmt::format("{} was started but recorded no pid within 10 s (exit {}): {}", rt, run->exit_status,
                    TailLines(run->stderr_data + run->stdout_data, 3)),
        false);
  FaultPause(ctx);

  out.ok = true;
  out.result = {{"runtime_dir", rt},
                {"pid", std::atoll(pid_text.c_str())},
                {"pgid", std::atoll(pid_text.c_str())},
                {"alive_at_launch", alive == "alive"},
                {"adopted", how == "adopted"},
                {"port", rec.value("port", json(nullptr))},
                {"devices", rec.value("devices", json(nullptr))},
                {"serve_argv", rec.value("argv", json::array())},
                {"serve_sh", rt + "/_serve.sh"},
                {"start_sh", rt + "/_start.sh"},
                {"stdout_log", rt + "/stdout.log"},
                {"stderr_log", rt + "/stderr.log"},
                {"wrap_script", rec.value("wrap_script", json(nullptr))}};
  if (rec.contains("device_selection")) out.result["device_selection"] = rec["device_selection"];
  NoteHostKeyAcceptance(*c.session, p.value("machine", json::object()), out.result);
  return out;
}

}  // namespace npuprof::workers::service
