// WorkerRegistry: the broker's table of live workers (Majordomo's "workers"
// and "waiting" tables). Each entry expires when its heartbeats stop.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace npuprof::broker {

struct WorkerEntry {
  std::string identity;  // ZeroMQ routing id
  std::string worker_id;
  uint32_t pid = 0;
  std::set<std::string> kinds;
  int capacity = 1;
  std::set<std::string> tasks;  // task ids currently held
  int64_t expires_ms = 0;
};

class WorkerRegistry {
 public:
  WorkerEntry& Upsert(const std::string& identity);
  WorkerEntry* Find(const std::string& identity);
  void Remove(const std::string& identity);
  void Touch(const std::string& identity, int64_t expires_ms);
  // Identities whose expiry passed.
  std::vector<std::string> Expired(int64_t now_ms) const;
  // Least-loaded worker serving kind with a free slot, or nullptr.
  WorkerEntry* PickFor(const std::string& kind);
  // True when some worker holds fewer tasks than its capacity.
  bool AnyFreeSlot() const;
  const std::map<std::string, WorkerEntry>& all() const { return workers_; }

 private:
  std::map<std::string, WorkerEntry> workers_;
};

}  // namespace npuprof::broker
