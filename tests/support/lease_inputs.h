// For pure engine tests: the input that moves a queued run through its device
// lease the way the broker would (answer the lease probe with every device
// free, then grant what was asked for or the first `count` free ones).
#pragma once

#include <optional>

#include "statemachine/device_lease.h"
#include "statemachine/engine.h"

namespace npuprof::sm::testing {

inline std::optional<Input> NextLeaseInput(const RunState& s, int npus = 8) {
  Input in;
  if (s.terminal) return std::nullopt;
  if (s.lease.phase == LeasePhase::kProbing) {
    for (const auto& [id, t] : s.tasks) {
      if (!IsLeaseProbe(t) || !t.in_flight()) continue;
      json free = json::array();
      for (int i = 0; i < npus; ++i) free.push_back(i);
      in.type = Input::Type::kTaskResult;
      in.task_id = id;
      in.attempt = t.attempt;
      in.ok = true;
      in.result = {{"free_devices", free}, {"busy_devices", json::array()}};
      return in;
    }
    return std::nullopt;
  }
  if (s.lease.phase == LeasePhase::kWaiting) {
    in.type = Input::Type::kLeaseGranted;
    for (const LeaseLeg& leg : s.lease.legs) {
      DeviceIds ids;
      if (leg.devices) ids = *leg.devices;
      else
        for (int i = 0; i < leg.count; ++i) ids.push_back(i);
      in.legs.push_back({leg.machine, ids});
    }
    return in;
  }
  return std::nullopt;
}

}  // namespace npuprof::sm::testing
