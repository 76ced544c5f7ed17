// ReplayVerifier: checks a run's stored events from scratch — sequence,
// hash chain, event types npuprof knows and payloads that fit their messages,
// legal transitions, nothing after the end, no task left open at the end —
// and folds them. Pure: the hash function is handed in (the store's
// EventHash).
//
// What it does not prove: the hash chain is plain SHA-256 over the events,
// so whoever can write a log can recompute it. It finds edits made without
// recomputing it, and a log no engine could have written; a forged log that
// is consistent from end to end passes (docs/SECURITY.md, "Imports").
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

// The run index row written with the last of `events` events against the
// fold of those events: its status must be a known name and, like its kind,
// state (an old state name maps to the current one), terminal flag and
// last_seq, agree with the fold. A row written with a shorter prefix (the run
// moved on since it was written) is judged only for its status's name.
// Returns the divergence, "" when it agrees.
std::string IndexRowDivergence(const RunKind& kind, const proto::RunIndexRow& row, const RunState& folded,
                               uint64_t events);

// The machines stream has no state machine: only sequence and hash chain.
VerifyResult VerifyChainOnly(const std::vector<proto::Event>& events, const EventHasher& hash);

}  // namespace npuprof::sm
