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
//  * With Options::warm_spare (the workers' pool): when Acquire() lends the
//    last session of a key that nobody else could be lent, and the key has
//    fewer than kSpareUpTo sessions, the pool opens one more connection in
//    the background (connect, key exchange, auth and the command shell's
//    start) so that the next concurrent call finds it ready instead of
//    paying a handshake on its path (at a target 100 ms away a handshake is
//    about 7 sequential round trips). A long call (a stop, an analysis, a
//    wave) is what makes a short call beside it need a second connection;
//    the spare is opened beside the long call's own work. A spare that fails
//    to connect is left unconnected: its first user connects it as any new
//    session would. The warm-up's round trips count to no task (they are on
//    no task's path). At most one warm-up per key at a time; the pool's
//    destructor waits for them (each bounded by the connect timeout).
//  * WarmUpTo(target, n) (a burst of long calls ahead, e.g. torch-profile's
//    rank analyses, each of which holds a session of its own for its wait):
//    opens in the background as many connections as the key lacks to have
//    n sessions (lent or not, warming included), n capped at kWarmUpToMax,
//    at most kWarmAtOnce handshakes in flight at once (a target's sshd may
//    drop unauthenticated connections beyond about 10: OpenSSH's
//    MaxStartups). Each is warmed as a spare is (connect, key exchange,
//    auth, the command shell's start), off every task's path; the burst's
//    Acquire() calls then find them ready instead of paying a handshake and
//    a login shell each on the path. Sessions beyond kMaxIdle + 1 idle are
//    closed as they are given back, so a warmed burst shrinks afterwards.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {

class SshPool {
 public:
  struct Options {
    bool warm_spare = false;
  };
  SshPool() = default;
  explicit SshPool(Options options) : options_(options) {}
  ~SshPool();
  SshPool(const SshPool&) = delete;
  SshPool& operator=(const SshPool&) = delete;

  std::shared_ptr<SshSession> Get(const SshTarget& target);
  std::shared_ptr<SshSession> Acquire(const SshTarget& target);
  // Returns at once; the warm-ups run on threads of their own. Returns how
  // many connections it started warming.
  size_t WarmUpTo(const SshTarget& target, size_t n);
  static constexpr size_t kMaxIdle = 4;
  static constexpr size_t kWarmUpToMax = 16;
  static constexpr size_t kWarmAtOnce = 8;
  // A spare is warmed only while a key has fewer sessions than this.
  static constexpr size_t kSpareUpTo = 2;

  size_t sessions();           // distinct targets seen
  size_t connections();        // sessions held by the pool now, over all targets
  int64_t total_handshakes();  // sum of handshakes() over the sessions held now
  // Blocks until no warm-up is running (tests).
  void WaitForWarmUps();

 private:
  // The env script and host key policy are part of the key: two inventory
  // machines on one host with different env scripts must not share a session
  // (RunRemote sources the session target's env script).
  using Key = std::tuple<std::string, int, std::string, std::string, std::string, std::string, int>;
  struct Entry {
    std::shared_ptr<SshSession> session;
    bool lent = false;
    bool warming = false;  // a background warm-up is connecting it (never erased meanwhile)
  };
  static Key KeyOf(const SshTarget& target);
  void GiveBack(const Key& key, const SshSession* session);
  // Under mu_: starts a spare's warm-up for key when Options::warm_spare
  // says so and none of the key's sessions could be lent now.
  void MaybeWarmSpareLocked(const Key& key, const SshTarget& target);
  // A warm-up's thread; done (under mu_) once it no longer touches the pool.
  struct Warmer {
    std::thread thread;
    bool done = false;
  };
  // Under mu_: starts the warm-up of the key's last entry (marked warming),
  // after joining the warm-ups that ended.
  void StartWarmUpLocked(const Key& key);
  void WarmUp(Key key, SshSession* session, Warmer* self);

  Options options_;
  std::mutex mu_;
  std::condition_variable warm_cv_;
  std::map<Key, std::vector<Entry>> entries_;
  std::list<Warmer> warmers_;
  int warming_ = 0;
};

}  // namespace npuprof::ssh
