#include "workers/ssh/ssh_pool.h"

namespace npuprof::ssh {

SshPool::Key SshPool::KeyOf(const SshTarget& target) {
  return Key{target.host,       target.port,       target.user, target.identity_file, target.known_hosts_file,
             target.env_script, static_cast<int>(target.host_key_policy)};
}

std::shared_ptr<SshSession> SshPool::Acquire(const SshTarget& target) {
  const Key key = KeyOf(target);
  std::shared_ptr<SshSession> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& idle = idle_[key];
    if (!idle.empty()) {
      s = std::move(idle.back());
      idle.pop_back();
    }
  }
  if (!s) s = std::make_shared<SshSession>(target);  // connects on first use
  // The caller's pointer shares nothing with the pool; dropping it returns the session.
  SshSession* raw = s.get();
  return std::shared_ptr<SshSession>(raw, [this, key, s = std::move(s)](SshSession*) mutable {
    std::lock_guard<std::mutex> lock(mu_);
    auto& idle = idle_[key];
    if (idle.size() < kMaxIdle) idle.push_back(std::move(s));
  });
}

std::shared_ptr<SshSession> SshPool::Get(const SshTarget& target) {
  const Key key = KeyOf(target);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = sessions_[key];
  if (!slot) slot = std::make_shared<SshSession>(target);
  return slot;
}

size_t SshPool::sessions() {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

int64_t SshPool::total_handshakes() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [k, s] : sessions_) n += s->handshakes();
  return n;
}

}  // namespace npuprof::ssh
