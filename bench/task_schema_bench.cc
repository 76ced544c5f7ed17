// What the task contract costs per task: the worker's judgement of a payload
// (CheckTaskPayloadText), its decode into the handler's message
// (DecodeTaskPayload), the judgement of the handler's result
// (CheckTaskResult), and the machine-side check at scheduling
// (CheckTaskPayload), over every task of the recorded memory-profile and
// torch-profile runs (tests/data/views); and what the fold adds per run, the
// spec decoded into its kind's message when RunSubmitted is folded
// (RefreshTypedSpec), beside the whole run's fold; and what one decision's
// read of a kind's data as its message costs (DataOf) on the recorded runs'
// final data, the largest a decision reads. Figures: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <google/protobuf/message.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npuprof.pb.h"
#include "statemachine/engine.h"
#include "statemachine/task_schema.h"
#include "kind_data.pb.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"
#include "task_payloads.pb.h"

namespace {

using json = nlohmann::json;

json RecordedEvents(const char* name) {
  std::ifstream f(std::string(NPUPROF_BENCH_DATA_DIR) + "/views/" + name + ".events.json");
  std::stringstream text;
  text << f.rdbuf();
  const json doc = json::parse(text.str(), nullptr, false);
  return doc.is_object() && doc.contains("events") ? doc["events"] : json::array();
}

struct RecordedTask {
  std::string kind;
  json payload;
  std::string payload_text;
  json result;  // null when the task has none recorded
};

const std::vector<RecordedTask>& Recorded() {
  static const std::vector<RecordedTask> tasks = [] {
    std::vector<RecordedTask> out;
    for (const char* name : {"memory_profile", "torch_profile"}) {
      std::map<std::string, size_t> index;
      for (const auto& e : RecordedEvents(name)) {
        const json& p = e["payload"];
        if (e["type"] == "TaskScheduled") {
          index[p["task_id"]] = out.size();
          out.push_back({p["kind"], p["payload"], p["payload"].dump(), json(nullptr)});
        } else if ((e["type"] == "TaskSucceeded" || e["type"] == "TaskFailed") && p.contains("result")) {
          if (auto it = index.find(p["task_id"]); it != index.end()) out[it->second].result = p["result"];
        }
      }
    }
    return out;
  }();
  return tasks;
}

void BM_SchedulerChecksPayload(benchmark::State& state) {
  const auto& tasks = Recorded();
  size_t i = 0;
  for (auto _ : state) {
    const RecordedTask& t = tasks[i++ % tasks.size()];
    benchmark::DoNotOptimize(npuprof::sm::CheckTaskPayload(t.kind, t.payload));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SchedulerChecksPayload);

// The worker's two steps before a handler runs: judge the text, decode it.
void BM_WorkerJudgesAndDecodesPayload(benchmark::State& state) {
  const auto& tasks = Recorded();
  std::vector<std::unique_ptr<google::protobuf::Message>> messages;
  const google::protobuf::FileDescriptor* file = npuprof::tasks::Machine::descriptor()->file();
  for (const RecordedTask& t : tasks) {
    const google::protobuf::Descriptor* d = nullptr;
    for (int m = 0; m < file->message_type_count() && !d; ++m)
      if (npuprof::sm::TaskKindOf(*file->message_type(m)) == t.kind) d = file->message_type(m);
    messages.emplace_back(google::protobuf::MessageFactory::generated_factory()->GetPrototype(d)->New());
  }
  size_t i = 0;
  for (auto _ : state) {
    const size_t n = i++ % tasks.size();
    const RecordedTask& t = tasks[n];
    benchmark::DoNotOptimize(npuprof::sm::CheckTaskPayloadText(t.kind, t.payload_text));
    messages[n]->Clear();
    benchmark::DoNotOptimize(npuprof::sm::DecodeTaskPayload(t.kind, t.payload_text, *messages[n]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WorkerJudgesAndDecodesPayload);

void BM_WorkerJudgesResult(benchmark::State& state) {
  const auto& tasks = Recorded();
  size_t i = 0;
  for (auto _ : state) {
    const RecordedTask& t = tasks[i++ % tasks.size()];
    benchmark::DoNotOptimize(npuprof::sm::CheckTaskResult(t.kind, t.result));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WorkerJudgesResult);

// The recorded runs as stored logs (hash and chain are not looked at by the fold).
const std::vector<std::vector<npuprof::proto::Event>>& RecordedLogs() {
  static const std::vector<std::vector<npuprof::proto::Event>> logs = [] {
    std::vector<std::vector<npuprof::proto::Event>> out;
    for (const char* name : {"memory_profile", "torch_profile"}) {
      std::vector<npuprof::proto::Event> log;
      for (const auto& e : RecordedEvents(name)) {
        npuprof::proto::Event pe;
        pe.set_run_id(name);
        pe.set_seq(log.size() + 1);
        pe.set_type(e["type"].get<std::string>());
        pe.set_payload_json(e["payload"].dump());
        log.push_back(std::move(pe));
      }
      out.push_back(std::move(log));
    }
    return out;
  }();
  return logs;
}

// Per run folded: its spec filled by the kind's ValidateSpec and decoded.
void BM_FoldDecodesRunSpec(benchmark::State& state) {
  std::vector<npuprof::sm::RunState> runs;
  for (const auto& log : RecordedLogs()) {
    const json p = json::parse(log.front().payload_json());
    npuprof::sm::RunState s;
    s.kind = p["kind"];
    s.spec = p["spec"];
    runs.push_back(std::move(s));
  }
  size_t i = 0;
  for (auto _ : state) {
    npuprof::sm::RunState& s = runs[i++ % runs.size()];
    benchmark::DoNotOptimize(npuprof::sm::RefreshTypedSpec(s, npuprof::sm::DefaultKinds().Find(s.kind)));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FoldDecodesRunSpec);

// Per run folded: every event of a recorded run (the decode above included).
void BM_FoldRecordedRun(benchmark::State& state) {
  const auto& logs = RecordedLogs();
  size_t i = 0;
  for (auto _ : state) {
    auto folded = npuprof::sm::Fold(npuprof::sm::DefaultKinds(), logs[i++ % logs.size()]);
    benchmark::DoNotOptimize(folded);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FoldRecordedRun);

// Per read: a recorded run's final data (every step's evidence) decoded as its
// kind's message, what one DataOf in a decision costs at most (arg: the
// recorded run, 0 memory-profile, 1 torch-profile).
void BM_DecisionReadsKindData(benchmark::State& state) {
  auto folded = npuprof::sm::Fold(npuprof::sm::DefaultKinds(), RecordedLogs().at(state.range(0)));
  if (!folded.ok()) return state.SkipWithError(folded.status().message().c_str());
  const npuprof::sm::RunState& s = *folded;
  for (auto _ : state) {
    if (s.kind == "memory-profile") {
      benchmark::DoNotOptimize(npuprof::sm::ReadData<npuprof::kind_data::MemoryProfileData>(s));
    } else {
      benchmark::DoNotOptimize(npuprof::sm::ReadData<npuprof::kind_data::TorchProfileData>(s));
    }
  }
  state.SetLabel(s.kind);
  state.counters["data_bytes"] = static_cast<double>(s.data.dump().size());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecisionReadsKindData)->Arg(0)->Arg(1);

// The summary `npuprof show` prints of a recorded run's final state: for
// memory-profile one decode of its data (the service record and the
// progress are read from it) plus the report built from the evidence.
void BM_KindSummary(benchmark::State& state) {
  auto folded = npuprof::sm::Fold(npuprof::sm::DefaultKinds(), RecordedLogs().at(state.range(0)));
  if (!folded.ok()) return state.SkipWithError(folded.status().message().c_str());
  const npuprof::sm::RunState& s = *folded;
  const npuprof::sm::RunKind* kind = npuprof::sm::DefaultKinds().Find(s.kind);
  if (kind == nullptr) return state.SkipWithError("no such kind");
  for (auto _ : state) benchmark::DoNotOptimize(kind->Summary(s));
  state.SetLabel(s.kind);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KindSummary)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
