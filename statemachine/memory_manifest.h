// The memory-profile manifest (docs/BEHAVIOUR.md#mem-manifest): the reference scripts' run-directory manifest (keys
// baseline_hbm, after_ready_hbm, after_infer_hbm, msprof_csvs with
// __prof_device_map__, model_config, tp, dp, mode) plus the run summary, the
// report and "files": every exported file name -> the sha256 of the stored
// blob holding it (what `npuprof export` writes). A deployment over several
// machines adds "nodes": each other node's snapshots, service, flush and
// export, its files under nodes/<machine>/ in "files". Pure.
#pragma once

#include "statemachine/run_state.h"

namespace npuprof::sm {

json BuildMemoryManifest(const RunState& s, const json& summary, const json& report, const json& service);

}  // namespace npuprof::sm
