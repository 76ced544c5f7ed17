// SshPool: one shared SshSession per target key (host, port, user, identity,
// known_hosts, env script, host key policy). Thread-safe. Sessions live as long as the pool or their users.
// The first target seen for a key fixes its host key policy and timeouts.
#pragma once

#include <cstdint>
#include <map>
#include <vector>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {

class SshPool {
 public:
  // The shared session of a target (calls on it are serialised).
  std::shared_ptr<SshSession> Get(const SshTarget& target);
  // A session for this caller alone until it drops the pointer, which puts it
  // back for the next Acquire of the same target: long calls (HTTP waves,
  // profiler control) neither wait behind nor block the shared session, and
  // do not cost a handshake each. At most kMaxIdle are kept per target.
  std::shared_ptr<SshSession> Acquire(const SshTarget& target);
  static constexpr size_t kMaxIdle = 4;

  size_t sessions();           // distinct targets seen
  int64_t total_handshakes();  // sum of handshakes() over all sessions

 private:
  // The env script and host key policy are part of the key: two inventory
  // machines on one host with different env scripts must not share a session
  // (RunRemote sources the session target's env script).
  using Key = std::tuple<std::string, int, std::string, std::string, std::string, std::string, int>;
  std::mutex mu_;
  static Key KeyOf(const SshTarget& target);
  std::map<Key, std::shared_ptr<SshSession>> sessions_;
  std::map<Key, std::vector<std::shared_ptr<SshSession>>> idle_;
};

}  // namespace npuprof::ssh
