// What the task contract costs per task: the worker's judgement of a payload
// (CheckTaskPayloadText), its decode into the handler's message
// (DecodeTaskPayload), the judgement of the handler's result
// (CheckTaskResult), and the machine-side check at scheduling
// (CheckTaskPayload), over every task of the recorded memory-profile and
// torch-profile runs (tests/data/views). Figures: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <google/protobuf/message.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/task_schema.h"
#include "task_payloads.pb.h"

namespace {

using json = nlohmann::json;

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
      std::ifstream f(std::string(NPUPROF_BENCH_DATA_DIR) + "/views/" + name + ".events.json");
      std::stringstream text;
      text << f.rdbuf();
      const json doc = json::parse(text.str(), nullptr, false);
      if (!doc.is_object()) continue;
      std::map<std::string, size_t> index;
      for (const auto& e : doc["events"]) {
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

}  // namespace

BENCHMARK_MAIN();
