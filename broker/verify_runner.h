// VerifyRunner: `npuprof verify` off the broker's loop thread, so a replay of
// a large store never holds up dispatch, commits or other clients.
//
// The loop, right after a commit (the cache then equals the store), captures
// what it serves of each cached run — its last seq, manifest and summary —
// into a VerifyJob and submits it. The runner's one thread reads the store
// (thread-safe, store/event_store.h), replays each run's events with the
// verifier and checks the hash chains, the projections served against the
// fold from scratch (of the first `last_seq` events: a run that moved on
// since is judged as it was served), the run index row (when it still
// describes the same prefix) and, for a whole-store verify, the lease audit.
// A run not in the cache is served by folding its events on demand, so its
// fold from scratch is what would be served.
//
// When a job is done the runner wakes the loop with one empty message on an
// inproc PUSH socket it owns (connected to `wake_endpoint`, which the loop
// binds before constructing the runner); the loop then takes the answers and
// replies. Destruction stops the job in progress between two runs and joins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "statemachine/engine.h"
#include "store/event_store.h"

namespace npuprof::broker {

struct ServedProjection {
  uint64_t last_seq = 0;
  std::string manifest;  // dumps of the kind's Manifest / Summary
  std::string summary;
};

struct VerifyJob {
  std::string identity;  // the client to answer
  std::string only;      // one run; empty = every run, the machines stream and the lease audit
  std::map<std::string, ServedProjection> served;  // the cached runs among those verified
};

struct VerifyAnswer {
  std::string identity;
  nlohmann::json body;  // {ok, checked, runs: [...], lease_audit?}
  bool ok = false;
};

// The whole check, on the calling thread; `stop` cuts it short between runs
// (the answer then says so and is not ok).
VerifyAnswer RunVerifyJob(const VerifyJob& job, const store::EventStore& store, const sm::KindRegistry& kinds,
                          const std::atomic<bool>& stop);

class VerifyRunner {
 public:
  VerifyRunner(zmq::context_t& ctx, std::string wake_endpoint, const store::EventStore& store,
               const sm::KindRegistry& kinds);
  ~VerifyRunner();
  VerifyRunner(const VerifyRunner&) = delete;
  VerifyRunner& operator=(const VerifyRunner&) = delete;

  void Submit(VerifyJob job);
  // The answers finished since the last call.
  std::vector<VerifyAnswer> TakeDone();

 private:
  void Loop();

  zmq::context_t& ctx_;
  const std::string wake_endpoint_;
  const store::EventStore& store_;
  const sm::KindRegistry& kinds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<VerifyJob> jobs_;
  std::vector<VerifyAnswer> done_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace npuprof::broker
