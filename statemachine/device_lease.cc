#include "statemachine/device_lease.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/json_field.h"
#include "run_specs.pb.h"
#include "task_payloads.pb.h"
#include "task_results.pb.h"
#include "statemachine/event_types.h"
#include "statemachine/probe_machine.h"
#include "statemachine/run_kind.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_policies.h"

namespace npuprof::sm {

template <class Spec>
DeviceNeed ServiceDeviceNeed(const RunState& s, const Spec& spec) {
  DeviceNeed n;
  n.machine = s.machine;
  if (const auto devices = SpecDevices(spec.devices())) n.devices = DeviceIds(devices->begin(), devices->end());
  n.count = static_cast<int>(spec.tp() * spec.dp());
  if (n.devices) n.count = static_cast<int>(n.devices->size());
  n.probe_payload.set_busy_threshold_mb(spec.busy_threshold_mb());
  n.probe_payload.set_purpose(kLeaseProbePurpose);
  return n;
}

template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::ServeSpec&);
template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::TorchProfileSpec&);
template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::MemoryProfileSpec&);

void RequestDevicesOrStart(const RunKind& kind, Decision& d) {
  std::optional<DeviceNeed> need = kind.DevicesNeeded(d.state());
  if (!need || need->count <= 0) {
    kind.OnStart(d);
    return;
  }
  if (need->devices) {
    d.Emit(kDevicesRequested,
           json{{"machine", need->machine}, {"devices", DeviceIdsJson(*need->devices)}, {"count", need->count}});
    return;
  }
  // Any free ones: find out which are free first (the probe runs while queued).
  d.Schedule(need->probe_payload, PolicyFor("device-lease", kProbeTask));
}

bool IsLeaseProbe(const TaskInfo& task) {
  return task.kind == kProbeTask && task.payload.value("purpose", "") == kLeaseProbePurpose;
}

void OnLeaseProbeSucceeded(const RunKind& kind, Decision& d, const TaskResult& result) {
  const RunState& s = d.state();
  const auto& probe = result.Required<results::ProbeNpuSmiResult>();
  const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
  const int count = need ? need->count : 0;
  json busy = json::array();
  for (const auto& b : probe.busy_devices())
    if (b.has_logical_id()) busy.push_back(b.logical_id());
  d.Emit(kDevicesRequested, json{{"machine", s.machine},
                                 {"devices", nullptr},
                                 {"count", count},
                                 {"free", std::vector<int64_t>(probe.free_devices().begin(), probe.free_devices().end())},
                                 {"busy", busy}});
}

void OnLeaseProbeFailed(Decision& d, const TaskFailure& failure) {
  const std::string& kind = failure.error_kind();
  const std::string err = failure.error().empty() ? "probe failed" : failure.error();
  d.Finish(RunStatus::kFailed,
           fmt::format("device probe before the lease failed: {}{}", kind.empty() ? "" : kind + ": ", err));
}

Status CheckLeaseGrant(const RunState& s, const DeviceIds& devices) {
  if (s.terminal || s.lease.phase != LeasePhase::kWaiting)
    return Status::Precondition(fmt::format("run {} is not waiting for devices (lease phase '{}')", s.run_id,
                                            LeasePhaseName(s.lease.phase)));
  if (static_cast<int>(devices.size()) != s.lease.count)
    return Status::Invalid(fmt::format("grant of [{}] for run {} that needs {} device(s)", DeviceIdsText(devices),
                                       s.run_id, s.lease.count));
  if (s.lease.devices && *s.lease.devices != devices)
    return Status::Invalid(fmt::format("grant of [{}] for run {} that asked for [{}]", DeviceIdsText(devices),
                                       s.run_id, DeviceIdsText(*s.lease.devices)));
  return Status::Ok();
}

void OnLeaseGranted(const RunKind& kind, Decision& d, const DeviceIds& devices) {
  d.Emit(kDevicesLeased, json{{"machine", d.state().lease.machine}, {"devices", DeviceIdsJson(devices)}});
  kind.OnStart(d);
}

void OnLeaseRefused(Decision& d, const std::string& error) {
  d.Emit(kDevicesUnavailable, json{{"machine", d.state().lease.machine}, {"error", error}});
  d.Finish(RunStatus::kFailed, "devices_unavailable: " + error);
}

void ReleaseDevices(Decision& d, const std::string& reason) {
  const LeaseInfo& l = d.state().lease;
  if (l.phase != LeasePhase::kHeld) return;
  json p = {{"machine", l.machine}, {"devices", DeviceIdsJson(l.granted)}, {"reason", reason}};
  if (std::string why = ServiceMayStillRun(d.state()); !why.empty()) p["quarantine"] = why;
  d.Emit(kDevicesReleased, std::move(p));
}

namespace {

bool True(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_boolean() && v.get<bool>();
}

}  // namespace

std::string ServiceMayStillRun(const RunState& s) {
  const TaskInfo* launch = LastTask(s, "service.launch");
  if (!launch) return "";
  if (launch->status == TaskStatus::kFailed) {
    if (LaunchStartedNothing(*launch)) return "";
  }
  const TaskInfo* stop = LastTask(s, "service.stop");
  if (!stop) return "its service was launched and no stop was recorded";
  if (stop->status == TaskStatus::kSucceeded) {
    const json& r = Field(stop->result, "result");
    if (True(r, "stopped") || True(r, "already_gone") || True(r, "never_started")) return "";
    return "its last service.stop did not confirm the service stopped";
  }
  if (stop->status == TaskStatus::kFailed)
    return fmt::format("its service.stop failed: {}: {}", Field(stop->result, "error_kind").is_string()
                                                              ? Field(stop->result, "error_kind").get<std::string>()
                                                              : std::string(),
                       Field(stop->result, "error").is_string() ? Field(stop->result, "error").get<std::string>()
                                                              : std::string());
  return fmt::format("its service.stop did not finish ({})", TaskStatusName(stop->status));
}

void CheckQuarantinedDevices(const RunKind& kind, Decision& d, const DeviceIds& devices) {
  const RunState& s = d.state();
  if (s.terminal || s.lease.phase != LeasePhase::kWaiting || devices.empty()) return;
  for (const auto& [id, t] : s.tasks)
    if (IsQuarantineProbe(t) && (t.in_flight() || t.status == TaskStatus::kRetryWait)) return;  // one at a time
  const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
  if (!need) return;
  tasks::ProbeNpuSmi p;
  p.set_busy_threshold_mb(need->probe_payload.busy_threshold_mb());
  p.set_purpose(kQuarantineProbePurpose);
  for (const DeviceId id : devices) p.add_devices(id);
  d.Schedule(p, PolicyFor("device-quarantine", kProbeTask));
}

namespace {

// The quarantined devices a quarantine probe was asked to check, as DevicesChecked records them.
json CheckedDevices(const tasks::ProbeNpuSmi& asked) {
  return json(std::vector<int64_t>(asked.devices().begin(), asked.devices().end()));
}

}  // namespace

bool IsQuarantineProbe(const TaskInfo& task) {
  return task.kind == kProbeTask && task.payload.value("purpose", "") == kQuarantineProbePurpose;
}

void OnQuarantineProbeSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) {
  const auto& probe = result.Required<results::ProbeNpuSmiResult>();
  const auto asked = PayloadOf<tasks::ProbeNpuSmi>(task);
  const std::set<int64_t> free(probe.free_devices().begin(), probe.free_devices().end());
  json idle = json::array(), busy = json::array();
  for (const int64_t dev : asked.devices()) {
    if (free.count(dev)) {
      idle.push_back(dev);
      continue;
    }
    std::string reason = "not listed free by npu-smi";
    for (const auto& b : probe.busy_devices())
      if (b.has_logical_id() && b.logical_id() == dev && !b.reason().empty()) reason = b.reason();
    busy.push_back({{"device", dev}, {"reason", reason}});
  }
  d.Emit(kDevicesChecked, json{{"machine", d.state().lease.machine}, {"devices", CheckedDevices(asked)}, {"idle", idle},
                               {"busy", busy}, {"task_id", task.task_id}});
}

void OnQuarantineProbeFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) {
  d.Emit(kDevicesChecked, json{{"machine", d.state().lease.machine},
                               {"devices", CheckedDevices(PayloadOf<tasks::ProbeNpuSmi>(task))},
                               {"idle", json::array()},
                               {"busy", json::array()},
                               {"task_id", task.task_id},
                               {"error", failure.Classified()}});
}

bool ApplyLeaseEvent(RunState& s, const std::string& type, const json& p) {
  LeaseInfo& l = s.lease;
  // Absent or null: none (an empty list).
  const auto ids = [&](const char* key, const char* what) {
    const json& v = Field(p, key);
    return v.is_null() ? DeviceIds{} : DeviceIdsOrThrow(v, what);
  };
  if (type == kDevicesRequested) {
    l.phase = LeasePhase::kWaiting;
    l.machine = p.value("machine", s.machine);
    if (Field(p, "devices").is_null()) l.devices.reset();
    else l.devices = ids("devices", "DevicesRequested.devices");
    l.count = p.value("count", 0);
    l.free = ids("free", "DevicesRequested.free");
    l.busy = ids("busy", "DevicesRequested.busy");
    l.requested_ms = s.updated_ms;
  } else if (type == kDevicesLeased) {
    l.phase = LeasePhase::kHeld;
    l.granted = ids("devices", "DevicesLeased.devices");
    // "Any free ones": from now on the run uses exactly the leased ones.
    // (The fold then decodes the spec's message again: engine.cc.)
    if (!s.spec.value("devices", json(nullptr)).is_array()) s.spec["devices"] = DeviceIdsJson(l.granted);
  } else if (type == kDevicesReleased) {
    (void)ids("devices", "DevicesReleased.devices");  // read as the audit reads them
    l.phase = LeasePhase::kReleased;
  } else if (type == kDevicesUnavailable) {
    l.phase = LeasePhase::kRefused;
  } else if (type == kDevicesChecked) {
    // A record for the broker (quarantine); the run's lease is unchanged.
  } else {
    return false;
  }
  return true;
}

json LeaseSummary(const RunKind& kind, const RunState& s) {
  const LeaseInfo& l = s.lease;
  if (l.phase == LeasePhase::kNone) return nullptr;
  json j = {{"phase", LeasePhaseName(l.phase)}, {"machine", l.machine.empty() ? s.machine : l.machine}, {"count", l.count}};
  if (l.phase == LeasePhase::kProbing) {
    // Not recorded until DevicesRequested: the need says it.
    const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
    j["count"] = need ? need->count : 0;
  }
  const bool granted = l.phase == LeasePhase::kHeld || l.phase == LeasePhase::kReleased;
  j["devices"] = granted ? DeviceIdsJson(l.granted) : l.devices ? DeviceIdsJson(*l.devices) : json(nullptr);
  return j;
}

std::string FindDoubleLease(const std::vector<proto::Event>& events) {
  struct Holder {
    std::string run;
    uint64_t since = 0;
  };
  std::map<std::pair<std::string, DeviceId>, Holder> held;  // (machine, device) -> holder
  for (const auto& e : events) {
    if (e.type() != kDevicesLeased && e.type() != kDevicesReleased) continue;
    Result<json> parsed = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
    if (!parsed.ok() || !parsed->is_object())
      return fmt::format("global position {}: run {}'s {} is not a JSON object", e.global_pos(), e.run_id(), e.type());
    const json& p = *parsed;
    const std::string machine = p.value("machine", "");
    auto ids = DeviceIdsFromJson(p.value("devices", json::array()), e.type() + ".devices");
    if (!ids.ok())
      return fmt::format("global position {}: run {}: {}", e.global_pos(), e.run_id(), ids.status().message());
    for (const DeviceId dev : *ids) {
      const auto key = std::make_pair(machine, dev);
      if (e.type() == kDevicesLeased) {
        auto it = held.find(key);
        if (it != held.end() && it->second.run != e.run_id())
          return fmt::format("global position {}: run {} leased device {} on {} while run {} held it (since position {})",
                             e.global_pos(), e.run_id(), dev, machine, it->second.run, it->second.since);
        held[key] = {e.run_id(), e.global_pos()};
      } else {
        auto it = held.find(key);
        if (it != held.end() && it->second.run == e.run_id()) held.erase(it);
      }
    }
  }
  return "";
}

}  // namespace npuprof::sm
