// DataOf<M>(state): what a run's kind has folded of its own events
// (RunState.data) read as the kind's message (proto/kind_data.proto), so that
// a decision names each field through the compiler and reads it with its
// declared type. A field the fold has not written reads the message's
// default (0, "", false, empty), or has_x() is false for a field with
// presence.
//
// The data stays JSON in the run state and in projections (the stored
// document the manifests copy); DataOf decodes it where a decision reads it
// (once or twice per decision: tens of microseconds for most kinds, up to
// about a millisecond for a finished memory-profile run's 22 kB of evidence),
// so a replay, which makes no decision, pays nothing.
//
// Asking for a message that is not the run's kind's, or data that does not
// decode (a fold that wrote a value of the wrong type), throws
// std::logic_error naming the run and the key: in a decision the broker then
// fails the task whose result the decision was reading (kind_failed), or
// cancels the run for any other input (broker/commit.cc), as for SpecOf
// (typed_spec.h); in a projection the request fails, or the broker's guard
// (broker/projection_guard.h) names it. ReadData<M> is the same read as a
// Result, for a helper the broker calls outside a decision.
//
// Both return the message by value: bind it before looping over one of its
// fields (`const auto data = DataOf<M>(s); for (const auto& e :
// data.errors())`), since a range-for over a member of the temporary reads
// freed memory.
// Pure: no I/O.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "common/status.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

template <class Data>
Result<Data> ReadData(const RunState& s) {
  Data out;
  if (Status st = DecodeKindData(s.kind, s.data, out); !st.ok())
    return Status(st.code(), "run " + s.run_id + " (" + s.kind + "): " + st.message());
  return out;
}

template <class Data>
Data DataOf(const RunState& s) {
  Result<Data> read = ReadData<Data>(s);
  if (!read.ok()) throw std::logic_error(read.status().message());
  return std::move(read).value();
}

}  // namespace npuprof::sm
