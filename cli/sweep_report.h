// `npuprof report SWEEP`: the compare (views/run_compare.h) of a sweep's
// children, one column per grid point in point order. The children's
// manifests are fetched from the server; a child that has not ended, or a
// memory-profile child without a report, is left out and listed under
// sweep.left_out with the reason. Fewer than 2 comparable points is an
// error naming each point's status.
//
// The compare JSON gains "sweep": {"run_id", "child_kind", "grid",
// "left_out": [{"run_id", "point", "status", "reason"}]}, and each entry of
// "runs" its "point".
#pragma once

#include "cli/commands.h"

namespace npuprof::cli {

Result<json> SweepCompare(Client& client, const json& sweep_manifest);

}  // namespace npuprof::cli
