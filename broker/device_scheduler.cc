#include "broker/device_scheduler.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace npuprof::broker {

void DeviceScheduler::Hold(const std::string& run_id, const std::string& machine, const sm::DeviceIds& devices) {
  // Leaving the queue (a grant confirmed) and holding are one step.
  if (auto w = wait_index_.find(run_id); w != wait_index_.end()) {
    queue_.erase(w->second);
    wait_index_.erase(w);
  }
  Machine& m = machines_[machine];
  const std::vector<Id>& ids = devices;
  for (Id d : ids) {
    m.holder[d] = run_id;
    m.known.insert(d);
  }
  auto& legs = held_by_run_[run_id];
  for (auto& [held_machine, held] : legs)
    if (held_machine == machine) {
      held = ids;
      return;
    }
  legs.emplace_back(machine, ids);
}

void DeviceScheduler::Hold(const std::string& run_id, const sm::LeaseInfo& lease) {
  for (const sm::LeaseLeg& leg : lease.legs) Hold(run_id, leg.machine, leg.granted);
}

void DeviceScheduler::Wait(const std::string& run_id, const sm::LeaseInfo& lease, uint64_t order) {
  if (held_by_run_.count(run_id)) return;
  if (wait_index_.count(run_id)) {
    // Already queued (e.g. from recovery, then the commit confirms it): keep the earlier place.
    return;
  }
  if (order == 0) order = next_local_order_++;
  Waiter w;
  w.run_id = run_id;
  for (const sm::LeaseLeg& l : lease.legs) {
    Machine& m = machines_[l.machine];
    Leg leg;
    leg.machine = l.machine;
    leg.count = l.count;
    if (l.devices) {
      leg.devices = *l.devices;
    } else {
      leg.any = true;
      std::set<Id> cand(l.free.begin(), l.free.end());
      for (Id d : l.busy) {
        if (m.known.count(d) || m.holder.count(d)) cand.insert(d);
        else leg.foreign.push_back(d);
      }
      leg.candidates.assign(cand.begin(), cand.end());
    }
    w.legs.push_back(std::move(leg));
  }
  queue_[order] = std::move(w);
  wait_index_[run_id] = order;
}

void DeviceScheduler::Drop(const std::string& run_id) {
  if (auto h = held_by_run_.find(run_id); h != held_by_run_.end()) {
    for (const auto& [machine, ids] : h->second) {
      Machine& m = machines_[machine];
      for (Id d : ids) {
        auto it = m.holder.find(d);
        if (it != m.holder.end() && it->second == run_id) m.holder.erase(it);
      }
    }
    held_by_run_.erase(h);
  }
  if (auto w = wait_index_.find(run_id); w != wait_index_.end()) {
    queue_.erase(w->second);
    wait_index_.erase(w);
  }
}

void DeviceScheduler::Sync(const sm::RunState& s) {
  Drop(s.run_id);
  if (s.terminal) return;
  if (s.lease.phase == sm::LeasePhase::kHeld) Hold(s.run_id, s.lease);
  else if (s.lease.phase == sm::LeasePhase::kWaiting) Wait(s.run_id, s.lease, s.lease.request_pos);
}

void DeviceScheduler::Quarantine(const std::string& machine, const sm::DeviceIds& devices, const std::string& run_id,
                                 const std::string& why, int64_t since_ms) {
  Machine& m = machines_[machine];
  for (Id d : devices) m.quarantined[d] = {run_id, why, since_ms};
}

void DeviceScheduler::Clear(const std::string& machine, const sm::DeviceIds& devices) {
  auto it = machines_.find(machine);
  if (it == machines_.end()) return;
  for (Id d : devices) it->second.quarantined.erase(d);
}

sm::DeviceIds DeviceScheduler::QuarantinedAmong(const std::string& machine, const sm::DeviceIds& devices) const {
  sm::DeviceIds out;
  auto it = machines_.find(machine);
  if (it == machines_.end()) return out;
  for (Id d : devices)
    if (it->second.quarantined.count(d)) out.push_back(d);
  return out;
}

nlohmann::json DeviceScheduler::Quarantined() const {
  json out = json::array();
  for (const auto& [name, m] : machines_)
    for (const auto& [d, q] : m.quarantined)
      out.push_back({{"machine", name}, {"device", d}, {"run_id", q.run_id}, {"why", q.why}, {"since_ms", q.since_ms}});
  return out;
}

std::vector<DeviceScheduler::Id> DeviceScheduler::Fit(Leg& w, const std::set<Id>& blocked, sm::DeviceIds* suspect,
                                                    std::string* refused) {
  Machine& m = machines_[w.machine];
  const std::string& name = w.machine;
  auto quarantine_why = [&](Id d) {
    const QuarantineEntry& q = m.quarantined.at(d);
    return fmt::format("quarantined: run {}'s service may still be running there ({}); granted again once a probe "
                       "shows it idle",
                       q.run_id, q.why);
  };
  std::vector<Id> pick;
  if (!w.any) {
    std::map<std::string, std::vector<Id>> by_holder;  // "held by run X" / "wanted by an earlier queued run"
    for (Id d : w.devices) {
      if (auto h = m.holder.find(d); h != m.holder.end()) by_holder["held by run " + h->second].push_back(d);
      else if (m.quarantined.count(d)) by_holder[quarantine_why(d)].push_back(d), suspect->push_back(d);
      else if (blocked.count(d)) by_holder["wanted by an earlier queued run"].push_back(d);
    }
    std::vector<std::string> why;
    for (const auto& [who, devs] : by_holder)
      why.push_back(fmt::format("{} {} {}", devs.size() == 1 ? "device" : "devices", fmt::join(devs, ","), who));
    if (!why.empty()) {
      w.why = fmt::format("{}", fmt::join(why, "; "));
      return {};
    }
    w.why = "fits now";
    return w.devices;
  }
  if (static_cast<int>(w.candidates.size()) < w.count) {
    *refused = fmt::format("needs {} free NPU(s) on {}, but only {} are free or leased by npuprof runs ([{}]); busy "
                           "with other processes: [{}]; lower --tp/--dp or free devices",
                           w.count, name, w.candidates.size(), fmt::join(w.candidates, ","), fmt::join(w.foreign, ","));
    return {};
  }
  sm::DeviceIds mine;
  for (Id d : w.candidates) {
    if (m.quarantined.count(d)) mine.push_back(d);
    else if (!m.holder.count(d) && !blocked.count(d)) pick.push_back(d);
  }
  if (static_cast<int>(pick.size()) < w.count) {
    std::set<std::string> holders;
    for (Id d : w.candidates)
      if (auto h = m.holder.find(d); h != m.holder.end()) holders.insert(h->second);
    w.why = fmt::format("needs {} of devices [{}]; {} available now (held by: {})", w.count,
                        fmt::join(w.candidates, ","), pick.size(),
                        holders.empty() ? std::string(mine.empty() ? "earlier queued runs" : "no run")
                                        : fmt::format("{}", fmt::join(holders, ", ")));
    if (!mine.empty()) {
      w.why += fmt::format("; devices [{}] {}", sm::DeviceIdsText(mine), quarantine_why(mine[0]));
      for (Id d : mine) suspect->push_back(d);
    }
    return {};
  }
  pick.resize(w.count);
  w.why = "fits now";
  return pick;
}

void DeviceScheduler::Schedule(std::vector<Grant>* grants, std::vector<Refusal>* refusals, std::vector<Check>* checks) {
  // Devices wanted by an earlier waiter that could not start, per machine.
  std::map<std::string, std::set<Id>> blocked;
  std::vector<uint64_t> done;
  for (auto& [order, w] : queue_) {
    std::vector<std::vector<Id>> picks;
    std::string refused;
    bool fits = true;
    for (Leg& leg : w.legs) {
      sm::DeviceIds suspect;
      std::string leg_refused;
      std::vector<Id> pick = Fit(leg, blocked[leg.machine], &suspect, &leg_refused);
      if (checks && !suspect.empty()) checks->push_back({w.run_id, suspect, leg.machine});
      if (!leg_refused.empty() && refused.empty()) refused = leg_refused;
      if (pick.empty() && leg.count > 0) fits = false;
      picks.push_back(std::move(pick));
    }
    if (!refused.empty()) {
      refusals->push_back({w.run_id, refused});
      done.push_back(order);
      continue;
    }
    if (!fits) {
      // Hold nothing (a gang starts whole); keep later runs off what it wants.
      for (const Leg& leg : w.legs) {
        const std::vector<Id>& wanted = leg.any ? leg.candidates : leg.devices;
        blocked[leg.machine].insert(wanted.begin(), wanted.end());
      }
      continue;
    }
    sm::LeaseGrant legs;
    auto& held = held_by_run_[w.run_id];
    for (size_t i = 0; i < w.legs.size(); ++i) {
      Machine& m = machines_[w.legs[i].machine];
      for (Id d : picks[i]) {
        m.holder[d] = w.run_id;
        m.known.insert(d);
      }
      held.emplace_back(w.legs[i].machine, picks[i]);
      legs.push_back({w.legs[i].machine, picks[i]});
    }
    grants->push_back({w.run_id, std::move(legs)});
    done.push_back(order);
  }
  for (uint64_t o : done) {
    wait_index_.erase(queue_[o].run_id);
    queue_.erase(o);
  }
}

nlohmann::json DeviceScheduler::WaitingFor(const std::string& run_id) const {
  auto w = wait_index_.find(run_id);
  if (w == wait_index_.end()) return nullptr;
  const Waiter& waiter = queue_.at(w->second);
  auto leg_view = [&](const Leg& leg) {
    int ahead = 0;  // earlier waiters wanting this machine too
    for (const auto& [order, other] : queue_) {
      if (order == w->second) break;
      for (const Leg& l : other.legs)
        if (l.machine == leg.machine) {
          ++ahead;
          break;
        }
    }
    const json devs = sm::DeviceIdsJson(leg.any ? leg.candidates : leg.devices);
    return json{{"machine", leg.machine},
                {"devices", leg.any ? json(nullptr) : devs},
                {"count", leg.count},
                {"queued_ahead", ahead},
                {"reason", leg.why}};
  };
  if (waiter.legs.empty()) return nullptr;
  json first = leg_view(waiter.legs[0]);
  if (waiter.legs.size() == 1) return first;
  json nodes = json::array();
  std::vector<std::string> reasons;
  int count = 0;
  for (const Leg& leg : waiter.legs) {
    json v = leg_view(leg);
    count += leg.count;
    if (leg.why != "fits now") reasons.push_back(fmt::format("on {}: {}", leg.machine, leg.why));
    nodes.push_back(std::move(v));
  }
  first["count"] = count;
  first["devices"] = nullptr;
  first["reason"] = reasons.empty() ? std::string("not scheduled yet")
                                    : fmt::format("{} (a multi-node run starts on every node at once)",
                                                  fmt::join(reasons, "; "));
  first["nodes"] = std::move(nodes);
  return first;
}

}  // namespace npuprof::broker
