// Every run kind registers itself through one of these (defined in its own
// <kind>_machine.cc); DefaultKinds() calls them all.
#pragma once

#include "statemachine/engine.h"

namespace npuprof::sm {

void RegisterServeKind(KindRegistry& r);
void RegisterTorchProfileKinds(KindRegistry& r);   // torch-profile and analyse-root
void RegisterMemoryProfileKind(KindRegistry& r);
void RegisterSweepKind(KindRegistry& r);          // statemachine/sweep_machine.h

}  // namespace npuprof::sm
