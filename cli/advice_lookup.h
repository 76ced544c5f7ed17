// The verification of an advice finding read from the server's stored runs
// (the CLI's side of cli/advice_verify.h, which judges): the sweep's
// manifest and each child's, fetched by run id. Used by `npuprof advise RUN`
// (every finding of a run) and `npuprof show SWEEP` (the finding a sweep
// made with `--advice` tests). A run that cannot be read is "not run" or a
// point without its measurement, never an error of the command.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/client.h"

namespace npuprof::cli {

// One finding of `run_id`'s advice, judged against the sweep named by its
// suggestion's verify_run_id.
nlohmann::json AdviceVerification(Client& client, const std::string& run_id, const nlohmann::json& finding);

// For a sweep's summary: when its spec carries the advice it tests
// ({"run_id", "rule", ...}), that finding of the advised run with its
// verification ({"run_id", "rule", "verification": ...}); null otherwise,
// or {"run_id", "rule", "error"} when the advised run or its finding cannot
// be read.
nlohmann::json SweepAdviceVerdict(Client& client, const nlohmann::json& sweep_summary);

}  // namespace npuprof::cli
