// What `npuprof advise` costs the server on a finished run: the recorded
// memory-profile run of tests/data/views (a demo run, tp 2) folded once,
// then per iteration its advice input built from the run's state (the
// report's input, the report, the spec's settings) and every rule run over
// the typed evidence (BM_AdviseFinishedRun), and the decode plus rules alone
// on a prepared input (BM_AdviceRulesOnly). The CLI adds one manifest call
// per run and per verifying sweep. Figures: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npuprof.pb.h"
#include "statemachine/engine.h"
#include "statemachine/memory_advice.h"
#include "statemachine/memory_evidence.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/memory_report.h"

namespace {

using json = nlohmann::json;

const npuprof::sm::RunState& Recorded() {
  static const npuprof::sm::RunState state = [] {
    std::ifstream f(std::string(NPUPROF_BENCH_DATA_DIR) + "/views/memory_profile.events.json");
    std::stringstream text;
    text << f.rdbuf();
    const json doc = json::parse(text.str(), nullptr, false);
    std::vector<npuprof::proto::Event> log;
    if (doc.is_object() && doc.contains("events"))
      for (const auto& e : doc["events"]) {
        npuprof::proto::Event pe;
        pe.set_run_id("memory_profile");
        pe.set_seq(log.size() + 1);
        pe.set_type(e["type"].get<std::string>());
        pe.set_payload_json(e["payload"].dump());
        log.push_back(std::move(pe));
      }
    auto folded = npuprof::sm::Fold(npuprof::sm::DefaultKinds(), log);
    return folded.ok() ? *folded : npuprof::sm::RunState{};
  }();
  return state;
}

json InputOf(const npuprof::sm::RunState& s) {
  const json evidence = npuprof::sm::MemoryEvidenceFromState(s);
  return npuprof::sm::MemoryAdviceInput(s, evidence, npuprof::sm::BuildMemoryReport(evidence));
}

void BM_AdviseFinishedRun(benchmark::State& state) {
  const auto& s = Recorded();
  if (s.kind != "memory-profile") return state.SkipWithError("the recorded run did not fold");
  size_t findings = 0;
  for (auto _ : state) {
    const json advice = npuprof::sm::BuildMemoryAdvice(InputOf(s));
    findings = advice["findings"].size();
    benchmark::DoNotOptimize(advice);
  }
  state.counters["findings"] = static_cast<double>(findings);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdviseFinishedRun)->Unit(benchmark::kMicrosecond);

void BM_AdviceRulesOnly(benchmark::State& state) {
  const auto& s = Recorded();
  if (s.kind != "memory-profile") return state.SkipWithError("the recorded run did not fold");
  const json input = InputOf(s);
  for (auto _ : state) benchmark::DoNotOptimize(npuprof::sm::BuildMemoryAdvice(input));
  state.counters["input_bytes"] = static_cast<double>(input.dump().size());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdviceRulesOnly)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
