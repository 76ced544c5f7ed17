#include "statemachine/launch_audit.h"

#include <fmt/format.h>

#include "statemachine/managed_flags.h"
#include "statemachine/serve_argv.h"
#include "statemachine/service_spec.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_result.h"
#include "task_results.pb.h"

namespace npuprof::sm {

namespace {

// The service's leased devices: the grant of the lease's leg on the machine
// the launch went to (a multi-node run's node), else the launch's own.
json LeasedDevices(const RunState& s, const TaskInfo& task, const tasks::ServiceLaunch& service) {
  const std::string machine = TaskMachine(task);
  const LeaseLeg* leg = s.lease.legs.size() == 1 ? &s.lease.legs[0] : s.lease.Leg(machine.empty() ? s.machine : machine);
  if (leg && !leg->granted.empty()) return DeviceIdsJson(leg->granted);
  return json(std::vector<int64_t>(service.devices().begin(), service.devices().end()));
}

// A one-node spec holds none of the deployment's fields (absent = one node),
// so their flags are judged whether or not the stored spec holds them.
bool IsDeploymentField(const std::string& field) {
  return field == "dp_local" || field == "dp_address" || field == "dp_rpc_port";
}

json RanDevices(const results::ServiceLaunchResult& r) {
  if (!r.devices().has_list_value()) return nullptr;
  json out = json::array();
  for (const auto& v : r.devices().list_value().values())
    out.push_back(v.has_number_value() ? json(static_cast<int64_t>(v.number_value())) : json(v.DebugString()));
  return out;
}

}  // namespace

std::vector<std::string> LaunchDisagreements(const RunKind& kind, const RunState& s) {
  std::vector<std::string> out;
  std::optional<tasks::ServiceLaunch> spec_service;
  for (const auto& [id, task] : s.tasks) {
    if (task.kind != kServiceLaunchTask || task.status != TaskStatus::kSucceeded) continue;
    if (!spec_service) spec_service = kind.SpecService(s);
    if (!spec_service) return out;
    auto recorded = RecordedResult<results::ServiceLaunchResult>(task);
    if (!recorded.ok()) {
      out.push_back(fmt::format("{}: its recorded result cannot be read: {}", id, recorded.status().message()));
      continue;
    }
    std::vector<std::string> ran;
    for (const auto& v : recorded->serve_argv().values())
      if (v.has_string_value()) ran.push_back(v.string_value());
    const std::string where =
        recorded->runtime_dir().empty() ? id : fmt::format("{} ({}/launch.json)", id, recorded->runtime_dir());
    // A node of a multi-node deployment is judged against its own place in
    // it (its launch payload's deployment, with the RPC port the head found).
    tasks::ServiceLaunch service = *spec_service;
    const auto own = PayloadOf<tasks::ServiceLaunch>(task);
    if (own.has_deployment() && own.deployment().nodes() > 1) {
      *service.mutable_deployment() = own.deployment();
      *service.mutable_devices() = own.devices();
      if (!own.deployment().has_dp_rpc_port() && recorded->deployment().has_dp_rpc_port())
        service.mutable_deployment()->set_dp_rpc_port(recorded->deployment().dp_rpc_port());
    }
    if (!ran.empty()) {
      const int64_t port = recorded->port().has_number_value() ? static_cast<int64_t>(recorded->port().number_value()) : 0;
      const std::vector<std::string> expected = BuildServeArgv(ServeArgvFieldsOf(service, port));
      for (const ManagedDifference& d : ManagedArgvDifferences(kind.name(), expected, ran))
        if (d.field.empty() || s.spec.contains(d.field) || IsDeploymentField(d.field))
          out.push_back(fmt::format("{}: {}", where, d.text));
    }
    const json ran_on = RanDevices(*recorded);
    const json leased = LeasedDevices(s, task, service);
    if (ran_on.is_array() && ran_on != leased)
      out.push_back(fmt::format("{}: the service ran on devices {}, the run leased {}", where, ran_on.dump(),
                                leased.dump()));
  }
  return out;
}

}  // namespace npuprof::sm
