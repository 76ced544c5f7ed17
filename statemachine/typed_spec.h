// SpecOf<M>(state): a run's validated spec as its kind's message
// (proto/run_specs.proto), decoded by the fold from RunSubmitted.spec
// (RunState.typed_spec). A kind reads its settings through it, so that a
// field name is checked by the compiler and a value has its declared type;
// the JSON `spec` stays the stored document (manifests copy from it).
//
// The message is decoded from the spec as the kind's ValidateSpec fills it
// today: a run stored by an older npuprof, before a field existed, reads that
// field's default as a new submission would, never proto3's zero. (A stored
// spec that today's ValidateSpec refuses is decoded as it was stored.) Every
// field a kind reads here is one its ValidateSpec fills in the run's mode.
// Asking for a message that is not the run's spec (a kind's bug, or a test's
// state built without RefreshTypedSpec) throws std::logic_error: the broker
// then fails the task whose result the decision was reading (kind_failed), or
// cancels the run for any other input (broker/commit.cc).
// Pure: no I/O.
#pragma once

#include <stdexcept>
#include <string>

#include <google/protobuf/message.h>

#include "common/status.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

template <class Spec>
const Spec& SpecOf(const RunState& s) {
  if (const auto* spec = dynamic_cast<const Spec*>(s.typed_spec.get())) return *spec;
  throw std::logic_error("run " + s.run_id + " (" + s.kind + ") holds no " + Spec::descriptor()->full_name() +
                         " spec: " + (s.typed_spec ? "it holds a " + s.typed_spec->GetDescriptor()->full_name()
                                                   : std::string("none was decoded")));
}

class RunKind;

// Decodes s.spec into s.typed_spec, filled by kind's ValidateSpec (see
// above; nullptr = as stored): when RunSubmitted is folded, when the fold
// changes `spec` (a lease's devices), or for a state a test built by hand. A
// spec that does not decode leaves typed_spec null and is the Status
// (Corruption naming the key).
Status RefreshTypedSpec(RunState& s, const RunKind* kind);

}  // namespace npuprof::sm
