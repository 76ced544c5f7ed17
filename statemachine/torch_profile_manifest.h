// Manifests of torch-profile and analyse-root runs: pure projections of the
// run state (itself a fold of the events). The torch-profile manifest is the
// input contract of the downstream analysis tool; its field names are fixed
// (docs/BEHAVIOUR.md#tp-manifest; extra fields are allowed by that contract).
#pragma once

#include <string>
#include <vector>

#include "statemachine/run_state.h"

namespace npuprof::sm {

// Every field a torch-profile manifest always has (completed_at or
// failed_at is added once the run has ended).
const std::vector<std::string>& TorchProfileManifestFields();

json TorchProfileManifest(const RunState& s);
json AnalyseRootManifest(const RunState& s);

}  // namespace npuprof::sm
