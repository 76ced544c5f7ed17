// Runs that start other runs, the pure part: what the broker reads to submit
// (and at recovery submit again) the children a run asked for
// (broker/child_runs.cc).
//
// Keyed on "the run lists requested children", never on its kind's name: the
// engine folds every ChildRunRequested into RunState.requested_children for
// every kind, and the parent's kind says what each listed child is
// (RunKind::ChildRequestFor). A listed child its kind cannot describe is an
// error naming both, never silently no child.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "statemachine/engine.h"
#include "statemachine/run_kind.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// Whether the run has asked for child runs.
bool HasChildRuns(const RunState& parent);

// The request of child_id: NotFound when parent does not list it, Internal
// when its kind is unknown or cannot say what the child is.
Result<ChildRequest> RequestedChild(const KindRegistry& kinds, const RunState& parent, const std::string& child_id);

// Every listed child's request, in the order asked; a child that has none is
// left out and named in *errors (when given).
std::vector<ChildRequest> RequestedChildren(const KindRegistry& kinds, const RunState& parent,
                                            std::vector<std::string>* errors = nullptr);

}  // namespace npuprof::sm
