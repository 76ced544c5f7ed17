#include "broker/worker_registry.h"

namespace npuprof::broker {

WorkerEntry& WorkerRegistry::Upsert(const std::string& identity) {
  WorkerEntry& w = workers_[identity];
  w.identity = identity;
  return w;
}

WorkerEntry* WorkerRegistry::Find(const std::string& identity) {
  auto it = workers_.find(identity);
  return it == workers_.end() ? nullptr : &it->second;
}

void WorkerRegistry::Remove(const std::string& identity) { workers_.erase(identity); }

void WorkerRegistry::Touch(const std::string& identity, int64_t expires_ms) {
  if (WorkerEntry* w = Find(identity)) w->expires_ms = expires_ms;
}

std::vector<std::string> WorkerRegistry::Expired(int64_t now_ms) const {
  std::vector<std::string> out;
  for (const auto& [id, w] : workers_)
    if (w.expires_ms < now_ms) out.push_back(id);
  return out;
}

bool WorkerRegistry::AnyFreeSlot() const {
  for (const auto& [id, w] : workers_)
    if (static_cast<int>(w.tasks.size()) < w.capacity) return true;
  return false;
}

WorkerEntry* WorkerRegistry::PickFor(const std::string& kind) {
  WorkerEntry* best = nullptr;
  for (auto& [id, w] : workers_) {
    if (!w.kinds.count(kind) || static_cast<int>(w.tasks.size()) >= w.capacity) continue;
    if (!best || w.tasks.size() < best->tasks.size()) best = &w;
  }
  return best;
}

}  // namespace npuprof::broker
