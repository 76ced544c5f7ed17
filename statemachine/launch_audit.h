// What `npuprof verify` checks of a run that launched a vLLM service: the
// service ran as its spec says. Pure: reads the folded run only.
//
// For each service.launch of the run that succeeded:
// * the argv it read back from the target's launch record (the result's
//   serve_argv: what _serve.sh ran) gives every flag the kind manages
//   (statemachine/managed_flags.h) the values the spec's argv gives it (the
//   kind's SpecService through BuildServeArgv, statemachine/serve_argv.h; a
//   port the spec leaves open is the one the launch recorded). A flag made
//   from a spec field the stored spec does not hold (a run stored before
//   that field existed) is not judged.
// * it ran on the devices the run leased.
// A launch whose result records no argv (none is judged) and a kind or mode
// that launches no service (SpecService is nullopt) have nothing to check.
#pragma once

#include <string>
#include <vector>

#include "statemachine/run_kind.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// One line per disagreement, naming the task and the launch record, e.g.
// "r1.t3 (<runtime>/launch.json): --gpu-memory-utilization: ran 0.5, the
// spec gives 0.85"; empty when the run agrees with its spec.
std::vector<std::string> LaunchDisagreements(const RunKind& kind, const RunState& s);

}  // namespace npuprof::sm
