// MachineInventory: the machines runs can target, folded from the events of
// the reserved stream "_machines" (MachineAdded / MachineRemoved /
// MachineHostKeyAccepted). Pure.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "npuprof.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

inline constexpr const char* kMachinesStream = "_machines";
inline constexpr const char* kMachineAdded = "MachineAdded";
inline constexpr const char* kMachineRemoved = "MachineRemoved";
inline constexpr const char* kMachineHostKeyAccepted = "MachineHostKeyAccepted";
// Device quarantine (broker/device_scheduler.h): {machine, devices, run_id,
// why} when a run released devices its service may still occupy;
// {machine, devices, run_id, task_id} when that run's probe showed them idle.
inline constexpr const char* kDevicesQuarantined = "DevicesQuarantined";
inline constexpr const char* kDevicesCleared = "DevicesCleared";

class MachineInventory {
 public:
  void Apply(const std::string& type, const json& payload);
  void ApplyStored(const proto::Event& ev);

  std::optional<json> Find(const std::string& name) const;
  json List() const;  // array of records, by name
  uint64_t last_seq() const { return last_seq_; }
  void set_last_seq(uint64_t s) { last_seq_ = s; }

  // The MachineHostKeyAccepted payload ({name, fingerprint, run_id}) to
  // record for a task result of run_id that reports a host key accepted
  // under accept-new ({"host_key_accepted": {"machine", "fingerprint"}}):
  // only for a machine of the inventory added with --accept-new-host-key,
  // and only when that fingerprint is not already recorded. nullopt otherwise
  // (also for a malformed report).
  std::optional<json> HostKeyAcceptance(const json& result, const std::string& run_id) const;
  // Checks and normalises a `machine add` request (defaults filled in).
  // Errors name the field and the fix.
  static Status ValidateAdd(json& rec);

 private:
  std::map<std::string, json> machines_;
  uint64_t last_seq_ = 0;
};

}  // namespace npuprof::sm
