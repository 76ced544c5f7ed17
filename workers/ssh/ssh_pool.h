// SshPool: one shared SshSession per target key (host, port, user, identity,
// known_hosts, env script, host key policy). Thread-safe. Sessions live as long as the pool or their users.
// The first target seen for a key fixes its host key policy and timeouts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {

class SshPool {
 public:
  std::shared_ptr<SshSession> Get(const SshTarget& target);

  size_t sessions();           // distinct targets seen
  int64_t total_handshakes();  // sum of handshakes() over all sessions

 private:
  // The env script and host key policy are part of the key: two inventory
  // machines on one host with different env scripts must not share a session
  // (RunRemote sources the session target's env script).
  using Key = std::tuple<std::string, int, std::string, std::string, std::string, std::string, int>;
  std::mutex mu_;
  std::map<Key, std::shared_ptr<SshSession>> sessions_;
};

}  // namespace npuprof::ssh
