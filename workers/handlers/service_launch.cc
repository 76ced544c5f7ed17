// service.launch: launch (or adopt) one vLLM service in the run's runtime dir.
//
// Idempotent: the runtime dir is fixed by (run, launch number). The launch
// record (devices, port, argv) is published once (first writer wins), the
// service is started only by whoever creates <runtime>/.started, and every
// other attempt adopts the pid it finds. So a re-dispatched launch never
// starts a second vLLM.
//
// What runs is what is recorded: the service runs on the payload's devices
// (the run's lease) and nothing else, a record in force that names other
// devices fails the launch (corrupt_runtime), and _serve.sh runs the
// record's argv, which the result reports as serve_argv (verify compares its
// managed values with the spec: statemachine/launch_audit.h).
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
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "workers/handlers/handlers.h"
#include "workers/handlers/launch_in_one.h"
#include "workers/handlers/launch_prepare.h"
#include "workers/handlers/launch_record.h"
#include "workers/handlers/service_common.h"
#include "workers/handlers/service_handlers.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::workers::service {

namespace {

TaskOutcome NotStarted(std::string kind, std::string error, bool retryable, json extra = json::object()) {
  TaskOutcome o = TaskOutcome::Failure(std::move(kind), std::move(error), retryable);
  o.result = std::move(extra);
  o.result["started"] = false;
  return o;
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

// The head of a multi-node deployment told its data-parallel RPC port (the
// spec's, or the one npuprof chose for the run so that every node could
// launch at once): the port must be free there and not the API port, else
// nothing starts. The API port, when not given, is picked in the same run:
// by the runtime dir check's command on a first launch (`prepared`,
// launch_prepare.h), else by a command of its own.
std::optional<TaskOutcome> CheckRpcPort(Call& c, json& rec, const std::optional<HeadPorts>& prepared) {
  const int rpc = rec["deployment"].value("dp_rpc_port", 0);
  const bool pick_api = rec["port"].is_null();
  Result<HeadPorts> ports = Status::Internal("not checked");
  if (prepared) {
    ports = *prepared;
  } else {
    auto run = RunRemote(*c.session, HeadPortsArgv(rpc, pick_api), std::chrono::seconds(30));
    if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
    ports = run->exit_status == 0 ? ParseHeadPorts(run->stdout_data, pick_api)
                                  : Result<HeadPorts>(Status::Io(TailLines(run->stderr_data, 2)));
  }
  if (!ports.ok())
    return NotStarted("port_unavailable",
                      fmt::format("could not check the data-parallel RPC port {} on {} with python3 ({}): pass "
                                  "--dp-rpc-port and --port",
                                  rpc, c.target.Endpoint(), ports.status().message()),
                      false);
  if (pick_api) rec["port"] = ports->api;
  if (!ports->rpc_free || rec["port"] == rpc)
    return NotStarted("port_unavailable",
                      fmt::format("the data-parallel RPC port {} is not free on the head {} ({}): pass another "
                                  "--dp-rpc-port",
                                  rpc, c.target.Endpoint(), ports->rpc_free ? "it is the API port" : ports->rpc_why),
                      false);
  return std::nullopt;
}

// The head of a multi-node deployment told its RPC port, on a first launch
// of the payload: (rpc port, pick the API port); nullopt for any other launch.
std::optional<std::pair<int32_t, bool>> HeadPortsToCheck(const tasks::ServiceLaunch& p, const std::string& rt,
                                                         const std::string& env_script) {
  auto fresh = LaunchRecordFromPayload(p, rt, env_script);
  if (!fresh.ok() || !fresh->contains("deployment")) return std::nullopt;
  const json& dep = (*fresh)["deployment"];
  if (!dep.is_object() || dep.value("nodes", 0) <= 1 || dep.value("headless", false) || !dep.contains("dp_rpc_port") ||
      !dep["dp_rpc_port"].is_number_integer())
    return std::nullopt;
  return std::pair<int32_t, bool>(dep["dp_rpc_port"].get<int32_t>(), !fresh->contains("port") || (*fresh)["port"].is_null());
}

// Whether a first launch of this payload would pick its API port (a
// single-node service given no --port): the check's command then picks it
// too (launch_prepare.h).
bool WouldPickPort(const tasks::ServiceLaunch& p, const std::string& rt, const std::string& env_script) {
  auto fresh = LaunchRecordFromPayload(p, rt, env_script);
  if (!fresh.ok() || !fresh->contains("port") || !(*fresh)["port"].is_null()) return false;
  const json& dep = fresh->contains("deployment") ? (*fresh)["deployment"] : json::object();
  return !(dep.is_object() && dep.value("nodes", 0) > 1);
}

// The runtime dir checked (created) and, for a first launch that needs one,
// a port picked, in one command (launch_prepare.h). `prepared` is set when
// the port line could be read; a port line that cannot be read leaves it
// unset (the port is then picked by a command of its own).
Result<RuntimeDirReport> InspectAndPickPort(Call& c, const tasks::ServiceLaunch& p, const std::string& rt,
                                            std::optional<PreparedPort>& prepared,
                                            std::optional<HeadPorts>& prepared_head) {
  const std::vector<std::string> entries = {"launch.json", ".started", "pid"};
  auto check = InspectRuntimeDirArgv(*c.session, p.machine(), rt, /*create=*/true, entries);
  if (!check.ok()) return check.status();
  const bool pick = WouldPickPort(p, rt, c.target.env_script);
  const auto head = pick ? std::nullopt : HeadPortsToCheck(p, rt, c.target.env_script);
  auto r = RunRemote(*c.session,
                     head ? LaunchPrepareHeadArgv(*check, rt, entries, head->first, head->second)
                          : LaunchPrepareArgv(*check, rt, entries, pick),
                     std::chrono::seconds(60));
  if (!r.ok()) return r.status();
  auto report = RuntimeDirReportOf(*r, rt);
  if (!report.ok()) return report.status();
  if (head) {
    // Read where it can be; anything else leaves the check to a command of its own.
    auto ports = ParsePreparedHeadPorts(r->stdout_data, head->second);
    if (ports.ok() && ports->asked && ports->ports) prepared_head = ports->ports;
    else if (!ports.ok())
      spdlog::debug("launch in {}: {}; checking the head's ports with a command of its own", rt,
                    ports.status().message());
  }
  if (pick) {
    auto port = ParsePreparedPort(r->stdout_data);
    if (port.ok()) {
      prepared = *port;
      if (port->asked && port->port == 0) prepared->error = TailLines(r->stderr_data, 2);
    }
    else spdlog::debug("launch in {}: {}; picking the port with a command of its own", rt, port.status().message());
  }
  return report;
}

// The launch record in force (checked as a regular file of the user's
// before), decoded as launch_record.h says: its declared keys, each with its
// declared type.
Result<json> ReadRecord(Call& c, const std::string& rt) {
  auto text = c.session->ReadFile(rt + "/launch.json", 0, kMaxLaunchRecordBytes + 1);
  if (!text.ok()) return text.status();
  return DecodeLaunchRecord(rt, *text);
}

// Writes the launch record (0600) unless one exists; returns the record in
// force. One remote command when the record fits in an argument; file
// operations otherwise, or when that command fails (they name the cause:
// a full disk, a refusal).
Result<json> PublishRecord(Call& c, const std::string& rt, const json& rec, uint32_t attempt) {
  const std::string text = rec.dump(2) + "\n";
  if (text.size() <= kMaxInlineFileBytes) {
    auto r = c.session->Exec(ssh::BuildCommand(PublishRecordArgv(rt, attempt, kMaxLaunchRecordBytes + 1)),
                             std::chrono::seconds(30), text, kMaxLaunchRecordBytes + 4096);
    if (r.ok() && r->exit_status == 0 && r->stdout_omitted == 0) return DecodeLaunchRecord(rt, r->stdout_data);
    spdlog::debug("publishing {}/launch.json in one command: {}; using file operations", rt,
                  r.ok() ? ExitText(*r) : r.status().ToString());
  }
  const std::string tmp = fmt::format("{}/launch.json.tmp-{}", rt, attempt);
  if (Status s = c.session->WriteFile(tmp, text, 0600); !s.ok()) return s;
  auto pub = RunRemote(*c.session, PublishOnceArgv(tmp, rt + "/launch.json"), std::chrono::seconds(30));
  if (!pub.ok()) return pub.status();
  if (pub->exit_status != 0)
    return Status::Io(fmt::format("cannot publish {}/launch.json: {}", rt, TailLines(pub->stderr_data, 2)));
  return ReadRecord(c, rt);
}

// The scripts of a record (a pure function of it and the runtime dir).
struct Scripts {
  std::string serve, start;
};
Result<Scripts> ScriptsOf(const json& rec, const std::string& rt) {
  json script_rec = rec;
  script_rec["runtime_dir"] = rt;
  auto serve_sh = ServeScript(script_rec);
  if (!serve_sh.ok()) return serve_sh.status();
  auto start_sh = StartScript(script_rec);
  if (!start_sh.ok()) return start_sh.status();
  return Scripts{std::move(*serve_sh), std::move(*start_sh)};
}

// A first launch in one command (launch_in_one.h): the record published,
// the scripts written and the service started from one stdin. nullopt when
// it did not run to its end (the caller then takes the steps one by one);
// else the record in force and, when it was this attempt's, the start's
// output.
struct InOne {
  json record;                          // as DecodeLaunchRecord returns it
  std::optional<ssh::ExecResult> start; // own record: the start-or-adopt output
};
std::optional<Result<InOne>> LaunchInOne(Call& c, const std::string& rt, const json& rec, const std::string& marker,
                                         uint32_t attempt, bool& ran) {
  const std::string text = rec.dump(2) + "\n";
  auto own = DecodeLaunchRecord(rt, text);  // what a read-back would give
  if (!own.ok()) return std::nullopt;
  auto scripts = ScriptsOf(*own, rt);
  if (!scripts.ok() || text.size() > kMaxInlineFileBytes || scripts->serve.size() > kMaxInlineFileBytes ||
      scripts->start.size() > kMaxInlineFileBytes)
    return std::nullopt;
  // The texts in the command's environment, in the connection's command
  // shell (one round trip); on a channel of its own from its stdin where the
  // command shell cannot run it (nothing ran then).
  auto in_shell = ssh::BuildRemoteScriptChecked(
      c.target.env_script, LaunchInOneEnv(text, scripts->serve, scripts->start),
      LaunchInOneArgv(rt, attempt, text.size(), scripts->serve.size(), scripts->start.size(),
                      kMaxLaunchRecordBytes + 1, marker, LaunchTexts::kEnv));
  Result<ssh::ExecResult> r = Status::Precondition("not run");
  if (in_shell.ok()) {
    ran = true;  // from here on the service may have been started, whatever comes back
    r = c.session->ExecInCommandShell(*in_shell, std::chrono::seconds(60), kMaxLaunchRecordBytes + 4096);
  }
  if (!r.ok() && r.status().code() == Code::kFailedPrecondition && ssh::ErrorKindOf(r.status()) == ssh::SshErrorKind::kNone) {
    auto command = ssh::BuildRemoteScriptChecked(
        c.target.env_script, {},
        LaunchInOneArgv(rt, attempt, text.size(), scripts->serve.size(), scripts->start.size(),
                        kMaxLaunchRecordBytes + 1, marker, LaunchTexts::kStdin));
    if (!command.ok()) return std::nullopt;
    ran = true;
    r = c.session->Exec(*command, std::chrono::seconds(60), text + scripts->serve + scripts->start,
                        kMaxLaunchRecordBytes + 4096);
  }
  if (!r.ok() || r->stdout_omitted != 0) {
    spdlog::debug("launching in {} in one command: {}; taking the steps one by one", rt,
                  r.ok() ? "its output was cut" : r.status().ToString());
    return std::nullopt;
  }
  auto out = ParseLaunchInOne(r->stdout_data);
  if (!out.ok()) {
    spdlog::debug("launching in {} in one command: {} ({}); taking the steps one by one", rt, out.status().message(),
                  ExitText(*r));
    return std::nullopt;
  }
  if (!out->own_record) {
    auto other = DecodeLaunchRecord(rt, out->record);
    if (!other.ok()) return Result<InOne>(other.status());
    return Result<InOne>(InOne{std::move(*other), std::nullopt});
  }
  ssh::ExecResult start = *r;
  start.stdout_data = out->start_line;
  return Result<InOne>(InOne{std::move(*own), std::move(start)});
}

// Removes the launch record, scripts and temp record of a launch that
// started nothing, and the runtime dir when that leaves it empty; a failure
// to do so is only logged (the launch has already failed).
void RemoveUnstartedLaunch(Call& c, const std::string& rt, uint32_t attempt) {
  auto r = RunRemote(*c.session,
                     {"sh", "-c", "[ -e \"$1/.started\" ] && exit 0; rm -f -- \"$1/launch.json\" \"$1/_serve.sh\" "
                                  "\"$1/_start.sh\" \"$1/launch.json.tmp-$2\" && { rmdir -- \"$1\" 2>/dev/null; true; }",
                      "npuprof-unlaunch", rt, std::to_string(attempt)},
                     std::chrono::seconds(30));
  if (!r.ok() || r->exit_status != 0)
    spdlog::warn("launch in {} on {}: could not remove what it wrote: {}", rt, c.target.Endpoint(),
                 r.ok() ? TailLines(r->stderr_data, 2) : r.status().ToString());
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
  // The service runs on the run's leased devices and nowhere else: a payload
  // without them is refused before anything runs on the target.
  if (p.devices_size() == 0)
    return NotStarted("bad_payload", LaunchRecordFromPayload(p, p.runtime_dir(), "").status().message(), false);
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  // Until the runtime dir is seen, only a first attempt knows nothing was started.
  bool nothing_started = task.attempt() <= 1;
  bool in_one_ran = false;  // the one-command launch ran (and may have started it)
  auto before_start = [&](TaskOutcome o) {
    if (nothing_started && !in_one_ran) o.result["started"] = false;
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
  std::optional<PreparedPort> prepared;  // the port the check's command picked (a first launch)
  std::optional<HeadPorts> prepared_head;  // a head's ports checked by the same command (a first launch)
  auto dir = InspectAndPickPort(c, p, rt, prepared, prepared_head);
  if (!dir.ok()) return ssh_failure(dir.status());
  nothing_started = dir->Entry(".started").type == "absent";
  for (const auto& [name, what] : std::vector<std::pair<std::string, std::string>>{
           {"launch.json", "a launch record"}, {"pid", "the service's pid file"}})
    if (auto why = UntrustedFile(*dir, rt, name, what))
      return before_start(TaskOutcome::Failure("untrusted_runtime", *why, false));

  TaskOutcome out;
  json rec;
  std::optional<ssh::ExecResult> started_in_one;  // the one-command launch started (or adopted) it
  if (dir->Entry("launch.json").type == "file") {
    auto existing = ReadRecord(c, rt);
    if (!existing.ok()) {
      if (existing.status().code() == Code::kCorruption)
        return before_start(TaskOutcome::Failure("corrupt_runtime", existing.status().message(), false));
      return ssh_failure(existing.status());
    }
    rec = *existing;
    if (Status st = CheckRecordDevices(rec, p, rt); !st.ok())
      return before_start(TaskOutcome::Failure("corrupt_runtime", st.message(), false));
  } else {
    auto fresh = LaunchRecordFromPayload(p, rt, c.target.env_script);
    if (!fresh.ok()) return before_start(NotStarted("bad_payload", fresh.status().message(), false));
    rec = std::move(*fresh);
    rec["service_marker"] = "NPUPROF_SERVICE=" + *marker;
    const json& dep = rec.contains("deployment") ? rec["deployment"] : json::object();
    const bool multi = dep.is_object() && dep.value("nodes", 0) > 1;
    const bool headless = multi && dep.value("headless", false);
    if (multi && !headless && dep.contains("dp_rpc_port")) {
      if (auto fail = CheckRpcPort(c, rec, prepared_head)) return before_start(*fail);
    } else {
      if (rec["port"].is_null() && !headless) {  // a headless node serves no API
        if (prepared && prepared->asked && !multi) {
          if (prepared->port == 0)
            return before_start(NotStarted("port_unavailable",
                                           fmt::format("could not find a free port on {} with python3 ({}): pass "
                                                       "--port",
                                                       c.target.Endpoint(), prepared->error),
                                           false));
          rec["port"] = prepared->port;
        } else if (auto fail = PickPort(c, rec)) {
          return before_start(*fail);
        }
      }
      if (multi && !headless)
        if (auto fail = PickRpcPort(c, rec)) return before_start(*fail);
    }
    rec["argv"] = ServeArgv(rec);
    std::optional<Result<InOne>> in_one;
    if (nothing_started) in_one = LaunchInOne(c, rt, rec, *marker, task.attempt(), in_one_ran);
    if (in_one && !in_one->ok())  // another attempt's record that cannot be read
      return before_start(TaskOutcome::Failure("corrupt_runtime", in_one->status().message(), false));
    if (in_one) {
      rec = (*in_one)->record;
      started_in_one = std::move((*in_one)->start);
    } else {
      auto published = PublishRecord(c, rt, rec, task.attempt());
      if (!published.ok()) {
        if (nothing_started && published.status().code() == Code::kNoSpace)
          RemoveUnstartedLaunch(c, rt, task.attempt());
        if (published.status().code() == Code::kCorruption)
          return before_start(TaskOutcome::Failure("corrupt_runtime", published.status().message(), false));
        return ssh_failure(published.status());
      }
      rec = *published;
    }
    // Another attempt may have published first: the record in force is its.
    if (Status st = CheckRecordDevices(rec, p, rt); !st.ok())
      return before_start(TaskOutcome::Failure("corrupt_runtime", st.message(), false));
  }

  // Scripts are a pure function of the record; written only before the
  // start, by one command from its stdin when they are small, else (or when
  // it could not write them) with file operations.
  std::string serve_text, start_text;
  if (nothing_started) {
    auto scripts = ScriptsOf(rec, rt);
    if (!scripts.ok()) return before_start(NotStarted("invalid_input", scripts.status().message(), false));
    serve_text = std::move(scripts->serve);
    start_text = std::move(scripts->start);
    out.blobs.emplace_back("_serve.sh", serve_text);
  }
  auto write_scripts = [&]() -> std::optional<TaskOutcome> {
    for (const auto& [name, text] : {std::pair{"/_serve.sh", &serve_text}, std::pair{"/_start.sh", &start_text}}) {
      if (Status s = c.session->WriteFile(rt + name, *text, 0700); !s.ok()) {
        // Nothing was started: what this launch wrote goes (a full disk must
        // not keep a launch record a later attempt would adopt).
        RemoveUnstartedLaunch(c, rt, task.attempt());
        return ssh_failure(s);
      }
    }
    return std::nullopt;
  };
  if (nothing_started && !started_in_one) {
    // One command writes both from its stdin; file operations where it could not.
    bool written = false;
    if (serve_text.size() <= kMaxInlineFileBytes && start_text.size() <= kMaxInlineFileBytes) {
      auto w = c.session->Exec(ssh::BuildCommand(WriteScriptsArgv(rt, serve_text.size(), start_text.size())),
                               std::chrono::seconds(30), serve_text + start_text);
      written = w.ok() && w->exit_status == 0;
      if (!written)
        spdlog::debug("writing the scripts in {} in one command: {}; using file operations", rt,
                      w.ok() ? ExitText(*w) : w.status().ToString());
    }
    if (!written)
      if (auto failed = write_scripts()) return *failed;
  }

  ctx.progress("starting the service (or adopting a running one)");
  auto run = started_in_one ? Result<ssh::ExecResult>(*started_in_one)
                            : RunRemote(*c.session, StartOrAdoptArgv(rt, *marker), std::chrono::seconds(60));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c.target);
  std::istringstream words(run->stdout_data);
  std::string how, pid_text, state;
  words >> how >> pid_text >> state;
  if (how == "nopid" || run->exit_status != 0)
    return TaskOutcome::Failure(
        "launch_lost",
        fmt::format("{} was started but recorded no pid within 10 s ({}): {}", rt, ExitText(*run),
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
                // The argv _serve.sh runs (ArgvToRun), as read back from the record in force.
                {"serve_argv", ArgvToRun(rec)},
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
  if (rec.contains("deployment") && rec["deployment"].is_object()) out.result["deployment"] = rec["deployment"];
  NoteHostKeyAcceptance(*c.session, p.machine(), out.result);
  return out;
}

}  // namespace npuprof::workers::service
