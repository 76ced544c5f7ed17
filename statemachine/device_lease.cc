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
#include "statemachine/deployment_spec.h"
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
  const std::vector<DeploymentNodeInfo> nodes = DeploymentNodes(spec);
  const int64_t per_node = spec.tp() * DpLocal(spec);
  for (const DeploymentNodeInfo& node : nodes) {
    DeviceNeedLeg leg;
    leg.machine = nodes.size() > 1 ? node.machine : s.machine;
    if (nodes.size() > 1) leg.record = node.record;
    if (node.devices) leg.devices = DeviceIds(node.devices->begin(), node.devices->end());
    leg.count = static_cast<int>(leg.devices ? static_cast<int64_t>(leg.devices->size()) : per_node);
    n.legs.push_back(std::move(leg));
  }
  n.probe_payload.set_busy_threshold_mb(spec.busy_threshold_mb());
  n.probe_payload.set_purpose(kLeaseProbePurpose);
  return n;
}

template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::ServeSpec&);
template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::TorchProfileSpec&);
template DeviceNeed ServiceDeviceNeed(const RunState&, const run_specs::MemoryProfileSpec&);

namespace {

// The probe of one leg: the need's payload, sent to that leg's machine.
tasks::ProbeNpuSmi LegProbe(const DeviceNeed& need, const DeviceNeedLeg& leg, const char* purpose) {
  tasks::ProbeNpuSmi p;
  p.set_busy_threshold_mb(need.probe_payload.busy_threshold_mb());
  p.set_purpose(purpose);
  if (!leg.record.name().empty()) *p.mutable_machine() = leg.record;
  return p;
}

// The machine a task was sent to, or the run's when its payload names none.
std::string MachineOf(const RunState& s, const TaskInfo& task) {
  std::string m = TaskMachine(task);
  return m.empty() ? s.machine : m;
}

// The latest lease probe of the need's leg on `machine` that succeeded
// (nullptr when none yet). A probe whose payload names no machine went to the
// run's own machine: the first leg's.
const TaskInfo* SucceededProbeOn(const RunState& s, const DeviceNeed& need, const std::string& machine) {
  const TaskInfo* best = nullptr;
  uint64_t best_no = 0;
  for (const auto& [id, t] : s.tasks) {
    if (!IsLeaseProbe(t) || t.status != TaskStatus::kSucceeded) continue;
    const std::string named = TaskMachine(t);
    const std::string on = named.empty() && !need.legs.empty() ? need.legs[0].machine : named;
    if (on != machine) continue;
    const uint64_t no = TaskNumber(id);
    if (!best || no >= best_no) best = &t, best_no = no;
  }
  return best;
}

// The free and busy ids a lease probe's result lists.
std::pair<json, json> ProbeView(const results::ProbeNpuSmiResult& probe) {
  DeviceIds busy;
  for (const auto& b : probe.busy_devices())
    if (b.has_logical_id()) busy.push_back(static_cast<DeviceId>(b.logical_id()));
  return {DeviceIdsJson(DeviceIds(probe.free_devices().begin(), probe.free_devices().end())), DeviceIdsJson(busy)};
}

// DevicesRequested from the need and, for the legs without devices, their
// probes' views. A one-leg lease keeps the form it always had.
json RequestPayload(const RunState& s, const DeviceNeed& need) {
  json legs = json::array();
  for (const DeviceNeedLeg& leg : need.legs) {
    json l = {{"machine", leg.machine}, {"devices", leg.devices ? DeviceIdsJson(*leg.devices) : json(nullptr)},
              {"count", leg.count}};
    if (!leg.devices) {
      const TaskInfo* probe = SucceededProbeOn(s, need, leg.machine);
      auto [free, busy] = probe ? ProbeView(RecordedOf<results::ProbeNpuSmiResult>(*probe))
                                : std::pair<json, json>{json::array(), json::array()};
      l["free"] = std::move(free);
      l["busy"] = std::move(busy);
    }
    legs.push_back(std::move(l));
  }
  if (legs.size() == 1) return legs[0];
  return json{{"machine", need.legs[0].machine}, {"count", need.count()}, {"legs", std::move(legs)}};
}

}  // namespace

void RequestDevicesOrStart(const RunKind& kind, Decision& d) {
  std::optional<DeviceNeed> need = kind.DevicesNeeded(d.state());
  if (!need || need->count() <= 0) {
    kind.OnStart(d);
    return;
  }
  bool probing = false;
  for (const DeviceNeedLeg& leg : need->legs) {
    if (leg.devices) continue;
    // Any free ones: find out which are free first (the probes run while
    // queued, one per machine, at once).
    d.Schedule(LegProbe(*need, leg, kLeaseProbePurpose), PolicyFor("device-lease", kProbeTask));
    probing = true;
  }
  if (!probing) d.Emit(kDevicesRequested, RequestPayload(d.state(), *need));
}

bool IsLeaseProbe(const TaskInfo& task) {
  return task.kind == kProbeTask && task.payload.value("purpose", "") == kLeaseProbePurpose;
}

void OnLeaseProbeSucceeded(const RunKind& kind, Decision& d, const TaskInfo& task, const TaskResult& result) {
  (void)task;
  (void)result.Required<results::ProbeNpuSmiResult>();  // a probe without a result fails its task
  const RunState& s = d.state();
  const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
  if (!need) return;
  // The request waits for every leg's probe.
  for (const DeviceNeedLeg& leg : need->legs)
    if (!leg.devices && !SucceededProbeOn(s, *need, leg.machine)) return;
  d.Emit(kDevicesRequested, RequestPayload(s, *need));
}

void OnLeaseProbeFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) {
  const std::string& kind = failure.error_kind();
  const std::string err = failure.error().empty() ? "probe failed" : failure.error();
  const std::string machine = MachineOf(d.state(), task);
  const bool multi = IsMultiNodeSpec(d.state().spec);
  if (multi) d.AbandonOutstanding("the device probe on " + machine + " failed");  // the other nodes' probes
  d.Finish(RunStatus::kFailed, fmt::format("device probe before the lease failed{}: {}{}", multi ? " on " + machine : "",
                                           kind.empty() ? "" : kind + ": ", err));
}

namespace {

// The grant with every leg's machine named: a leg without one is the only
// leg of a one-leg lease.
Result<LeaseGrant> NamedLegs(const RunState& s, const LeaseGrant& grant) {
  LeaseGrant out = grant;
  for (LeaseGrantLeg& g : out) {
    if (!g.machine.empty()) continue;
    if (s.lease.legs.size() != 1)
      return Status::Invalid(fmt::format("grant of [{}] for run {} whose lease has {} legs: name each machine",
                                         DeviceIdsText(g.devices), s.run_id, s.lease.legs.size()));
    g.machine = s.lease.legs[0].machine;
  }
  return out;
}

}  // namespace

Status CheckLeaseGrant(const RunState& s, const LeaseGrant& grant) {
  if (s.terminal || s.lease.phase != LeasePhase::kWaiting)
    return Status::Precondition(fmt::format("run {} is not waiting for devices (lease phase '{}')", s.run_id,
                                            LeasePhaseName(s.lease.phase)));
  auto legs = NamedLegs(s, grant);
  if (!legs.ok()) return legs.status();
  if (legs->size() != s.lease.legs.size())
    return Status::Invalid(fmt::format("grant of {} leg(s) for run {} whose lease has {} leg(s): a gang is granted whole",
                                       legs->size(), s.run_id, s.lease.legs.size()));
  const bool one = s.lease.legs.size() == 1;
  for (const LeaseGrantLeg& g : *legs) {
    const LeaseLeg* leg = s.lease.Leg(g.machine);
    if (!leg) return Status::Invalid(fmt::format("grant on {} for run {} that asked for nothing there", g.machine, s.run_id));
    const std::string on = one ? "" : " on " + g.machine;
    if (static_cast<int>(g.devices.size()) != leg->count)
      return Status::Invalid(fmt::format("grant of [{}]{} for run {} that needs {} device(s)", DeviceIdsText(g.devices),
                                         on, s.run_id, leg->count));
    if (leg->devices && *leg->devices != g.devices)
      return Status::Invalid(fmt::format("grant of [{}]{} for run {} that asked for [{}]", DeviceIdsText(g.devices), on,
                                         s.run_id, DeviceIdsText(*leg->devices)));
  }
  return Status::Ok();
}

void OnLeaseGranted(const RunKind& kind, Decision& d, const LeaseGrant& grant) {
  auto legs = NamedLegs(d.state(), grant);  // checked by CheckLeaseGrant
  if (!legs.ok() || legs->empty()) return;
  if (d.state().lease.legs.size() == 1) {
    d.Emit(kDevicesLeased, json{{"machine", legs->front().machine}, {"devices", DeviceIdsJson(legs->front().devices)}});
  } else {
    json out = json::array();
    for (const LeaseLeg& leg : d.state().lease.legs)
      for (const LeaseGrantLeg& g : *legs)
        if (g.machine == leg.machine) out.push_back({{"machine", g.machine}, {"devices", DeviceIdsJson(g.devices)}});
    d.Emit(kDevicesLeased, json{{"machine", d.state().lease.legs[0].machine}, {"legs", std::move(out)}});
  }
  kind.OnStart(d);
}

void OnLeaseRefused(Decision& d, const std::string& error) {
  const auto& legs = d.state().lease.legs;
  d.Emit(kDevicesUnavailable, json{{"machine", legs.empty() ? d.state().machine : legs[0].machine}, {"error", error}});
  d.Finish(RunStatus::kFailed, "devices_unavailable: " + error);
}

void ReleaseDevices(Decision& d, const std::string& reason) {
  const LeaseInfo& l = d.state().lease;
  if (l.phase != LeasePhase::kHeld || l.legs.empty()) return;
  if (l.legs.size() == 1) {
    json p = {{"machine", l.legs[0].machine}, {"devices", DeviceIdsJson(l.legs[0].granted)}, {"reason", reason}};
    if (std::string why = ServiceMayStillRun(d.state()); !why.empty()) p["quarantine"] = why;
    d.Emit(kDevicesReleased, std::move(p));
    return;
  }
  json legs = json::array();
  for (const LeaseLeg& leg : l.legs) {
    json one = {{"machine", leg.machine}, {"devices", DeviceIdsJson(leg.granted)}};
    if (std::string why = ServiceMayStillRun(d.state(), leg.machine); !why.empty()) one["quarantine"] = why;
    legs.push_back(std::move(one));
  }
  d.Emit(kDevicesReleased, json{{"machine", l.legs[0].machine}, {"reason", reason}, {"legs", std::move(legs)}});
}

namespace {

bool True(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_boolean() && v.get<bool>();
}

}  // namespace

std::string ServiceMayStillRun(const RunState& s, const std::string& machine) {
  const TaskInfo* launch = LastTaskOn(s, "service.launch", machine);
  if (!launch) return "";
  if (launch->status == TaskStatus::kFailed) {
    if (LaunchStartedNothing(*launch)) return "";
  }
  const TaskInfo* stop = LastTaskOn(s, "service.stop", machine);
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

void CheckQuarantinedDevices(const RunKind& kind, Decision& d, const std::string& machine, const DeviceIds& devices) {
  const RunState& s = d.state();
  if (s.terminal || s.lease.phase != LeasePhase::kWaiting || devices.empty()) return;
  for (const auto& [id, t] : s.tasks)
    if (IsQuarantineProbe(t) && (t.in_flight() || t.status == TaskStatus::kRetryWait)) return;  // one at a time
  const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
  if (!need || need->legs.empty()) return;
  const DeviceNeedLeg* leg = &need->legs[0];
  for (const DeviceNeedLeg& l : need->legs)
    if (!machine.empty() && l.machine == machine) leg = &l;
  if (!machine.empty() && leg->machine != machine) return;  // the run needs nothing there
  tasks::ProbeNpuSmi p = LegProbe(*need, *leg, kQuarantineProbePurpose);
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
  d.Emit(kDevicesChecked, json{{"machine", MachineOf(d.state(), task)}, {"devices", CheckedDevices(asked)}, {"idle", idle},
                               {"busy", busy}, {"task_id", task.task_id}});
}

void OnQuarantineProbeFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) {
  d.Emit(kDevicesChecked, json{{"machine", MachineOf(d.state(), task)},
                               {"devices", CheckedDevices(PayloadOf<tasks::ProbeNpuSmi>(task))},
                               {"idle", json::array()},
                               {"busy", json::array()},
                               {"task_id", task.task_id},
                               {"error", failure.Classified()}});
}

namespace {

// Absent or null: none (an empty list). Read with the one device-id parser;
// a malformed list throws, and the fold's caller names the event.
DeviceIds IdsOf(const json& p, const char* key, const std::string& what) {
  const json& v = Field(p, key);
  return v.is_null() ? DeviceIds{} : DeviceIdsOrThrow(v, what);
}

LeaseLeg LegFrom(const json& p, const std::string& default_machine, const std::string& what) {
  LeaseLeg l;
  l.machine = p.value("machine", default_machine);
  if (!Field(p, "devices").is_null()) l.devices = IdsOf(p, "devices", what + ".devices");
  l.count = p.value("count", 0);
  l.free = IdsOf(p, "free", what + ".free");
  l.busy = IdsOf(p, "busy", what + ".busy");
  return l;
}

bool HasLegs(const json& p) { return p.contains("legs") && p["legs"].is_array() && !p["legs"].empty(); }

}  // namespace

bool ApplyLeaseEvent(RunState& s, const std::string& type, const json& p) {
  LeaseInfo& l = s.lease;
  if (type == kDevicesRequested) {
    l.phase = LeasePhase::kWaiting;
    l.legs.clear();
    if (HasLegs(p)) {
      for (const json& leg : p["legs"]) l.legs.push_back(LegFrom(leg, s.machine, "DevicesRequested.legs[]"));
    } else {
      l.legs.push_back(LegFrom(p, s.machine, "DevicesRequested"));
    }
    l.requested_ms = s.updated_ms;
  } else if (type == kDevicesLeased) {
    l.phase = LeasePhase::kHeld;
    if (HasLegs(p)) {
      for (const json& g : p["legs"]) {
        const std::string m = g.value("machine", "");
        for (LeaseLeg& leg : l.legs)
          if (leg.machine == m) leg.granted = IdsOf(g, "devices", "DevicesLeased.legs[].devices");
      }
    } else {
      if (l.legs.empty()) l.legs.push_back(LeaseLeg{p.value("machine", s.machine)});
      l.legs[0].granted = IdsOf(p, "devices", "DevicesLeased.devices");
    }
    // "Any free ones": from now on the run uses exactly the leased ones.
    // (The fold then decodes the spec's message again: engine.cc.)
    if (s.spec.contains("nodes") && s.spec["nodes"].is_array() && s.spec["nodes"].size() > 1) {
      for (json& node : s.spec["nodes"]) {
        if (!node.is_object() || node.value("devices", json(nullptr)).is_array()) continue;
        if (const LeaseLeg* leg = l.Leg(node.value("machine", ""))) node["devices"] = DeviceIdsJson(leg->granted);
      }
    } else if (!s.spec.value("devices", json(nullptr)).is_array() && !l.legs.empty()) {
      s.spec["devices"] = DeviceIdsJson(l.legs[0].granted);
    }
  } else if (type == kDevicesReleased) {
    // Read as the audit reads them.
    if (HasLegs(p)) {
      for (const json& g : p["legs"]) (void)IdsOf(g, "devices", "DevicesReleased.legs[].devices");
    } else {
      (void)IdsOf(p, "devices", "DevicesReleased.devices");
    }
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
  if (l.phase == LeasePhase::kProbing || l.legs.empty()) {
    // Not recorded until DevicesRequested: the need says it.
    const std::optional<DeviceNeed> need = kind.DevicesNeeded(s);
    const auto need_devices = [](const DeviceNeedLeg& leg) {
      return leg.devices ? DeviceIdsJson(*leg.devices) : json(nullptr);
    };
    json j = {{"phase", LeasePhaseName(l.phase)}, {"machine", s.machine}, {"count", need ? need->count() : 0},
              {"devices", need && !need->legs.empty() ? need_devices(need->legs[0]) : json(nullptr)}};
    if (need && need->legs.size() > 1) {
      j["devices"] = nullptr;
      j["nodes"] = json::array();
      for (const auto& leg : need->legs)
        j["nodes"].push_back({{"machine", leg.machine}, {"count", leg.count}, {"devices", need_devices(leg)}});
    }
    return j;
  }
  const bool granted = l.phase == LeasePhase::kHeld || l.phase == LeasePhase::kReleased;
  const auto leg_devices = [granted](const LeaseLeg& leg) {
    return granted ? DeviceIdsJson(leg.granted) : leg.devices ? DeviceIdsJson(*leg.devices) : json(nullptr);
  };
  json j = {{"phase", LeasePhaseName(l.phase)}, {"machine", l.legs[0].machine}, {"count", l.count()}};
  if (l.legs.size() == 1) {
    j["devices"] = leg_devices(l.legs[0]);
    return j;
  }
  j["devices"] = nullptr;
  j["nodes"] = json::array();
  for (const LeaseLeg& leg : l.legs)
    j["nodes"].push_back({{"machine", leg.machine}, {"count", leg.count}, {"devices", leg_devices(leg)}});
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
    // Every (machine, devices) the event names: its legs, else its own.
    std::vector<std::pair<std::string, json>> legs;
    if (HasLegs(p)) {
      for (const json& l : p["legs"])
        legs.emplace_back(l.is_object() ? l.value("machine", "") : "", l.is_object() ? l.value("devices", json::array()) : l);
    } else {
      legs.emplace_back(p.value("machine", ""), p.value("devices", json::array()));
    }
    for (const auto& [machine, devices] : legs) {
      auto ids = DeviceIdsFromJson(devices, e.type() + ".devices");
      if (!ids.ok())
        return fmt::format("global position {}: run {}: {}", e.global_pos(), e.run_id(), ids.status().message());
      for (const DeviceId dev : *ids) {
        const auto key = std::make_pair(machine, dev);
        if (e.type() == kDevicesLeased) {
          auto it = held.find(key);
          if (it != held.end() && it->second.run != e.run_id())
            return fmt::format(
                "global position {}: run {} leased device {} on {} while run {} held it (since position {})",
                e.global_pos(), e.run_id(), dev, machine, it->second.run, it->second.since);
          held[key] = {e.run_id(), e.global_pos()};
        } else {
          auto it = held.find(key);
          if (it != held.end() && it->second.run == e.run_id()) held.erase(it);
        }
      }
    }
  }
  return "";
}

}  // namespace npuprof::sm
