#include "workers/ssh/ssh_pool.h"

namespace npuprof::ssh {

std::shared_ptr<SshSession> SshPool::Get(const SshTarget& target) {
  Key key{target.host,          target.port,       target.user, target.identity_file, target.known_hosts_file,
          target.env_script,    static_cast<int>(target.host_key_policy)};
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
