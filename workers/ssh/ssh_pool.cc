#include "workers/ssh/ssh_pool.h"

#include <algorithm>

#include "workers/ssh/ssh_internal.h"

namespace npuprof::ssh {

SshPool::Key SshPool::KeyOf(const SshTarget& target) {
  return Key{target.host,       target.port,       target.user, target.identity_file, target.known_hosts_file,
             target.env_script, static_cast<int>(target.host_key_policy)};
}

std::shared_ptr<SshSession> SshPool::Get(const SshTarget& target) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& list = entries_[KeyOf(target)];
  for (const Entry& e : list)
    if (!e.lent) return e.session;
  list.push_back(Entry{std::make_shared<SshSession>(target), false});  // connects on first use
  return list.back().session;
}

std::shared_ptr<SshSession> SshPool::Acquire(const SshTarget& target) {
  const Key key = KeyOf(target);
  std::shared_ptr<SshSession> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = entries_[key];
    // use_count() == 1: only the pool holds it, so no Get() caller is using
    // it now, and none can get it once it is marked lent (both under mu_).
    auto free = std::find_if(list.begin(), list.end(),
                             [](const Entry& e) { return !e.lent && e.session.use_count() == 1; });
    if (free == list.end()) {
      list.push_back(Entry{std::make_shared<SshSession>(target), true});
      s = list.back().session;
    } else {
      free->lent = true;
      s = free->session;
    }
  }
  // The caller's pointer shares no count with the pool's: dropping it gives
  // the session back. Until then its work counts to the caller's task, also
  // from a helper thread of the caller (ssh_stats.h).
  SshSession* raw = s.get();
  internal::LentTo(raw, internal::CurrentSink());
  return std::shared_ptr<SshSession>(raw, [this, key](SshSession* p) { GiveBack(key, p); });
}

void SshPool::GiveBack(const Key& key, const SshSession* session) {
  std::shared_ptr<SshSession> closing;  // destroyed (disconnects) outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto& list = entries_[key];
  auto it = std::find_if(list.begin(), list.end(), [&](const Entry& e) { return e.session.get() == session; });
  if (it == list.end()) return;
  it->lent = false;
  internal::Unlent(session);
  const auto idle = std::count_if(list.begin(), list.end(), [](const Entry& e) { return !e.lent; });
  if (idle > static_cast<long>(kMaxIdle) + 1 && it != list.begin()) {
    closing = std::move(it->session);
    list.erase(it);
  }
}

size_t SshPool::sessions() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t SshPool::connections() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [k, list] : entries_) n += list.size();
  return n;
}

int64_t SshPool::total_handshakes() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [k, list] : entries_)
    for (const Entry& e : list) n += e.session->handshakes();
  return n;
}

}  // namespace npuprof::ssh
