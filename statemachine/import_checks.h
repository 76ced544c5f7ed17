// What `npuprof import` asks of a run beyond a clean replay
// (replay_verifier.h): it is judged as `submit` judges a submission today.
// Its RunSubmitted names a kind this build has, its spec passes that kind's
// ValidateSpec (names, the tag's 1-64 characters, ranges, sizes) and its
// spec message, and the event's machine and tag are the spec's, as the
// engine writes them. The run index row (what `npuprof runs` lists) comes
// from those fields, so an imported run cannot make every listing carry a
// 100 MB tag.
//
// `verify` does not hold stored runs to this: an older store may hold a
// spec an older npuprof accepted. Pure: no I/O.
#pragma once

#include "common/status.h"
#include "npuprof.pb.h"
#include "statemachine/engine.h"

namespace npuprof::sm {

// Invalid naming the field and the rule, when the run's first event is not
// a submission `submit` would accept now.
Status JudgeImportedSubmission(const KindRegistry& kinds, const proto::Event& run_submitted);

}  // namespace npuprof::sm
