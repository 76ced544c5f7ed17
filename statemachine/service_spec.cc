#include "statemachine/service_spec.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "common/json_field.h"
#include "run_specs.pb.h"
#include "statemachine/device_ids.h"
#include "statemachine/managed_flags.h"
#include "statemachine/serve_argv.h"
#include "statemachine/deployment_spec.h"
#include "statemachine/spec_checks.h"
#include "statemachine/task_result.h"

namespace npuprof::sm {

namespace {

bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

Status CheckAbsPath(const json& spec, const char* field, bool required, const char* fix) {
  if (!spec.contains(field) || spec[field].is_null() || spec[field] == "") {
    if (required) return Status::Invalid(fmt::format("{} is required: {}", field, fix));
    return Status::Ok();
  }
  if (!spec[field].is_string()) return Status::Invalid(fmt::format("{} must be a path string: {}", field, fix));
  const std::string v = spec[field];
  if (v[0] != '/' || HasControlChar(v) || v.size() > 4096)
    return Status::Invalid(fmt::format("{} '{}' is not an absolute path on the target: {}", field, v, fix));
  return Status::Ok();
}

Status CheckServedName(const json& spec) {
  if (!spec.contains("served_model_name") || spec["served_model_name"].is_null() || spec["served_model_name"] == "")
    return Status::Ok();
  const json& v = spec["served_model_name"];
  bool ok = v.is_string() && !v.get<std::string>().empty() && v.get<std::string>().size() <= 128 &&
            v.get<std::string>()[0] != '-';
  if (ok)
    for (unsigned char c : v.get<std::string>())
      if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ':')) ok = false;
  if (!ok)
    return Status::Invalid(fmt::format(
        "served_model_name '{}' is not allowed: use 1-128 characters from A-Z a-z 0-9 . _ - / : (not starting with -)",
        v.is_string() ? v.get<std::string>() : v.dump()));
  return Status::Ok();
}

bool LooksSecret(const std::string& name) {
  std::string up;
  for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  for (const char* w : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL"})
    if (up.find(w) != std::string::npos) return true;
  return false;
}

bool IsEnvName(const std::string& n) {
  if (n.empty() || n.size() > 128 || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

Status CheckEnv(json& spec) {
  json& env = spec["env"];
  if (env.is_null()) env = json::object();
  if (!env.is_object()) return Status::Invalid("env must be an object {NAME: value} (CLI: --env NAME=VALUE)");
  for (auto& [k, v] : env.items()) {
    if (!IsEnvName(k))
      return Status::Invalid(fmt::format("env name '{}' is not a shell variable name: use letters, digits and _ "
                                         "and do not start with a digit (e.g. --env HCCL_BUFFSIZE=200)",
                                         k));
    if (k == "ASCEND_RT_VISIBLE_DEVICES")
      return Status::Invalid("env ASCEND_RT_VISIBLE_DEVICES is set by npuprof from the devices: use --devices");
    if (LooksSecret(k))
      return Status::Invalid(fmt::format("env {} looks like a secret and would be recorded in the run's events: "
                                         "export it in the machine's env script instead",
                                         k));
    if (v.is_number() || v.is_boolean()) v = v.dump();
    if (!v.is_string() || HasControlChar(v.get<std::string>()))
      return Status::Invalid(fmt::format("env {} must be a one-line string value", k));
  }
  return Status::Ok();
}

Status CheckExtraArgs(json& spec, std::string_view kind) {
  json& a = spec["extra_args"];
  if (a.is_null()) a = json::array();
  if (!a.is_array()) return Status::Invalid("extra_args must be a list of strings (CLI: after --)");
  std::vector<std::string> args;
  for (const auto& x : a) {
    if (!x.is_string() || HasControlChar(x.get<std::string>()) || x.get<std::string>().size() > 65536)
      return Status::Invalid(fmt::format("extra_args holds {}: each argument must be a one-line string", x.dump()));
    args.push_back(x.get<std::string>());
  }
  // The flags npuprof sets, derives or records are never taken from extra args.
  return sm::CheckExtraArgs(kind, args);
}

// The address vLLM listens on: one npuprof reaches at 127.0.0.1 on the target.
Status CheckHost(json& spec) {
  if (!spec.contains("host") || spec["host"].is_null() || spec["host"] == "") {
    spec["host"] = nullptr;
    return Status::Ok();
  }
  const json& h = spec["host"];
  if (h.is_string() && (h == kDefaultServiceHost || h == "0.0.0.0" || h == "::")) return Status::Ok();
  return Status::Invalid(fmt::format(
      "host {} is not allowed: npuprof reaches the service at 127.0.0.1 on the target, so it must listen there: "
      "use --host 127.0.0.1 (the default), 0.0.0.0 or :: (every interface)",
      h.is_string() ? "'" + h.get<std::string>() + "'" : h.dump()));
}

void DefaultNull(json& spec, const char* field) {
  if (!spec.contains(field) || spec[field] == "") spec[field] = nullptr;
}

}  // namespace

Status ValidateServiceSpec(json& spec, std::string_view kind, const ServiceDefaults& defaults) {
  if (Status s = CheckAbsPath(spec, "model", true, "pass --model /abs/path/of/the/model/dir/on/the/target"); !s.ok())
    return s;
  DefaultNull(spec, "served_model_name");
  if (Status s = CheckServedName(spec); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "tp", 1, 1, 64); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "dp", 1, 1, 64); !s.ok()) return s;
  if (Status s = ValidateDeployment(spec, defaults.node_device_range); !s.ok()) return s;
  if (IsMultiNodeSpec(spec)) {
    // Each node's devices are its own (nodes[i].devices).
    if (defaults.node_device_range) spec.erase("devices");
    else spec["devices"] = nullptr;
  } else {
    DefaultNull(spec, "devices");
    if (Status s = NormaliseDeviceList(spec["devices"], spec["tp"].get<int64_t>() * spec["dp"].get<int64_t>(),
                                       {"devices", "--devices 0,1", "tp*dp", "omit --devices to pick free NPUs"});
        !s.ok())
      return s;
  }
  if (!spec.contains("port") || spec["port"].is_null() || spec["port"] == 0) spec["port"] = defaults.port;
  if (!spec["port"].is_null())
    if (Status s = CheckIntRange(spec, "port", 0, 1, 65535); !s.ok())
      return Status::Invalid(s.message() + " (omit --port to use a free port on the target)");
  if (Status s = CheckEnv(spec); !s.ok()) return s;
  if (Status s = CheckHost(spec); !s.ok()) return s;
  if (Status s = CheckExtraArgs(spec, kind); !s.ok()) return s;
  DefaultNull(spec, "wrap_script");
  if (Status s = CheckAbsPath(spec, "wrap_script", false, "give the absolute path of the wrap script on the target");
      !s.ok())
    return s;
  if (Status s = CheckIntRange(spec, "health_timeout_s", defaults.health_timeout_s, 1, 86400); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "stop_grace_s", defaults.stop_grace_s, 1, 600); !s.ok()) return s;
  return CheckIntRange(spec, "busy_threshold_mb", 4096, 0, 1 << 30);
}

std::string RuntimeBaseOf(const json& machine_record) {
  std::string base;
  if (machine_record.is_object() && machine_record.contains("runtime_base") &&
      machine_record["runtime_base"].is_string())
    base = machine_record["runtime_base"].get<std::string>();
  return RuntimeBaseOf(std::move(base));
}

std::string RuntimeBaseOf(std::string base) {
  if (base.empty()) base = kDefaultRuntimeBase;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base;
}

namespace {

std::string RuntimeDirUnder(const std::string& base, const std::string& run_id, int launch_no) {
  return fmt::format("{}/{}/service-{}", RuntimeBaseOf(base), run_id, launch_no);
}

}  // namespace

std::string ServiceRuntimeDir(const json& machine_record, const std::string& run_id, int launch_no) {
  return RuntimeDirUnder(StrField(machine_record, "runtime_base"), run_id, launch_no);
}

std::string EffectiveServedName(const json& j) {
  if (j.contains("served_model_name") && j["served_model_name"].is_string() && j["served_model_name"] != "")
    return j["served_model_name"];
  return j.value("model", "");
}

std::string EffectiveServedName(const tasks::ServiceLaunch& launch_payload) {
  return launch_payload.served_model_name().empty() ? launch_payload.model() : launch_payload.served_model_name();
}

std::optional<std::vector<int64_t>> SpecDevices(const google::protobuf::Value& devices) {
  if (!devices.has_list_value()) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& d : devices.list_value().values()) out.push_back(static_cast<int64_t>(d.number_value()));
  return out;
}
std::optional<std::vector<int64_t>> SpecDevices(const google::protobuf::RepeatedField<int64_t>& devices) {
  return std::vector<int64_t>(devices.begin(), devices.end());
}

namespace {

void AddKindEnv(google::protobuf::Map<std::string, std::string>& env, const json& kind_env) {
  if (!kind_env.is_object()) return;
  for (const auto& [k, v] : kind_env.items())
    if (v.is_string()) env[k] = v.get<std::string>();
}

}  // namespace

template <class Spec>
tasks::ServiceLaunch BuildLaunchPayload(const std::string& run_id, int launch_no, const Spec& spec,
                                        const std::vector<std::string>& kind_args, const json& kind_env) {
  tasks::ServiceLaunch p;
  p.set_run_id(run_id);
  p.set_launch_no(launch_no);
  p.set_runtime_dir(RuntimeDirUnder(spec.machine_record().runtime_base(), run_id, launch_no));
  p.set_model(spec.model());
  // Optional where null means vLLM's (or the kind's) default; torch-profile
  // always names it.
  if constexpr (requires { spec.has_served_model_name(); }) {
    if (spec.has_served_model_name()) p.set_served_model_name(spec.served_model_name());
  } else {
    p.set_served_model_name(spec.served_model_name());
  }
  p.set_tp(static_cast<int32_t>(spec.tp()));
  p.set_dp(static_cast<int32_t>(spec.dp()));
  if (const auto devices = SpecDevices(spec.devices()))
    for (int64_t d : *devices) p.add_devices(static_cast<int32_t>(d));
  if (spec.has_port()) p.set_port(spec.port());
  if (spec.has_host()) p.set_host(spec.host());
  auto& env = *p.mutable_env();
  AddKindEnv(env, kind_env);
  for (const auto& [k, v] : spec.env()) env[k] = v;
  for (const auto& a : kind_args) p.add_extra_args(a);
  for (const auto& a : spec.extra_args()) p.add_extra_args(a);
  if (spec.has_wrap_script()) p.set_wrap_script(spec.wrap_script());
  p.set_health_timeout_s(spec.health_timeout_s());
  p.set_stop_grace_s(spec.stop_grace_s());
  p.set_busy_threshold_mb(spec.busy_threshold_mb());
  return p;
}

template tasks::ServiceLaunch BuildLaunchPayload(const std::string&, int, const run_specs::ServeSpec&,
                                                 const std::vector<std::string>&, const json&);
template tasks::ServiceLaunch BuildLaunchPayload(const std::string&, int, const run_specs::TorchProfileSpec&,
                                                 const std::vector<std::string>&, const json&);
template tasks::ServiceLaunch BuildLaunchPayload(const std::string&, int, const run_specs::MemoryProfileSpec&,
                                                 const std::vector<std::string>&, const json&);

tasks::ServiceWaitReady BuildWaitReadyPayload(const tasks::ServiceLaunch& launch_payload,
                                              const results::ServiceLaunchResult& launch, int64_t now_ms) {
  const int64_t timeout_s = launch_payload.health_timeout_s() > 0 ? launch_payload.health_timeout_s() : 300;
  tasks::ServiceWaitReady p;
  p.set_runtime_dir(!launch.runtime_dir().empty() ? launch.runtime_dir() : launch_payload.runtime_dir());
  if (launch.pid() != 0) p.set_pid(launch.pid());
  if (launch.port().has_number_value()) p.set_port(static_cast<int32_t>(launch.port().number_value()));
  p.set_served_model_name(EffectiveServedName(launch_payload));
  p.set_health_timeout_s(timeout_s);
  p.set_deadline_ms(now_ms + timeout_s * 1000);
  return p;
}

tasks::ServiceWatch BuildWatchPayload(const std::string& runtime_dir, std::optional<int64_t> pid, int64_t poll_s) {
  tasks::ServiceWatch p;
  p.set_runtime_dir(runtime_dir);
  if (pid) p.set_pid(*pid);
  p.set_poll_s(poll_s);
  return p;
}

tasks::ServiceStop BuildStopPayload(const std::string& runtime_dir, std::optional<int64_t> pid, bool force,
                                    int64_t grace_s) {
  tasks::ServiceStop p;
  p.set_runtime_dir(runtime_dir);
  if (pid) p.set_pid(*pid);
  p.set_force(force);
  p.set_grace_s(grace_s);
  return p;
}

bool LaunchStartedNothing(const TaskInfo& launch) {
  if (launch.kind != kServiceLaunchTask || launch.status != TaskStatus::kFailed) return false;
  auto recorded = RecordedResult<results::ServiceLaunchResult>(launch);
  return recorded.ok() && recorded->has_started() && !recorded->started();
}

json ServiceRecordFromLaunch(const json& p, const json& r) {
  // pid and port are integers or null (unknown): a launch record on the
  // target that says otherwise is not copied into the run's service record.
  const auto integer_or_null = [](const json& v) { return v.is_number_integer() ? v : json(nullptr); };
  json rec = {{"status", "starting"},
              {"model", p.value("model", "")},
              {"served_model_name", EffectiveServedName(p)},
              {"tp", p.value("tp", 1)},
              {"dp", p.value("dp", 1)},
              {"devices", r.value("devices", p.value("devices", json(nullptr)))},
              {"env", p.value("env", json::object())},
              {"extra_args", p.value("extra_args", json::array())},
              {"port", integer_or_null(r.contains("port") ? r["port"] : Field(p, "port"))},
              {"pid", integer_or_null(Field(r, "pid"))},
              {"runtime_dir", r.value("runtime_dir", p.value("runtime_dir", ""))},
              {"stdout_log", r.value("stdout_log", json(nullptr))},
              {"stderr_log", r.value("stderr_log", json(nullptr))},
              {"serve_sh", r.value("serve_sh", json(nullptr))},
              {"serve_argv", r.value("serve_argv", json::array())},
              {"wrap_script", p.value("wrap_script", json(nullptr))},
              {"launch_no", p.value("launch_no", 1)},
              {"adopted", r.value("adopted", false)}};
  if (r.contains("pid_not_ours")) rec["pid_not_ours"] = r["pid_not_ours"];
  return rec;
}

}  // namespace npuprof::sm
