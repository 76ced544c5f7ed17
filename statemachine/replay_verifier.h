// ReplayVerifier: checks a run's stored events from scratch — sequence,
// hash chain, legal transitions, nothing after the end — and folds them.
// Pure: the hash function is handed in (the store's EventHash).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "npuprof.pb.h"
#include "statemachine/engine.h"

namespace npuprof::sm {

struct VerifyResult {
  bool ok = true;
  std::string run_id;
  uint64_t events = 0;
  std::string first_divergence;  // empty when ok: "event #7 (StateChanged): ..."
  RunState state;                // the fold of the events up to the divergence
};

using EventHasher = std::function<std::string(const proto::Event&)>;

VerifyResult VerifyRunEvents(const KindRegistry& kinds, const std::vector<proto::Event>& events,
                             const EventHasher& hash);

// The machines stream has no state machine: only sequence and hash chain.
VerifyResult VerifyChainOnly(const std::vector<proto::Event>& events, const EventHasher& hash);

}  // namespace npuprof::sm
