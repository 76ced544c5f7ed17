// SshPool: the SSH connections of one process, per target key (host, port,
// user, identity, known_hosts, env script, host key policy). Thread-safe.
// The first target seen for a key fixes its host key policy and timeouts.
//
// How the pool decides which connection a caller gets (so that a cold worker
// opens one connection per target unless it really runs two things at once):
//  * Get() returns the shared session: the first one of the key that is not
//    lent out. Calls on it are serialised (SshSession's mutex), which suits
//    short commands and file reads.
//  * Acquire() lends a session to one caller alone until it drops the
//    pointer: long calls (HTTP waves, profiler control) neither wait behind
//    nor block the other users. It lends, in this order, a session nobody
//    holds at all (the shared one included: a cold worker's first long call
//    reuses the connection its earlier short calls opened), else opens a new
//    one. While the shared session is lent, Get() hands out another session
//    (an idle one, or a new connection).
//  * A session given back stays for the next caller; at most kMaxIdle
//    sessions beyond the first are kept per target, the rest are closed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {

class SshPool {
 public:
  std::shared_ptr<SshSession> Get(const SshTarget& target);
  std::shared_ptr<SshSession> Acquire(const SshTarget& target);
  static constexpr size_t kMaxIdle = 4;

  size_t sessions();           // distinct targets seen
  size_t connections();        // sessions held by the pool now, over all targets
  int64_t total_handshakes();  // sum of handshakes() over the sessions held now

 private:
  // The env script and host key policy are part of the key: two inventory
  // machines on one host with different env scripts must not share a session
  // (RunRemote sources the session target's env script).
  using Key = std::tuple<std::string, int, std::string, std::string, std::string, std::string, int>;
  struct Entry {
    std::shared_ptr<SshSession> session;
    bool lent = false;
  };
  static Key KeyOf(const SshTarget& target);
  void GiveBack(const Key& key, const SshSession* session);

  std::mutex mu_;
  std::map<Key, std::vector<Entry>> entries_;
};

}  // namespace npuprof::ssh
