#include "workers/ssh/ssh_pool.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh {

SshPool::Key SshPool::KeyOf(const SshTarget& target) {
  return Key{target.host,       target.port,       target.user, target.identity_file, target.known_hosts_file,
             target.env_script, static_cast<int>(target.host_key_policy)};
}

SshPool::~SshPool() {
  std::list<Warmer> warmers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    warmers.swap(warmers_);
  }
  for (Warmer& w : warmers) w.thread.join();
}

void SshPool::StartWarmUpLocked(const Key& key) {
  for (auto it = warmers_.begin(); it != warmers_.end();) {
    if (it->done) {
      it->thread.join();  // it set done under mu_ and only returns now
      it = warmers_.erase(it);
    } else {
      ++it;
    }
  }
  ++warming_;
  Warmer& w = warmers_.emplace_back();
  w.thread = std::thread(&SshPool::WarmUp, this, key, entries_[key].back().session.get(), &w);
}

void SshPool::WaitForWarmUps() {
  std::unique_lock<std::mutex> lock(mu_);
  warm_cv_.wait(lock, [this] { return warming_ == 0; });
}

void SshPool::MaybeWarmSpareLocked(const Key& key, const SshTarget& target) {
  if (!options_.warm_spare) return;
  auto& list = entries_[key];
  if (list.size() >= kSpareUpTo) return;
  for (const Entry& e : list)
    if (e.warming || (!e.lent && e.session.use_count() == 1)) return;  // one warming, or one free
  list.push_back(Entry{std::make_shared<SshSession>(target), false, true});
  StartWarmUpLocked(key);
}

size_t SshPool::WarmUpTo(const SshTarget& target, size_t n) {
  n = std::min(n, kWarmUpToMax);
  const Key key = KeyOf(target);
  std::lock_guard<std::mutex> lock(mu_);
  auto& list = entries_[key];
  const auto in_flight = static_cast<size_t>(
      std::count_if(list.begin(), list.end(), [](const Entry& e) { return e.warming; }));
  size_t started = 0;
  while (list.size() < n && in_flight + started < kWarmAtOnce) {
    list.push_back(Entry{std::make_shared<SshSession>(target), false, true});
    StartWarmUpLocked(key);
    ++started;
  }
  return started;
}

void SshPool::WarmUp(Key key, SshSession* session, Warmer* self) {
  // The entry is never erased while warming (GiveBack skips it; the
  // destructor joins this thread first), so the raw pointer stays valid and
  // the session's use count says only who uses it. The scope keeps the
  // warm-up's work off the task whose Acquire() started it (the session's
  // creator): it is on no task's path.
  SshStatsScope off_every_task;
  Status st = session->Connect();
  if (st.ok()) {
    auto r = session->Exec(":", std::chrono::seconds(30));  // starts the command shell
    if (!r.ok()) st = r.status();
  }
  if (!st.ok()) spdlog::debug("a spare SSH connection could not be warmed ({}); its first user connects it", st.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_[key])
    if (e.session.get() == session) e.warming = false;
  --warming_;
  self->done = true;
  warm_cv_.notify_all();
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
    MaybeWarmSpareLocked(key, target);
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
  if (idle > static_cast<long>(kMaxIdle) + 1 && it != list.begin() && !it->warming) {
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
