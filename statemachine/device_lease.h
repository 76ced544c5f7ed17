// Device leases: a run that needs NPUs holds them exclusively from grant to
// release, and the grant and release are events of the run. A multi-node
// run needs NPUs on several machines: one leg per node, requested, granted
// and released together (a gang: never a partial hold).
//
//   RunSubmitted (queued)
//     devices given    -> DevicesRequested{machine, devices, count}
//     devices null     -> probe task (npu-smi) -> DevicesRequested{machine,
//                          count, free, busy}      (still queued)
//     several nodes    -> a probe per node whose devices are not given (one
//                          at a time: each ends the same way), then one
//                          DevicesRequested{machine, count, legs: [{machine,
//                          devices | free, busy, count}, ...]}
//   broker grants      -> DevicesLeased{machine, devices | legs}, then the kind's OnStart
//   broker refuses     -> DevicesUnavailable{error}, run failed
//   run ends or the kind gives the devices back -> DevicesReleased
//     (with `quarantine`: why when the run's service may still be running:
//      launched, and no service.stop confirmed it gone; per leg for a
//      multi-node run, each node judged by its own launch and stop)
//   broker: a waiting run wants a quarantined device -> probe task (purpose
//     quarantine_check, one npu-smi) -> DevicesChecked{machine, devices,
//     idle, busy | error}; the broker lifts the quarantine of the idle ones
//
// Which run gets which devices is the broker's decision (broker/
// device_scheduler.h, FIFO per machine); this file is the pure part: the
// events, their fold, and the engine hooks. No I/O.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "npuprof.pb.h"
#include "task_payloads.pb.h"
#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/task_failure.h"
#include "statemachine/task_result.h"

namespace npuprof::sm {

inline constexpr const char* kDevicesRequested = "DevicesRequested";
inline constexpr const char* kDevicesLeased = "DevicesLeased";
inline constexpr const char* kDevicesReleased = "DevicesReleased";
inline constexpr const char* kDevicesUnavailable = "DevicesUnavailable";
inline constexpr const char* kDevicesChecked = "DevicesChecked";
// Purpose marker in the payload of the probe task a lease runs first.
inline constexpr const char* kLeaseProbePurpose = "device_lease";
// Purpose marker of the probe a waiting run makes of quarantined devices.
inline constexpr const char* kQuarantineProbePurpose = "quarantine_check";

// What a run needs on one machine: `count` NPUs; `devices` names them, or is
// null when any free ones will do (a probe finds them first).
struct DeviceNeedLeg {
  std::string machine;
  tasks::Machine record;  // where that machine's probe goes (unset: the run's machine)
  std::optional<DeviceIds> devices;  // nullopt: any `count` free ones
  int count = 0;
};

// What a run needs: one leg per machine, the run's own first.
struct DeviceNeed {
  std::vector<DeviceNeedLeg> legs;
  tasks::ProbeNpuSmi probe_payload;  // probe.npu_smi payload (busy threshold, purpose) for a leg without devices
  int count() const {
    int n = 0;
    for (const auto& l : legs) n += l.count;
    return n;
  }
};

// The need of a service spec as its message (typed_spec.h: serve's,
// torch-profile's, standalone memory-profile's): spec.devices, or tp*dp free
// ones on the run's machine; for a multi-node spec, each node's devices (or
// tp*dp_local free ones there). The lease reads every number it needs (count,
// busy threshold) from the kind's DevicesNeeded, never from the spec itself.
template <class Spec>
DeviceNeed ServiceDeviceNeed(const RunState& s, const Spec& spec);

class RunKind;

// After RunSubmitted: request the devices the kind needs, or start the kind
// at once when it needs none.
void RequestDevicesOrStart(const RunKind& kind, Decision& d);
// The lease's probe task ended (engine routes it here instead of the kind).
bool IsLeaseProbe(const TaskInfo& task);
void OnLeaseProbeSucceeded(const RunKind& kind, Decision& d, const TaskInfo& task, const TaskResult& result);
void OnLeaseProbeFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure);
// The broker's answers. A grant names every leg of the run's lease (a leg
// with no machine is the only leg of a one-leg lease).
Status CheckLeaseGrant(const RunState& s, const LeaseGrant& grant);
void OnLeaseGranted(const RunKind& kind, Decision& d, const LeaseGrant& grant);
void OnLeaseRefused(Decision& d, const std::string& error);
// Gives the devices back if the run holds them (Finish does this too). When
// the run's service may still be running the release carries `quarantine`
// (the broker then grants those devices to nobody until a probe shows them
// idle).
void ReleaseDevices(Decision& d, const std::string& reason);
// Why the run's service may still be running on its devices ("" when it
// cannot be): a service.launch that may have started a process, and no later
// service.stop that confirmed it stopped, gone or never started. With a
// machine: only the service tasks sent to that machine (a multi-node run's
// node); "" = every task.
std::string ServiceMayStillRun(const RunState& s, const std::string& machine = "");

// The broker asks a waiting run to probe quarantined devices (Input
// kCheckDevices) of one machine: one npu-smi probe task, unless one is
// already out. machine "" = the run's machine.
void CheckQuarantinedDevices(const RunKind& kind, Decision& d, const std::string& machine, const DeviceIds& devices);
bool IsQuarantineProbe(const TaskInfo& task);
void OnQuarantineProbeSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result);
void OnQuarantineProbeFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure);

// Fold of the lease events (called by the engine's Apply). Device ids are
// read with DeviceIdsOrThrow: a stored event whose ids are not integers
// 0..4095 is corruption naming the event, never read leniently.
bool ApplyLeaseEvent(RunState& s, const std::string& type, const json& payload);
// The lease part of `npuprof show`.
json LeaseSummary(const RunKind& kind, const RunState& s);

// Audit over the whole log in global order: no device is ever held by two
// runs at once. Devices are keyed by their id as device_ids.h reads it; an
// event whose ids do not read as ids is itself a violation. Returns the
// first violation ("" when none).
std::string FindDoubleLease(const std::vector<proto::Event>& global_order);

}  // namespace npuprof::sm
