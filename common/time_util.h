// Wall-clock helpers. Only I/O layers (broker, workers, cli) call NowMs();
// state machines receive time inside their inputs.
#pragma once

#include <cstdint>
#include <string>

namespace npuprof {

int64_t NowMs();
// "2026-11-29T12:33:00.123Z"
std::string IsoTimeMs(int64_t ms);
// Random hex string of n bytes (2n chars), for run and task ids.
std::string RandomHex(int nbytes);
// Sortable, unique run id: "r" + yyyymmddHHMMSS + "-" + 10 hex (40 random bits).
std::string NewRunId(int64_t now_ms);

}  // namespace npuprof
