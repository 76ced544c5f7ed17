// The workloads the whole-installation benchmarks run on the simulated
// target, shared so their figures compare: the reference table's target
// delays (docs/PERFORMANCE.md "Against the one-shot scripts") and the
// submit commands of torch-profile (its default wave) and memory-profile
// (standalone, tp 2). Header-only.
#pragma once

#include <string>
#include <vector>

namespace npuprof::bench {

// The simulator's start-up 1 s, msprof export 2 s, 10 ms per request,
// sourcing set_env.sh 0.1 s.
inline std::vector<std::string> ReferenceSimArgs() {
  return {"--startup-delay", "1",   "--export-delay", "2",   "--token-delay", "0", "--env-delay", "0.1",
          "--set", "delays.prefill=0.01", "--set", "delays.analyse=0", "--set", "delays.msprof_startup=0"};
}

// torch-profile with its default wave (10 requests at concurrency 5, one follow-up).
inline std::vector<std::string> ReferenceTorchArgs(const std::string& model, const std::string& tag,
                                                   const std::string& machine = "sim1") {
  return {"submit", "torch-profile", "--machine", machine, "--model", model, "--served-model-name", "qwen",
          "--tp", "2", "--tag", tag, "--mode", "enforce_eager", "--request-kind", "text",
          "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--health-timeout", "60", "--wait"};
}

// The submit command of tests/memory_profile/memory_e2e_test.cc (standalone,
// tp 2), with the flush wait at 0.
inline std::vector<std::string> MemoryArgs(const std::string& model, int port, const std::string& machine = "sim1") {
  return {"submit", "memory-profile", "--machine", machine, "--model", model, "--tp", "2",
          "--port", std::to_string(port), "--flush-seconds", "0", "--wait"};
}

}  // namespace npuprof::bench
