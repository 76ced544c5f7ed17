// DeviceScheduler: which waiting run gets which NPUs. Pure data (no I/O, no
// clock): the broker feeds it committed lease events and turns its grants and
// refusals into engine inputs, so every grant is an event.
//
// A run's lease has one leg per machine it needs (a multi-node run: one per
// node). A run is granted every leg at once, in one grant, or nothing: never
// a partial hold, so no run holds devices while waiting for others (no
// hold-and-wait, hence no deadlock between gangs over overlapping machines).
//
// Order: one pass over every waiter by the global position of its
// DevicesRequested, which keeps FIFO per machine: a run never overtakes an
// earlier waiting run on a machine where that run wants devices it would take
// (an explicit request blocks its devices there, an "any N free" request all
// its candidates there), so no waiter starves. Runs with disjoint devices
// start side by side.
//
// "Any N free" candidates: the devices the run's probe saw free, plus those it
// saw busy that npuprof runs have leased on that machine (they come back when
// those runs end). Fewer candidates than N: refused at once with the reason.
//
// Quarantine: a device a run released while its service may still be running
// (DevicesReleased with `quarantine`, recorded on the machines stream as
// DevicesQuarantined) is granted to nobody until a probe shows it idle
// (DevicesCleared). A waiter that needs a quarantined device waits, says so,
// and is listed in Schedule's `checks` so the broker has it probe them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/run_state.h"

namespace npuprof::broker {

class DeviceScheduler {
 public:
  using json = nlohmann::json;
  struct Grant {
    std::string run_id;
    sm::LeaseGrant legs;  // every leg of the run's lease, in its order
  };
  struct Refusal {
    std::string run_id;
    std::string error;
  };
  // A waiter held back by quarantined devices: they are worth a probe.
  struct Check {
    std::string run_id;
    sm::DeviceIds devices;  // quarantined ids the waiter needs on `machine`
    std::string machine;
  };

  // Committed facts. Hold(run, machine, ids) holds one leg; Hold(run, lease)
  // every granted leg of the run's lease.
  void Hold(const std::string& run_id, const std::string& machine, const sm::DeviceIds& devices);
  void Hold(const std::string& run_id, const sm::LeaseInfo& lease);
  void Wait(const std::string& run_id, const sm::LeaseInfo& lease, uint64_t order);
  void Drop(const std::string& run_id);  // released, refused or run finished
  // Rebuilds the entry of one run from its folded state (after a failed commit, recovery).
  void Sync(const sm::RunState& s);

  // Committed quarantine facts (machines stream).
  void Quarantine(const std::string& machine, const sm::DeviceIds& devices, const std::string& run_id,
                  const std::string& why, int64_t since_ms);
  void Clear(const std::string& machine, const sm::DeviceIds& devices);
  // The quarantined ones among `devices` on `machine`.
  sm::DeviceIds QuarantinedAmong(const std::string& machine, const sm::DeviceIds& devices) const;
  // Every quarantined device: [{machine, device, run_id, why, since_ms}].
  json Quarantined() const;

  // Grants are marked held at once (confirmed later by their DevicesLeased).
  void Schedule(std::vector<Grant>* grants, std::vector<Refusal>* refusals, std::vector<Check>* checks = nullptr);

  // Why a waiting run is still waiting (null when it is not waiting):
  // {machine, devices, count, queued_ahead, reason} of its first leg, and for
  // a multi-node run `nodes` with the same for each leg.
  json WaitingFor(const std::string& run_id) const;
  size_t waiting() const { return wait_index_.size(); }
  size_t holders() const { return held_by_run_.size(); }
  // f(machine, runs waiting, devices held) for every machine seen so far (metrics).
  template <typename F>
  void ForEachMachine(F&& f) const {
    for (const auto& [name, m] : machines_) {
      size_t waiting = 0;
      for (const auto& [order, w] : queue_)
        for (const auto& leg : w.legs)
          if (leg.machine == name) ++waiting;
      f(name, waiting, m.holder.size());
    }
  }

 private:
  using Id = sm::DeviceId;
  struct Leg {
    std::string machine;
    std::vector<Id> devices;      // explicit request
    bool any = false;             // "any count free"
    int count = 0;
    std::vector<Id> candidates;  // for any
    std::vector<Id> foreign;     // for any: busy with processes npuprof did not start
    std::string why = "not scheduled yet";
  };
  struct Waiter {
    std::string run_id;
    std::vector<Leg> legs;
  };
  struct QuarantineEntry {
    std::string run_id;  // whose service may still run there
    std::string why;
    int64_t since_ms = 0;
  };
  struct Machine {
    std::map<Id, std::string> holder;  // device -> run
    std::map<Id, QuarantineEntry> quarantined;
    std::set<Id> known;                // ever leased here (npuprof's own)
  };
  // Tries one leg against what is held, quarantined and blocked now: the
  // devices to grant, or none (leg.why says why; quarantined ones it needs
  // go to `suspect`). Refused: fewer candidates than needed, ever.
  std::vector<Id> Fit(Leg& leg, const std::set<Id>& blocked, sm::DeviceIds* suspect, std::string* refused);

  std::map<std::string, Machine> machines_;
  std::map<uint64_t, Waiter> queue_;  // global request order -> waiter
  std::map<std::string, std::vector<std::pair<std::string, std::vector<Id>>>> held_by_run_;  // run -> legs held
  std::map<std::string, uint64_t> wait_index_;  // run -> order
  uint64_t next_local_order_ = 1ull << 62;  // for entries without a stored position yet
};

}  // namespace npuprof::broker
