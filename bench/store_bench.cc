// EventStore throughput: synced appends (single writer, group-committed
// threads, explicit AppendGroup) and replay speed (ScanGlobal, ReadRun).
// The store lives in a fresh directory under $NPUPROF_BENCH_DIR (default:
// the system temp dir), removed afterwards. fsync cost depends on that disk.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/event_store.h"

namespace npuprof::store {
namespace {

// A fresh store in a new temp directory; both are gone when this dies.
class BenchStore {
 public:
  explicit BenchStore(bool sync) {
    const char* base = std::getenv("NPUPROF_BENCH_DIR");
    std::filesystem::path root = base ? base : std::filesystem::temp_directory_path();
    std::string tmpl = (root / "npuprof_bench_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp " + tmpl);
    dir_ = tmpl;
    auto r = EventStore::Open(dir_, {.sync = sync});
    if (!r.ok()) Die(r.status().ToString());
    store_ = std::move(r).value();
  }
  ~BenchStore() {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Closes and opens the store again, as a restarted server does (RocksDB
  // recovers its WAL and flushes it to table files on open).
  void Reopen() {
    store_.reset();
    auto r = EventStore::Open(dir_, {.sync = false});
    if (!r.ok()) Die(r.status().ToString());
    store_ = std::move(r).value();
  }
  EventStore& operator*() { return *store_; }
  EventStore* operator->() { return store_.get(); }

  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "store bench: %s\n", why.c_str());
    std::exit(2);
  }

 private:
  std::string dir_;
  std::unique_ptr<EventStore> store_;
};

// A typical small event: ~200 bytes of payload.
proto::Event MakeEvent(uint64_t i) {
  proto::Event ev;
  ev.set_type("task.completed");
  ev.set_time_ms(1'700'000'000'000 + static_cast<int64_t>(i));
  ev.set_cause("task:probe.npu_smi-" + std::to_string(i) + "#1");
  ev.set_payload_json(R"({"task_id":"probe.npu_smi-)" + std::to_string(i) +
                      R"(","ok":true,"result":{"npus":8,"hbm_total_mb":65536,"health":"OK",)"
                      R"("driver":"24.1.rc2","firmware":"7.3.0.1.231"},"evidence":["sha256:ab12cd34"]})");
  return ev;
}

AppendRequest OneEvent(const std::string& run, uint64_t last) {
  AppendRequest r;
  r.run_id = run;
  r.expected_last_seq = last;
  r.events.push_back(MakeEvent(last));
  return r;
}

void Check(const Status& s) {
  if (!s.ok()) BenchStore::Die(s.ToString());
}

void SetRate(benchmark::State& state, double events) {
  state.counters["events"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
}

// One caller, one event per append, fsync per append.
void BM_SyncedSingleWriter(benchmark::State& state) {
  BenchStore store(/*sync=*/true);
  uint64_t last = 0;
  for (auto _ : state) {
    Check(store->Append(OneEvent("run", last)));
    ++last;
  }
  SetRate(state, static_cast<double>(last));
}
BENCHMARK(BM_SyncedSingleWriter)->UseRealTime();

// N threads append one event each to their own run; the store group-commits them.
BenchStore* g_shared = nullptr;
void BM_GroupCommitThreads(benchmark::State& state) {
  if (state.thread_index() == 0) g_shared = new BenchStore(/*sync=*/true);
  const std::string run = "run-" + std::to_string(state.thread_index());
  uint64_t last = 0;
  for (auto _ : state) {  // the loop start/end are barriers across threads
    Check((*g_shared)->Append(OneEvent(run, last)));
    ++last;
  }
  SetRate(state, static_cast<double>(last));  // summed over threads
  if (state.thread_index() == 0) {
    delete g_shared;
    g_shared = nullptr;
  }
}
BENCHMARK(BM_GroupCommitThreads)->Threads(8)->Threads(32)->UseRealTime();

// Broker style: one caller hands over 100 runs' requests per synced batch.
void BM_AppendGroup100(benchmark::State& state) {
  BenchStore store(/*sync=*/true);
  constexpr int kPerBatch = 100;
  uint64_t round = 0;
  std::vector<AppendRequest> reqs;
  for (auto _ : state) {
    reqs.clear();
    for (int r = 0; r < kPerBatch; ++r) reqs.push_back(OneEvent("run-" + std::to_string(r), round));
    for (const auto& s : store->AppendGroup(reqs)) Check(s);
    ++round;
  }
  SetRate(state, static_cast<double>(round * kPerBatch));
}
BENCHMARK(BM_AppendGroup100)->UseRealTime();

// Replay fixture: 200k events over 1000 interleaved runs, built once. Two
// ways to find them: as just written by a running server (still in RocksDB's
// memtable), and after a restart (`reopened`: in table files, as every event
// older than the last ~64 MiB written is on a long-running server).
constexpr int kReplayRuns = 1000;
constexpr int kReplayEvents = 200'000;
BenchStore* g_replay = nullptr;
bool g_replay_reopened = false;
EventStore& ReplayStore(bool reopened) {
  if (g_replay == nullptr) {
    g_replay = new BenchStore(/*sync=*/false);
    std::vector<AppendRequest> reqs;
    for (int round = 0; round < kReplayEvents / kReplayRuns; ++round) {
      reqs.clear();
      for (int r = 0; r < kReplayRuns; ++r) reqs.push_back(OneEvent("run-" + std::to_string(r), round));
      for (const auto& s : (*g_replay)->AppendGroup(reqs)) Check(s);
    }
  }
  if (reopened && !g_replay_reopened) {
    g_replay->Reopen();
    g_replay_reopened = true;
  }
  if (!reopened && g_replay_reopened) BenchStore::Die("memtable replay must run before the reopened one");
  return **g_replay;
}

// Arg 0: events as written (memtable); 1: after a reopen (table files).
void BM_ReplayScanGlobal(benchmark::State& state) {
  EventStore& store = ReplayStore(state.range(0) == 1);
  state.SetLabel(state.range(0) == 1 ? "reopened" : "memtable");
  uint64_t seen = 0;
  for (auto _ : state) {
    uint64_t pos = 0;
    Check(store.ScanGlobal(1, [&](const proto::Event& ev) {
      benchmark::DoNotOptimize(ev.seq());
      // Global order: positions 1, 2, 3, ... (a cheap check that replay keeps it).
      if (ev.global_pos() != ++pos) BenchStore::Die("replay out of global order at " + std::to_string(pos));
      ++seen;
      return true;
    }));
  }
  if (seen != static_cast<uint64_t>(kReplayEvents) * state.iterations()) {
    BenchStore::Die("replay saw " + std::to_string(seen) + " events");
  }
  SetRate(state, static_cast<double>(seen));
}
BENCHMARK(BM_ReplayScanGlobal)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// Rebuilding one run (recovery path): 200 events of one run out of 1000.
void BM_ReplayReadRun(benchmark::State& state) {
  EventStore& store = ReplayStore(true);
  uint64_t seen = 0;
  int r = 0;
  for (auto _ : state) {
    auto evs = store.ReadRun("run-" + std::to_string(r++ % kReplayRuns));
    Check(evs.status());
    seen += evs->size();
  }
  SetRate(state, static_cast<double>(seen));
}
BENCHMARK(BM_ReplayReadRun)->UseRealTime();

}  // namespace
}  // namespace npuprof::store

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  delete npuprof::store::g_replay;  // before static destructors: closes and removes the store
  benchmark::Shutdown();
  return 0;
}
