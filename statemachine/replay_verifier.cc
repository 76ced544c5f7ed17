#include "statemachine/replay_verifier.h"

#include <fmt/format.h>

#include "common/json_depth.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_schema.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/event_types.h"

namespace npuprof::sm {

namespace {

// Sequence and hash chain of event i; empty string when fine.
std::string CheckChain(const std::vector<proto::Event>& events, size_t i, const EventHasher& hash) {
  const proto::Event& e = events[i];
  if (e.run_id() != events[0].run_id()) return fmt::format("belongs to run '{}'", e.run_id());
  if (e.seq() != i + 1) return fmt::format("sequence {} where {} was expected (missing event?)", e.seq(), i + 1);
  const std::string expected_prev = i == 0 ? "" : events[i - 1].hash();
  if (e.prev_hash() != expected_prev) return "prev_hash does not match the previous event's hash (event missing or reordered)";
  if (hash(e) != e.hash()) return "hash does not match the event's content (edited?)";
  return "";
}

// Lease events must follow the lease's own order (device_lease.h).
std::string LeaseStepError(const RunState& s, const std::string& type) {
  const LeasePhase phase = s.lease.phase;
  if (type == kDevicesRequested &&
      !(s.state == "queued" && (phase == LeasePhase::kNone || phase == LeasePhase::kProbing)))
    return fmt::format("devices requested in state '{}' with lease phase '{}'", s.state, LeasePhaseName(phase));
  if ((type == kDevicesLeased || type == kDevicesUnavailable) && phase != LeasePhase::kWaiting)
    return fmt::format("devices granted or refused while the lease phase was '{}' (not waiting)",
                       LeasePhaseName(phase));
  if (type == kDevicesReleased && phase != LeasePhase::kHeld) return "devices released that were not held";
  if (type == ev::kRunFinished && phase == LeasePhase::kHeld) return "run finished while still holding its devices";
  return "";
}

// A finished run's tasks have all ended: the engine records how each one
// ended (succeeded, failed for good, abandoned) before RunFinished. A task
// still pending or waiting for a retry there is a log that replays to a
// state no run can be in (an event left out, or one no engine wrote).
std::string OpenTaskError(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait)
      return fmt::format("the run finished while its task {} ({}) is still {}: the events replay to a state no run "
                         "ends in (an event is missing or forged)",
                         id, t.kind, TaskStatusName(t.status));
  return "";
}

}  // namespace

std::string IndexRowDivergence(const RunKind& kind, const proto::RunIndexRow& row, const RunState& folded,
                               uint64_t events) {
  const std::optional<RunStatus> status = ParseRunStatus(row.status());
  if (!status)
    return fmt::format("run index row has status '{}', which is no run status (running, ok, failed, cancelled)",
                       row.status());
  if (row.last_seq() != events) return "";
  if (row.kind() != folded.kind)
    return fmt::format("run index says kind '{}' but the events are of kind '{}'", row.kind(), folded.kind);
  if (kind.transitions().Current(row.state()) != folded.state)
    return fmt::format("run index says state '{}' but the events fold to '{}'", row.state(), folded.state);
  if (*status != folded.status)
    return fmt::format("run index says status '{}' but the events fold to '{}'", row.status(),
                       RunStatusName(folded.status));
  if (row.terminal() != folded.terminal)
    return fmt::format("run index says terminal={} but the events fold to terminal={}", row.terminal(),
                       folded.terminal);
  return "";
}

VerifyResult VerifyChainOnly(const std::vector<proto::Event>& events, const EventHasher& hash) {
  VerifyResult r;
  if (events.empty()) return r;
  r.run_id = events[0].run_id();
  for (size_t i = 0; i < events.size(); ++i) {
    std::string err = CheckChain(events, i, hash);
    if (!err.empty()) {
      r.ok = false;
      r.first_divergence = fmt::format("event #{} ({}): {}", i + 1, events[i].type(), err);
      return r;
    }
    r.events++;
  }
  return r;
}

VerifyResult VerifyRunEvents(const KindRegistry& kinds, const std::vector<proto::Event>& events,
                             const EventHasher& hash) {
  VerifyResult r;
  auto fail = [&](size_t i, const std::string& why) {
    r.ok = false;
    r.first_divergence = fmt::format("event #{} ({}): {}", i + 1, events[i].type(), why);
    return r;
  };
  if (events.empty()) {
    r.ok = false;
    r.first_divergence = "the run has no events";
    return r;
  }
  r.run_id = events[0].run_id();
  const RunKind* kind = nullptr;
  for (size_t i = 0; i < events.size(); ++i) {
    const proto::Event& e = events[i];
    if (std::string err = CheckChain(events, i, hash); !err.empty()) return fail(i, err);
    Result<json> parsed = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
    if (!parsed.ok()) return fail(i, "corruption: the payload is " + parsed.status().message());
    const json p = std::move(parsed).value();
    if (!HasEventSchema(e.type()) && !HasKindEventSchema(e.type()))
      return fail(i, "corruption: an event type npuprof does not know (neither proto/events.proto nor "
                     "proto/kind_events.proto declares it)");
    if (Status st = CheckEventPayload(e.type(), e.payload_json(), p, UnknownKeys::kReject); !st.ok())
      return fail(i, "corruption: " + st.message());
    if (i == 0) {
      if (e.type() != ev::kRunSubmitted) return fail(i, "a run must start with RunSubmitted");
      kind = kinds.Find(p.value("kind", ""));
      if (!kind) return fail(i, fmt::format("unknown run kind '{}'", p.value("kind", "")));
      if (Status st = CheckRunSpec(kind->name(), p.value("spec", json::object())); !st.ok())
        return fail(i, "corruption: " + st.message());
    } else if (e.type() == ev::kRunSubmitted) {
      return fail(i, "RunSubmitted in the middle of a run");
    }
    if (r.state.terminal) return fail(i, "event after RunFinished");
    if (e.type() == ev::kStateChanged) {
      // Checked under today's names (an old log may carry a renamed state's old name).
      const std::string from = kind->transitions().Current(p.value("from", ""));
      const std::string to = kind->transitions().Current(p.value("to", ""));
      if (from != r.state.state)
        return fail(i, fmt::format("transition from '{}' but the run was in '{}'", from, r.state.state));
      if (!kind->transitions().Allowed(from, to))
        return fail(i, fmt::format("illegal transition {} -> {} for {}", from, to, kind->name()));
    }
    if (std::string err = LeaseStepError(r.state, e.type()); !err.empty()) return fail(i, err);
    if (e.type() == ev::kRunFinished && !kind->transitions().IsTerminal(r.state.state))
      return fail(i, fmt::format("RunFinished while in non-terminal state '{}'", r.state.state));
    bool to_kind = false;
    if (Status st = ApplyStored(kinds, r.state, e, &to_kind); !st.ok())
      return fail(i, fmt::format("corruption: the {} fold cannot read this event: {}", kind->name(), st.message()));
    // After each event the kind's own fold read (the fold says which: its
    // own events, and shared ones such as a sweep's child events).
    if (to_kind)
      if (Status st = CheckKindData(kind->name(), r.state.data); !st.ok())
        return fail(i, fmt::format("corruption: folding this event: {}", st.message()));
    if (e.type() == ev::kRunFinished)
      if (std::string err = OpenTaskError(r.state); !err.empty()) return fail(i, err);
    r.events++;
  }
  return r;
}

}  // namespace npuprof::sm
