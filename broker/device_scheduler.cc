#include "broker/device_scheduler.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace npuprof::broker {

void DeviceScheduler::Hold(const std::string& run_id, const std::string& machine, const sm::DeviceIds& devices) {
  // Leaving the queue (a grant confirmed) and holding are one step.
  if (auto w = wait_index_.find(run_id); w != wait_index_.end()) {
    machines_[w->second.first].queue.erase(w->second.second);
    wait_index_.erase(w);
  }
  Machine& m = machines_[machine];
  for (Id d : devices) {
    m.holder[d] = run_id;
    m.known.insert(d);
  }
  held_by_run_[run_id] = {machine, devices};
}

void DeviceScheduler::Wait(const std::string& run_id, const sm::LeaseInfo& lease, uint64_t order) {
  if (held_by_run_.count(run_id)) return;
  if (auto w = wait_index_.find(run_id); w != wait_index_.end()) {
    // Already queued (e.g. from recovery, then the commit confirms it): keep the earlier place.
    return;
  }
  if (order == 0) order = next_local_order_++;
  Machine& m = machines_[lease.machine];
  Waiter w;
  w.run_id = run_id;
  w.count = lease.count;
  if (lease.devices) {
    w.devices = *lease.devices;
  } else {
    w.any = true;
    std::set<Id> cand(lease.free.begin(), lease.free.end());
    for (Id d : lease.busy) {
      if (m.known.count(d) || m.holder.count(d)) cand.insert(d);
      else w.foreign.push_back(d);
    }
    w.candidates.assign(cand.begin(), cand.end());
  }
  m.queue[order] = std::move(w);
  wait_index_[run_id] = {lease.machine, order};
}

void DeviceScheduler::Drop(const std::string& run_id) {
  if (auto h = held_by_run_.find(run_id); h != held_by_run_.end()) {
    Machine& m = machines_[h->second.first];
    for (Id d : h->second.second) {
      auto it = m.holder.find(d);
      if (it != m.holder.end() && it->second == run_id) m.holder.erase(it);
    }
    held_by_run_.erase(h);
  }
  if (auto w = wait_index_.find(run_id); w != wait_index_.end()) {
    machines_[w->second.first].queue.erase(w->second.second);
    wait_index_.erase(w);
  }
}

void DeviceScheduler::Sync(const sm::RunState& s) {
  Drop(s.run_id);
  if (s.terminal) return;
  if (s.lease.phase == sm::LeasePhase::kHeld) Hold(s.run_id, s.lease.machine, s.lease.granted);
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

void DeviceScheduler::Schedule(std::vector<Grant>* grants, std::vector<Refusal>* refusals, std::vector<Check>* checks) {
  for (auto& [name, m] : machines_) {
    std::set<int> blocked;  // wanted by an earlier waiter that could not start
    std::vector<uint64_t> done;
    auto quarantine_why = [&](Id d) {
      const QuarantineEntry& q = m.quarantined.at(d);
      return fmt::format("quarantined: run {}'s service may still be running there ({}); granted again once a probe "
                         "shows it idle",
                         q.run_id, q.why);
    };
    for (auto& [order, w] : m.queue) {
      std::vector<Id> pick;
      if (!w.any) {
        std::map<std::string, std::vector<Id>> by_holder;  // "held by run X" / "wanted by an earlier queued run"
        sm::DeviceIds suspect;
        for (Id d : w.devices) {
          if (auto h = m.holder.find(d); h != m.holder.end()) by_holder["held by run " + h->second].push_back(d);
          else if (m.quarantined.count(d)) by_holder[quarantine_why(d)].push_back(d), suspect.push_back(d);
          else if (blocked.count(d)) by_holder["wanted by an earlier queued run"].push_back(d);
        }
        if (checks && !suspect.empty()) checks->push_back({w.run_id, suspect});
        std::vector<std::string> why;
        for (const auto& [who, devs] : by_holder)
          why.push_back(fmt::format("{} {} {}", devs.size() == 1 ? "device" : "devices", fmt::join(devs, ","), who));
        if (!why.empty()) {
          w.why = fmt::format("{}", fmt::join(why, "; "));
          blocked.insert(w.devices.begin(), w.devices.end());
          continue;
        }
        pick = w.devices;
      } else {
        if (static_cast<int>(w.candidates.size()) < w.count) {
          refusals->push_back(
              {w.run_id, fmt::format("needs {} free NPU(s) on {}, but only {} are free or leased by npuprof runs "
                                     "([{}]); busy with other processes: [{}]; lower --tp/--dp or free devices",
                                     w.count, name, w.candidates.size(), fmt::join(w.candidates, ","),
                                     fmt::join(w.foreign, ","))});
          done.push_back(order);
          continue;
        }
        sm::DeviceIds suspect;
        for (Id d : w.candidates) {
          if (m.quarantined.count(d)) suspect.push_back(d);
          else if (!m.holder.count(d) && !blocked.count(d)) pick.push_back(d);
        }
        if (static_cast<int>(pick.size()) < w.count) {
          std::set<std::string> holders;
          for (Id d : w.candidates)
            if (auto h = m.holder.find(d); h != m.holder.end()) holders.insert(h->second);
          w.why = fmt::format("needs {} of devices [{}]; {} available now (held by: {})", w.count,
                              fmt::join(w.candidates, ","), pick.size(),
                              holders.empty() ? std::string(suspect.empty() ? "earlier queued runs" : "no run")
                                              : fmt::format("{}", fmt::join(holders, ", ")));
          if (!suspect.empty()) {
            w.why += fmt::format("; devices {} {}", sm::DeviceIdsJson(suspect).dump(), quarantine_why(suspect[0]));
            if (checks) checks->push_back({w.run_id, suspect});
          }
          blocked.insert(w.candidates.begin(), w.candidates.end());
          continue;
        }
        pick.resize(w.count);
      }
      for (Id d : pick) {
        m.holder[d] = w.run_id;
        m.known.insert(d);
      }
      held_by_run_[w.run_id] = {name, pick};
      grants->push_back({w.run_id, pick});
      done.push_back(order);
    }
    for (uint64_t o : done) {
      wait_index_.erase(m.queue[o].run_id);
      m.queue.erase(o);
    }
  }
}

nlohmann::json DeviceScheduler::WaitingFor(const std::string& run_id) const {
  auto w = wait_index_.find(run_id);
  if (w == wait_index_.end()) return nullptr;
  const Machine& m = machines_.at(w->second.first);
  const Waiter& waiter = m.queue.at(w->second.second);
  int ahead = 0;
  for (const auto& [order, other] : m.queue) {
    if (order == w->second.second) break;
    ++ahead;
  }
  const json devs = sm::DeviceIdsJson(waiter.any ? waiter.candidates : waiter.devices);
  return {{"machine", w->second.first},
          {"devices", waiter.any ? json(nullptr) : devs},
          {"count", waiter.count},
          {"queued_ahead", ahead},
          {"reason", waiter.why}};
}

}  // namespace npuprof::broker
