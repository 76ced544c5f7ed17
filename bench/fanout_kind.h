// A run kind for benchmarks only: on start it schedules `tasks` no-op tasks
// of kind kFanoutTask at once (as torch-profile schedules one analyse task
// per rank directory) and finishes "ok" when every one has succeeded. It lets
// the broker benchmark count task round trips apart from the cost of
// creating and finishing runs. Registered only in the benchmark's own
// registry (BrokerOptions::kinds); the server does not serve it.
#pragma once

#include <memory>

#include "statemachine/engine.h"

namespace npuprof::bench {

inline constexpr const char* kFanoutKind = "bench-fanout";
inline constexpr const char* kFanoutTask = "bench.noop";

std::unique_ptr<sm::RunKind> MakeFanoutKind();

}  // namespace npuprof::bench
