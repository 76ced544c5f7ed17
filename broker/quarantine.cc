// Device quarantine, the broker's part (device_scheduler.h has the rule):
// committed DevicesQuarantined / DevicesCleared events of the machines stream
// go into the scheduler; a waiting run held back by quarantined devices is
// asked to probe them (Input kCheckDevices), with a back-off between probes;
// a committed probe (DevicesChecked) or lease probe (DevicesRequested with its
// free list) that shows a quarantined device idle clears it, on the stream.
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "common/json_depth.h"
#include "common/time_util.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"
#include "statemachine/machine_inventory.h"

namespace npuprof::broker {

using sm::json;

namespace {

constexpr int64_t kFirstCheckDelayMs = 2000;
constexpr int64_t kMaxCheckDelayMs = 60000;

json PayloadOf(const proto::Event& e) {
  Result<json> p = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
  return p.ok() && p->is_object() ? std::move(p).value() : json::object();
}

std::string Text(const json& p, const char* key) {
  auto it = p.find(key);
  return it != p.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

void Broker::ApplyQuarantineEvent(const proto::Event& e) {
  if (e.type() != sm::kDevicesQuarantined && e.type() != sm::kDevicesCleared) return;
  const json p = PayloadOf(e);
  auto devices = sm::DeviceIdsFromJson(p.value("devices", json::array()), e.type() + ".devices");
  if (!devices.ok()) {  // the judge let it through: a store another npuprof wrote
    spdlog::error("machines stream event #{} ({}) is not applied: {}", e.seq(), e.type(), devices.status().message());
    return;
  }
  const std::string shown = sm::DeviceIdsJson(*devices).dump();
  if (e.type() == sm::kDevicesQuarantined) {
    leases_.Quarantine(Text(p, "machine"), *devices, Text(p, "run_id"), Text(p, "why"), e.time_ms());
    spdlog::warn("machine {}: devices {} quarantined: run {}: {}", Text(p, "machine"), shown, Text(p, "run_id"),
                 Text(p, "why"));
  } else {
    leases_.Clear(Text(p, "machine"), *devices);
    spdlog::info("machine {}: devices {} cleared from quarantine (probe by run {})", Text(p, "machine"), shown,
                 Text(p, "run_id"));
  }
}

void Broker::AfterLeaseEvent(const std::string& run_id, const proto::Event& e, const sm::RunState& s) {
  const std::string& t = e.type();
  if (t == sm::kDevicesLeased || t == sm::kDevicesUnavailable || t == sm::ev::kRunFinished) {
    quarantine_checks_.erase(run_id);
    return;
  }
  // What a probe just saw idle, per machine.
  std::vector<std::pair<std::string, sm::DeviceIds>> seen;
  std::string task_id;
  if (t == sm::kDevicesChecked) {
    const json p = PayloadOf(e);
    std::string machine = s.lease.legs.empty() ? s.machine : s.lease.legs[0].machine;
    sm::DeviceIds idle;
    auto ids = sm::DeviceIdsFromJson(p.value("idle", json::array()), "DevicesChecked.idle");
    if (!ids.ok()) spdlog::error("run {}: {} (no device is cleared by it)", run_id, ids.status().message());
    else idle = std::move(*ids);
    if (p.contains("machine") && p["machine"].is_string()) machine = p["machine"].get<std::string>();
    seen.emplace_back(machine, std::move(idle));
    task_id = Text(p, "task_id");
    auto& c = quarantine_checks_[run_id];
    c.in_flight = false;
    c.next_ms = NowMs() + c.delay_ms;
    c.delay_ms = std::min(c.delay_ms * 2, kMaxCheckDelayMs);
  } else if (t == sm::kDevicesRequested) {
    for (const sm::LeaseLeg& leg : s.lease.legs) seen.emplace_back(leg.machine, leg.free);  // the lease probes just saw these free
  } else {
    return;
  }
  for (const auto& [machine, idle] : seen) {
    const sm::DeviceIds cleared = leases_.QuarantinedAmong(machine, idle);
    if (cleared.empty()) continue;
    StageMachineEvent(sm::kDevicesCleared,
                      json{{"machine", machine}, {"devices", sm::DeviceIdsJson(cleared)}, {"run_id", run_id},
                           {"task_id", task_id},
                           {"evidence", "npu-smi shows no process and HBM under the busy threshold"}},
                      "run " + run_id);
  }
}

bool Broker::AskForQuarantineChecks(const std::vector<DeviceScheduler::Check>& checks, int64_t now) {
  bool staged = false;
  for (const auto& c : checks) {
    auto [it, fresh] = quarantine_checks_.try_emplace(c.run_id);
    QuarantineCheck& q = it->second;
    if (fresh) q.delay_ms = kFirstCheckDelayMs;
    if (q.in_flight || now < q.next_ms) continue;
    sm::Input in;
    in.type = sm::Input::Type::kCheckDevices;
    in.now_ms = now;
    in.devices = c.devices;
    in.machine = c.machine;
    if (DecideAndStage(c.run_id, in).ok()) q.in_flight = staged = true;
  }
  return staged;
}

}  // namespace npuprof::broker
