#include "statemachine/memory_profile_steps.h"

#include <array>
#include <map>
#include <set>
#include <string>

namespace npuprof::sm {

namespace {

using S = MemSkip;
using C = MemCleanup;

// preflight (msprof, torch_npu, wrap script) -> baseline npu-smi -> launch
// under msprof -> ready -> npu-smi + logs -> one inference -> npu-smi -> stop
// -> safetensors headers -> flush wait -> msprof export -> CSV collection.
// A step marked early runs beside the step before it (issue 42: a round trip
// less on the run's path each): the baseline snapshot beside the preflight
// (neither needs the other), the log read beside the after-ready snapshot
// (both read a service that is up and idle), the headers while the service
// stops (they need nothing from the service, and the stop waits seconds for
// msprof's flush and export). The flush wait is not one: beside the stop it
// polled the target every second for what the stop waits for anyway, and
// answered after it (measured in docs/PERFORMANCE.md run 43).
// With operator_memory (kNoOperatorMemory passes them over otherwise), the
// inference runs between /start_profile and /stop_profile, and
// operator_memory (analyse() + the digest of each rank's operator CSVs)
// comes last; none of the three is critical.
constexpr std::array<MemStep, 16> kStandalone = {{
    {.name = "preflight", .critical = true},
    {.name = "baseline", .critical = true, .early = true},
    {.name = "service", .service_up = true, .critical = true},
    {.name = "ready", .service_up = true, .critical = true},
    {.name = "after_ready", .service_up = true},
    {.name = "vllm_log", .service_up = true, .cleanup = C::kOnFailure, .early = true},
    {.name = "profile_start", .skip = S::kNoOperatorMemory, .service_up = true},
    {.name = "inference", .service_up = true},
    {.name = "profile_stop", .skip = S::kNoOperatorMemory, .service_up = true},
    {.name = "after_infer", .service_up = true},
    {.name = "stopped", .cleanup = C::kOnFailureOrCancel, .critical = true},
    {.name = "weights", .early = true},
    {.name = "flushed"},
    {.name = "export"},
    {.name = "msprof"},
    {.name = "operator_memory", .skip = S::kNoOperatorMemory},
}};

// Live phases while the serve run's service runs (never stopped by this run),
// then, once the serve run has ended, flush -> export -> CSVs when wrapped.
// No step is critical: a failed one is recorded and the walk goes on.
constexpr std::array<MemStep, 10> kAttach = {{
    {.name = "ready", .skip = S::kNotLive},
    {.name = "after_ready", .skip = S::kNotLive},
    {.name = "vllm_log"},
    {.name = "inference", .skip = S::kNotLive},
    {.name = "after_infer", .skip = S::kNotLive},
    {.name = "weights"},
    {.name = "awaiting_service_stop", .skip = S::kServeEnded, .wait = true},
    {.name = "flushed", .skip = S::kNotWrapped},
    {.name = "export", .skip = S::kNotWrapped},
    {.name = "msprof", .skip = S::kNotWrapped},
}};

// Writes the msprof wrap script only.
constexpr std::array<MemStep, 1> kInstallWrapper = {{{.name = "preflight", .critical = true}}};

// The states' names before they were the steps' names.
const std::map<std::string, std::string> kMemoryRenamedStates = {
    {"launching", "service"},        {"waiting_ready", "ready"}, {"collecting_logs", "vllm_log"},
    {"inferring", "inference"},      {"stopping", "stopped"},    {"reading_weights", "weights"},
    {"flushing", "flushed"},         {"exporting", "export"},    {"collecting_csvs", "msprof"},
};

// kNotLive and kServeEnded may turn true at any moment (the serve run may end);
// kNotWrapped is settled once the serve run has ended, before any step it guards.
bool MayTurnTrue(MemSkip why) { return why == S::kNotLive || why == S::kServeEnded; }

void AddWalkMoves(std::span<const MemStep> steps, std::set<TransitionTable::Move>& moves) {
  const size_t n = steps.size();
  // f = 0 is "queued"; the first candidate after `from` is steps[f].
  for (size_t f = 0; f <= n; ++f) {
    const std::string from = f == 0 ? "queued" : std::string(steps[f - 1].name);
    // A reason that did not hold when `from` ran and cannot turn true since still does not.
    const MemSkip settled = f > 0 && !MayTurnTrue(steps[f - 1].skip) ? steps[f - 1].skip : S::kNever;
    std::set<MemSkip> passed;  // reasons that must hold to pass over the steps between
    bool blocked = false;
    for (size_t t = f; t < n && !blocked; ++t) {
      const MemStep& to = steps[t];
      if (to.early) {  // passed over once done, for no reason that must hold
        moves.emplace(from, std::string(to.name));
        continue;
      }
      const bool can_pass = to.skip != S::kNever && to.skip != settled;
      if (!can_pass || passed.count(to.skip) == 0) moves.emplace(from, std::string(to.name));
      if (can_pass) passed.insert(to.skip);
      else blocked = true;
    }
    if (!blocked) moves.emplace(from, "completed");
  }
  // The cleanup path starts wherever a launched service may be up.
  for (size_t f = 0; f < n; ++f) {
    if (!steps[f].service_up) continue;
    for (size_t t = f + 1; t < n; ++t)
      if (steps[t].cleanup != C::kNo) moves.emplace(std::string(steps[f].name), std::string(steps[t].name));
  }
  for (const char* end : {"failed", "cancelled"}) {
    moves.emplace("queued", end);
    for (const MemStep& s : steps) moves.emplace(std::string(s.name), end);
  }
}

}  // namespace

std::span<const MemStep> MemoryStepsOf(std::string_view mode) {
  if (mode == "standalone") return kStandalone;
  if (mode == "install_wrapper") return kInstallWrapper;
  return kAttach;
}

const TransitionTable& MemoryProfileTable() {
  static const TransitionTable table = [] {
    std::set<TransitionTable::Move> moves;
    for (const auto steps : {std::span<const MemStep>(kStandalone), std::span<const MemStep>(kAttach),
                             std::span<const MemStep>(kInstallWrapper)})
      AddWalkMoves(steps, moves);
    return TransitionTable(std::move(moves), {"completed", "failed", "cancelled"}, kMemoryRenamedStates);
  }();
  return table;
}

}  // namespace npuprof::sm
