// service.launch: launch (or adopt) one vLLM service in the run's runtime dir.
//
// Idempotent: the runtime dir is fixed by (run, launch number). The launch
// record (devices, port, argv) is published once (first writer wins), the
// service is started only by whoever creates <runtime>/.started, and every
// other attempt adopts the pid it finds. So a re-dispatched launch never
// starts a second vLLM.
//
// Safe on a shared host: the runtime dirs are created 0700 and checked
// (service_runtime_dir.h) before anything is read or written there; a
// launch.json or pid file npuprof cannot have written (a symbolic link,
// another owner) fails the launch instead of being adopted; an adopted pid
// that does not carry the service's marker is reported as not alive.
//
// A failure says result.started=false when this attempt knows that no
// attempt of the launch started anything: it is the first attempt and failed
// before its start command, or it saw no <runtime>/.started marker.
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "parsers/npu_smi_parser.h"
#include "workers/handlers/handlers.h"
#include "workers/handlers/launch_record.h"
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

// The head of a multi-node deployment: a free port for the data-parallel RPC
// listener the other nodes connect to, other than the API port.
std::optional<TaskOutcome> PickRpcPort(Call& c, json& rec) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto run = RunRemote(*c.session, FreePortArgv(), std::chrono::seconds(30));
    if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
    const int port = std::atoi(run->stdout_data.c_str());
    if (run->exit_status != 0 || port <= 0 || port > 65535)
      return NotStarted("port_unavailable",
                        fmt::format("could not find a free data-parallel RPC port on {} with python3 ({}): pass "
                                    "--dp-rpc-port",
                                    c.target.Endpoint(), TailLines(run->stderr_data, 2)),
                        false);
    if (rec.value("port", json(nullptr)) == port) continue;
    rec["deployment"]["dp_rpc_port"] = port;
    return std::nullopt;
  }
  return NotStarted("port_unavailable",
                    fmt::format("the free port {} found for the data-parallel RPC listener on {} is the API port: "
                                "pass --dp-rpc-port",
                                rec.value("port", 0), c.target.Endpoint()),
                    false);
}

// The launch record in force (checked as a regular file of the user's
// before), decoded as launch_record.h says: its declared keys, each with its
// declared type.
Result<json> ReadRecord(Call& c, const std::string& rt) {
  auto text = c.session->ReadFile(rt + "/launch.json", 0, kMaxLaunchRecordBytes + 1);
  if (!text.ok()) return text.status();
  return DecodeLaunchRecord(rt, *text);
}

// Writes the launch record (0600) unless one exists; returns the record in force.
Result<json> PublishRecord(Call& c, const std::string& rt, const json& rec, uint32_t attempt) {
  const std::string tmp = fmt::format("{}/launch.json.tmp-{}", rt, attempt);
  if (Status s = c.session->WriteFile(tmp, rec.dump(2) + "\n", 0600); !s.ok()) return s;
  auto pub = RunRemote(*c.session, PublishOnceArgv(tmp, rt + "/launch.json"), std::chrono::seconds(30));
  if (!pub.ok()) return pub.status();
  if (pub->exit_status != 0)
    return Status::Io(fmt::format("cannot publish {}/launch.json: {}", rt, TailLines(pub->stderr_data, 2)));
  return ReadRecord(c, rt);
}

void FaultPause(TaskContext& ctx) {
  // Crash tests: hold the task after the start so a worker can be killed mid-launch.
  const char* ms = std::getenv("NPUPROF_FAULT_SERVICE_LAUNCH_PAUSE_MS");
  if (!ms) return;
  ctx.progress("fault injection: pausing after the start");
  SleepUnlessCancelled(ctx, std::chrono::milliseconds(std::atol(ms)));
}

}  // namespace

TaskOutcome Launch(const tasks::ServiceLaunch& p, const proto::Task& task, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  // Until the runtime dir is seen, only a first attempt knows nothing was started.
  bool nothing_started = task.attempt() <= 1;
  auto before_start = [&](TaskOutcome o) {
    if (nothing_started) o.result["started"] = false;
    return o;
  };
  auto ssh_failure = [&](const Status& s) {
    if (IsRuntimeDirRefusal(s)) return before_start(TaskOutcome::Failure("unsafe_runtime_dir", s.message(), false));
    return before_start(RemoteFailure(s, c.target));
  };
  const std::string& given = p.runtime_dir();
  if (given.size() < 2 || (given[0] != '/' && given.rfind("~/", 0) != 0))
    return before_start(TaskOutcome::Failure("bad_payload", "runtime_dir must be an absolute or ~/ path", false));
  auto resolved = ResolveRemotePath(*c.session, given);
  if (!resolved.ok()) return ssh_failure(resolved.status());
  const std::string rt = *resolved;
  auto marker = ServiceMarker(rt);
  if (!marker.ok()) return before_start(TaskOutcome::Failure("bad_payload", marker.status().message(), false));

  ctx.progress("checking the runtime dir " + rt);
  auto dir = InspectRuntimeDir(*c.session, p.machine(), rt, /*create=*/true,
                               {"launch.json", ".started", "pid"});
  if (!dir.ok()) return ssh_failure(dir.status());
  nothing_started = dir->Entry(".started").type == "absent";
  for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
           {"launch.json", "a launch record"}, {"pid", "the service's pid file"}})
    if (auto why = UntrustedFile(*dir, rt, name, what))
      return before_start(TaskOutcome::Failure("untrusted_runtime", *why, false));

  TaskOutcome out;
  json rec;
  if (dir->Entry("launch.json").type == "file") {
    auto existing = ReadRecord(c, rt);
    if (!existing.ok()) {
      if (existing.status().code() == Code::kCorruption)
        return before_start(TaskOutcome::Failure("corrupt_runtime", existing.status().message(), false));
      return ssh_failure(existing.status());
    }
    rec = *existing;
  } else {
    rec = LaunchRecordFromPayload(p, rt, c.target.env_script);
    rec["service_marker"] = "NPUPROF_SERVICE=" + *marker;
    if (rec["devices"].is_null()) {
      ctx.progress("selecting free devices (npu-smi info)");
      if (auto fail = SelectDevices(c, rec, out)) {
        for (auto& b : out.blobs) fail->blobs.push_back(b);
        return before_start(*fail);
      }
    }
    const json& dep = rec.contains("deployment") ? rec["deployment"] : json::object();
    const bool multi = dep.is_object() && dep.value("nodes", 0) > 1;
    const bool headless = multi && dep.value("headless", false);
    if (rec["port"].is_null() && !headless)  // a headless node serves no API
      if (auto fail = PickPort(c, rec)) return before_start(*fail);
    if (multi && !headless && !dep.contains("dp_rpc_port"))
      if (auto fail = PickRpcPort(c, rec)) return before_start(*fail);
    rec["argv"] = ServeArgv(rec);
    auto published = PublishRecord(c, rt, rec, task.attempt());
    if (!published.ok()) {
      if (published.status().code() == Code::kCorruption)
        return before_start(TaskOutcome::Failure("corrupt_runtime", published.status().message(), false));
      return ssh_failure(published.status());
    }
    rec = *published;
  }

  // Scripts are a pure function of the record; written only before the start.
  if (nothing_started) {
    json script_rec = rec;
    script_rec["runtime_dir"] = rt;
    auto serve_sh = ServeScript(script_rec);
    auto start_sh = StartScript(script_rec);
    if (!serve_sh.ok()) return before_start(NotStarted("invalid_input", serve_sh.status().message(), false));
    if (!start_sh.ok()) return before_start(NotStarted("invalid_input", start_sh.status().message(), false));
    if (Status s = c.session->WriteFile(rt + "/_serve.sh", *serve_sh, 0700); !s.ok()) return ssh_failure(s);
    if (Status s = c.session->WriteFile(rt + "/_start.sh", *start_sh, 0700); !s.ok()) return ssh_failure(s);
    out.blobs.emplace_back("_serve.sh", *serve_sh);
  }

  ctx.progress("starting the service (or adopting a running one)");
  auto run = RunRemote(*c.session, StartOrAdoptArgv(rt, *marker), std::chrono::seconds(60));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  std::istringstream words(run->stdout_data);
  std::string how, pid_text, state;
  words >> how >> pid_text >> state;
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
                {"alive_at_launch", state == "alive"},
                {"adopted", how == "adopted"},
                {"service_marker", "NPUPROF_SERVICE=" + *marker},
                {"port", rec.value("port", json(nullptr))},
                {"devices", rec.value("devices", json(nullptr))},
                {"serve_argv", rec.value("argv", json::array())},
                {"serve_sh", rt + "/_serve.sh"},
                {"start_sh", rt + "/_start.sh"},
                {"stdout_log", rt + "/stdout.log"},
                {"stderr_log", rt + "/stderr.log"},
                {"wrap_script", rec.value("wrap_script", json(nullptr))}};
  if (state == "foreign")
    out.result["pid_not_ours"] = fmt::format(
        "pid {} in {}/pid is alive but carries no NPUPROF_SERVICE={} marker: the service is gone and its pid "
        "was reused by another process (not adopted)",
        pid_text, rt, *marker);
  if (rec.contains("device_selection")) out.result["device_selection"] = rec["device_selection"];
  if (rec.contains("deployment") && rec["deployment"].is_object()) out.result["deployment"] = rec["deployment"];
  NoteHostKeyAcceptance(*c.session, p.machine(), out.result);
  return out;
}

}  // namespace npuprof::workers::service
