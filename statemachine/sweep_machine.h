// The `sweep` run kind: one child run (memory-profile or torch-profile) per
// point of a configuration grid, each an ordinary run with its own events,
// device lease and report; the sweep records which point is which and how
// each ended. Pure, like every kind.
//
//   queued -> running -> completed | failed          (failed = partial)
//   running -> cancelling -> cancelled               (children cancelled first)
//   queued | running -> cancelled | failed
//
// Spec (the CLI expands the grid, cli/submit_sweep.cc; ValidateSpec checks it):
//   {"child_kind": "memory-profile" | "torch-profile",
//    "grid": [{"key": "<child submit flag>", "values": ["0.8", "0.9"]}, ...],
//    "points": [{"point": {"<flag>": "<value>", ...}, "spec": {child spec}}, ...],
//    "machine", "tag",
//    "nodes": [{"machine", "machine_record"}]}   (only when a point spans nodes)
// Every point's spec must pass the child kind's own ValidateSpec (with the
// sweep's machine record), points must differ from each other, and there are
// 1..kMaxSweepPoints of them; the error names the point and the field, and
// nothing is submitted.
// A multi-node point (its spec gives `nodes`: the child's deployment, from
// --node in the base flags or a `node` grid key) is judged with its own head
// as its machine and each node's record from the sweep's `nodes`, which
// lists every machine the points name (the broker fills their records as
// for a deployment); so a shape that does not divide over a point's nodes
// (dp 3 over 2 nodes) is refused naming the point and the numbers. The
// stored point specs keep no records: the broker adds them per child.
//
// Child ids are derived: "<sweep id>-p<index>" (index from 0, in grid
// order). OnStart emits ChildRunRequested + WatchRequested per point; the
// broker submits each child (ChildRequestFor: the point's kind and spec,
// statemachine/child_runs.h) with that id (idempotent: a crash at any point
// never submits a child twice) and delivers watched_run_finished when it
// ends. The sweep ends once every child has: ok when all are ok, else
// failed with sweep_status "partial" and each point's status. Cancel asks
// the broker to cancel every unfinished child and ends cancelled when they
// have all ended.
#pragma once

#include <optional>
#include <string>

#include "statemachine/engine.h"
#include "statemachine/run_kind.h"

namespace npuprof::sm {

inline constexpr size_t kMaxSweepPoints = 64;
inline constexpr size_t kMaxSweepIdLength = 58;  // + "-p63" stays within a run id's 64 characters
inline constexpr const char* kSweepChildFinished = "SweepChildFinished";

// A grid point as "key=value key=value" in the point's key order (strings
// unquoted); empty for a point that is not an object.
std::string SweepPointText(const json& point);

// Children of a sweep not known to have ended (what its cancel must reach).
std::vector<std::string> UnfinishedChildren(const RunState& parent);
std::string SweepChildId(const std::string& sweep_id, size_t index);

class SweepMachine : public RunKind {
 public:
  explicit SweepMachine(const KindRegistry& kinds) : kinds_(kinds) {}
  std::string_view name() const override { return "sweep"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  void OnStart(Decision& d) const override;
  std::optional<ChildRequest> ChildRequestFor(const RunState& parent, const std::string& child_id) const override;
  void OnTaskSucceeded(Decision&, const TaskInfo&, const TaskResult&) const override {}
  void OnTaskFailed(Decision&, const TaskInfo&, const TaskFailure&) const override {}
  bool AcceptsSignal(std::string_view name) const override;
  void OnSignal(Decision& d, const std::string& name, const json& payload) const override;
  void OnCancel(Decision& d) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
  json Manifest(const RunState& s) const override;

 private:
  const KindRegistry& kinds_;
};

void RegisterSweepKind(KindRegistry& r);

}  // namespace npuprof::sm
