// Broker round trips: the REAL broker (broker::Broker, in-process, its own
// temp data dir, Run() on a thread) with no-op workers, driven through the
// client protocol (a raw DEALER speaking proto/wire.h).
//
// Each run is a `probe` run on the fake machine "x" (added with machine.add):
// submit -> commit (RunSubmitted, StateChanged, TaskScheduled) -> dispatch of
// one probe.npu_smi task -> a no-op worker answers at once -> commit
// (TaskSucceeded, ProbeRecorded, StateChanged, RunFinished). So one run = one
// task round trip and two synced group commits (plus the submission reply).
//
// Benchmarks (args: transport 0=ipc 1=tcp://127.0.0.1 without CURVE (the
// broker's ListenerSecurity::kNone, a baseline the server never runs) 2=tcp
// with CURVE 3=ipc with CURVE (what a server's local peers use once it has a
// tcp listener; clients and workers use the data dir's local key), sync 0/1,
// worker 0=raw DEALER worker 1=WorkerRuntime):
//   BM_BrokerThroughput: per iteration, kBatch runs submitted pipelined from
//     one client, then waits until every run is durably finished (the "runs"
//     verb with terminal=false answers from the store index, i.e. committed
//     state; it first waits for the RunFinished of the run whose result the
//     workers sent last, with the "events" verb, so that few "runs" polls,
//     whose answer lists every unfinished run, land in the timed window:
//     runs_polls_per_batch). runs_per_s = end to end; task_rt_per_s = tasks over the window
//     first task received .. last result sent (at the workers);
//     cpu_us_per_run = CPU time of the whole process (broker + workers +
//     client) per run, a figure that depends less on how loaded the machine
//     is; run_id_collisions = submissions rejected because the generated run
//     id already existed (resubmitted).
//   BM_BrokerLatency: closed loop, one run at a time; p50/p99 counters of
//     submit_ack = submit sent -> reply (the submission is committed; the
//                  broker dispatches right after the reply, same loop turn)
//     d2r        = dispatch to result: reply -> the run's RunFinished is
//                  readable from the store (the "events" verb reads committed
//                  events only; polled every 50 us once the worker answered)
//     e2e        = submit sent -> RunFinished readable.
//   BM_Recovery: a store with 10,000 finished + 100 unfinished probe runs;
//     time from Broker::Open to the answer of a ping sent right after Open
//     (the ping is handled in the first loop turn, after Recover()).
// Logging is set to warn (the server logs one info line per task; not
// measured here).
// NPUPROF_BENCH_METRICS=1: the broker keeps its Prometheus metrics
// (BrokerMetrics, as `npuprof server --metrics-listen` does) and a thread
// renders them, with the scrape-time readings, every 100 ms — far more often
// than Prometheus scrapes — so the figures include the hooks and the mutex.
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "bench/fanout_kind.h"
#include "bench/raw_client.h"
#include "broker/broker.h"
#include "broker/metrics.h"
#include "common/server_keys.h"
#include "common/socket_security.h"
#include "npuprof.pb.h"
#include "proto/wire.h"
#include "statemachine/probe_machine.h"
#include "workers/worker_runtime.h"

namespace npuprof::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "broker bench: %s\n", why.c_str());
  std::fflush(nullptr);
  std::_Exit(2);  // threads (broker, workers) are still running: no static destructors
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("NPUPROF_BENCH_DIR");
  std::filesystem::path root = base ? base : std::filesystem::temp_directory_path();
  std::string tmpl = (root / (prefix + "XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp " + tmpl);
  return tmpl;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    Die("cannot find a free loopback port");
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// CPU seconds used so far by every thread of this process (broker, workers, client).
double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// ---------------------------------------------------------------- broker

enum class Transport { kIpc = 0, kTcp = 1, kTcpCurve = 2, kIpcCurve = 3 };

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kIpc: return "ipc";
    case Transport::kTcp: return "tcp";
    case Transport::kTcpCurve: return "tcp+curve";
    case Transport::kIpcCurve: return "ipc+curve";
  }
  return "?";
}

// An in-process broker on a temp (or given) data dir, running on its own thread.
class BenchBroker {
 public:
  BenchBroker(bool sync, Transport transport, std::string dir = {}, const sm::KindRegistry* kinds = nullptr)
      : owns_dir_(dir.empty()) {
    dir_ = dir.empty() ? MakeTempDir("npuprof_broker_bench_") : dir;
    broker::BrokerOptions o;
    o.data_dir = dir_;
    o.sync = sync;
    o.kinds = kinds;
    if (const char* m = std::getenv("NPUPROF_BENCH_METRICS"); m && std::string(m) == "1") {
      metrics_ = std::make_unique<broker::BrokerMetrics>();
      o.metrics = metrics_.get();
    }
    if (transport != Transport::kIpc) {  // a tcp listener (which turns CURVE on for every endpoint)
      tcp_ = "tcp://127.0.0.1:" + std::to_string(FreePort());
      o.endpoints.push_back(tcp_);
    }
    if (transport == Transport::kTcp) o.security = broker::ListenerSecurity::kNone;
    auto b = broker::Broker::Open(o);
    if (!b.ok()) Die("broker open: " + b.status().ToString());
    broker_ = std::move(b).value();
    const bool over_tcp = transport == Transport::kTcp || transport == Transport::kTcpCurve;
    endpoint_ = over_tcp ? tcp_ : wire::IpcEndpointFor(dir_);
    auto keys = LocalPeerKeys(dir_);  // the local key, when CURVE is on
    if (!keys.ok()) Die("local keys: " + keys.status().ToString());
    keys_ = *keys;
  }
  void Start() {
    thread_ = std::thread([this] {
      Status s = broker_->Run(stop_);
      if (!s.ok()) Die("broker run: " + s.ToString());
    });
    if (metrics_)
      scraper_ = std::thread([this] {
        while (!stop_) {
          metrics::ScrapeReadings r;
          r.process = metrics::ReadProcessReadings();
          if (auto bytes = metrics::DirectoryBytes(dir_ + "/store")) r.store_size_bytes = static_cast<double>(*bytes);
          benchmark::DoNotOptimize(metrics_->Render(r));
          std::unique_lock<std::mutex> lock(scrape_mu_);
          scrape_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_.load(); });
        }
      });
  }
  ~BenchBroker() {
    {
      std::lock_guard<std::mutex> lock(scrape_mu_);
      stop_ = true;
    }
    scrape_cv_.notify_all();
    if (scraper_.joinable()) scraper_.join();
    if (thread_.joinable()) thread_.join();
    broker_.reset();
    if (owns_dir_) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& dir() const { return dir_; }
  const std::optional<CurveClientKeys>& keys() const { return keys_; }

 private:
  bool owns_dir_;
  std::string dir_, tcp_, endpoint_;
  std::optional<CurveClientKeys> keys_;
  std::unique_ptr<broker::BrokerMetrics> metrics_;  // outlives broker_ (declared before it)
  std::unique_ptr<broker::Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread thread_, scraper_;
  std::mutex scrape_mu_;
  std::condition_variable scrape_cv_;
};

// ---------------------------------------------------------------- client

// The answer's body; dies when the broker refuses or does not answer.
json CallOrDie(RawClient& c, const std::string& verb, const json& args) {
  proto::ClientResponse r = c.Call(verb, args);
  if (!r.ok()) Die(verb + ": " + r.error());
  return json::parse(r.body_json());
}

void AddFakeMachine(RawClient& c) {
  CallOrDie(c, "machine.add", json{{"name", "x"},
                                   {"host", "127.0.0.1"},
                                   {"user", "bench"},
                                   {"identity_file", "/nonexistent/bench_key"},
                                   {"known_hosts_file", "/nonexistent/bench_known_hosts"}});
}

const json& ProbeSubmit() {
  static const json args = {{"kind", "probe"}, {"spec", {{"machine", "x"}}}};
  return args;
}

// Submits n runs (probe unless told) pipelined and waits for every acknowledgement. A
// submission the broker rejects because its generated run id already exists
// (NewRunId: second resolution + 24 random bits, so ids collide when ~1000
// runs are submitted in one second) is sent again; returns how many were.
size_t SubmitBatch(RawClient& c, int n, const json& submit = ProbeSubmit()) {
  for (int i = 0; i < n; ++i) c.Send("submit", submit);
  size_t collisions = 0;
  for (int acked = 0; acked < n;) {
    proto::ClientResponse r = c.Recv();
    if (r.ok()) {
      ++acked;
    } else if (r.error().find("already exists") != std::string::npos) {
      ++collisions;
      c.Send("submit", submit);
    } else {
      Die("submit: " + r.error());
    }
  }
  return collisions;
}

// Number of runs not yet durably finished (store index).
size_t Unfinished(RawClient& c) { return CallOrDie(c, "runs", json{{"terminal", false}})["runs"].size(); }

// Waits until the run's RunFinished is committed (the "events" verb reads the
// store). Tails the run: each poll asks only for events after the last one
// seen, so a run with many events is not re-read (and re-encoded as JSON on
// the broker's loop thread) at every poll.
void WaitDurablyFinished(RawClient& c, const std::string& run_id) {
  uint64_t next_seq = 1;
  for (;;) {
    const json evs = CallOrDie(c, "events", json{{"run_id", run_id}, {"from_seq", next_seq}})["events"];
    for (const auto& e : evs)
      if (e["type"] == "RunFinished") return;
    if (!evs.empty()) next_seq = evs.back()["seq"].get<uint64_t>() + 1;
    // 1 ms between polls ends a batch at most ~1 ms late (batches last
    // >= 100 ms) and keeps the polls off the broker's loop meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// ---------------------------------------------------------------- workers

// What the workers saw: per run, task received and result sent (steady clock).
struct WorkerLog {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Clock::time_point> result_sent;  // run id -> time
  Clock::time_point first_task{Clock::time_point::max()};
  Clock::time_point last_result{Clock::time_point::min()};
  std::string last_run;  // run of the result sent last
  size_t results = 0;

  void TaskSeen(Clock::time_point t) {
    std::lock_guard<std::mutex> l(mu);
    first_task = std::min(first_task, t);
  }
  void ResultSent(const std::string& run_id, Clock::time_point t) {
    {
      std::lock_guard<std::mutex> l(mu);
      result_sent[run_id] = t;
      if (t >= last_result) last_run = run_id;
      last_result = std::max(last_result, t);
      ++results;
    }
    cv.notify_all();
  }
  void Reset() {
    std::lock_guard<std::mutex> l(mu);
    result_sent.clear();
    first_task = Clock::time_point::max();
    last_result = Clock::time_point::min();
    last_run.clear();
    results = 0;
  }
  void WaitResults(size_t n) {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, std::chrono::seconds(60), [&] { return results >= n; }))
      Die("workers saw " + std::to_string(results) + " of " + std::to_string(n) + " tasks");
  }
  void WaitResultFor(const std::string& run_id) {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, std::chrono::seconds(60), [&] { return result_sent.count(run_id) > 0; }))
      Die("no result for " + run_id);
  }
};

std::string NoopResultJson() {
  static const std::string j = json{{"npus", 0}, {"devices", json::array()}, {"noop", true}}.dump();
  return j;
}

// A minimal worker speaking the protocol on one DEALER: Ready, heartbeats,
// answers each task inline (no thread per task). With g_evidence_bytes > 0
// each result carries one evidence blob of that size (unique per task, like
// a real npu-smi output), which the broker stores before deciding.
std::atomic<int> g_evidence_bytes{0};

void RawWorkerLoop(const std::string& endpoint, const std::optional<CurveClientKeys>& keys, int index,
                   const std::atomic<bool>& stop, WorkerLog& log) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  SetUpConnectingSocket(sock, keys);
  sock.set(zmq::sockopt::sndhwm, 0);
  sock.set(zmq::sockopt::rcvhwm, 0);
  sock.set(zmq::sockopt::routing_id, "bench-raw-" + std::to_string(index));
  sock.connect(endpoint);
  auto send = [&](const proto::WorkerToBroker& m) {
    const std::string body = m.SerializeAsString();
    wire::SendFrames(sock, {wire::kWorkerHeader, body});
  };
  proto::WorkerToBroker ready;
  ready.mutable_ready()->set_worker_id("bench-raw-" + std::to_string(index));
  ready.mutable_ready()->add_task_kinds(sm::kProbeTask);
  ready.mutable_ready()->add_task_kinds(kFanoutTask);
  ready.mutable_ready()->set_capacity(100000);
  ready.mutable_ready()->set_pid(static_cast<uint32_t>(::getpid()));
  send(ready);
  auto next_hb = Clock::now();
  while (!stop) {
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(100));
    while (auto frames = wire::RecvFrames(sock, true)) {
      if (frames->size() < 2 || (*frames)[0] != wire::kWorkerHeader) continue;
      proto::BrokerToWorker msg;
      if (!msg.ParseFromString((*frames)[1]) || !msg.has_task()) continue;
      log.TaskSeen(Clock::now());
      proto::WorkerToBroker out;
      proto::TaskResult* r = out.mutable_result();
      r->set_task_id(msg.task().task_id());
      r->set_run_id(msg.task().run_id());
      r->set_attempt(msg.task().attempt());
      r->set_ok(true);
      r->set_result_json(NoopResultJson());
      if (const int n = g_evidence_bytes.load(); n > 0) {
        proto::EvidenceBlob* b = r->add_blobs();
        b->set_name("npu_smi_info.txt");
        std::string data = msg.task().task_id() + "\n";
        data.resize(static_cast<size_t>(n), '.');
        b->set_data(std::move(data));
      }
      send(out);
      log.ResultSent(msg.task().run_id(), Clock::now());
    }
    if (Clock::now() >= next_hb) {
      proto::WorkerToBroker hb;
      hb.set_heartbeat(true);
      send(hb);
      next_hb = Clock::now() + std::chrono::seconds(1);
    }
  }
  proto::WorkerToBroker bye;
  bye.set_disconnect(true);
  send(bye);
}

// N worker threads (raw or WorkerRuntime), stopped and joined on destruction.
class Workers {
 public:
  Workers(const BenchBroker& broker, int n, bool runtime, WorkerLog& log) {
    const std::string endpoint = broker.endpoint();
    const std::optional<CurveClientKeys> keys = broker.keys();
    for (int i = 0; i < n; ++i) {
      if (!runtime) {
        threads_.emplace_back([this, endpoint, keys, i, &log] { RawWorkerLoop(endpoint, keys, i, stop_, log); });
        continue;
      }
      workers::WorkerOptions o;
      o.broker_endpoint = endpoint;
      o.curve = keys;
      o.worker_id = "bench-rt-" + std::to_string(i);
      o.capacity = 64;
      auto w = std::make_unique<workers::WorkerRuntime>(o);
      // The runtime sends the result after the handler returns; "result sent"
      // is taken at handler return (the send itself waits for the runtime's
      // loop thread, which is part of what end-to-end figures measure).
      auto noop = [&log](const proto::Task& t, workers::TaskContext&) {
        log.TaskSeen(Clock::now());
        auto out = workers::TaskOutcome::Success(json::parse(NoopResultJson()));
        log.ResultSent(t.run_id(), Clock::now());
        return out;
      };
      w->Register(sm::kProbeTask, noop);
      w->Register(kFanoutTask, noop);
      workers::WorkerRuntime* wp = w.get();
      runtimes_.push_back(std::move(w));
      threads_.emplace_back([this, wp] { (void)wp->Run(stop_); });
    }
  }
  ~Workers() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<workers::WorkerRuntime>> runtimes_;
  std::vector<std::thread> threads_;
};

// Waits until the broker lists n workers.
void WaitForWorkers(RawClient& c, size_t n) {
  for (int i = 0; i < 500; ++i) {
    if (CallOrDie(c, "workers", json::object())["workers"].size() >= n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Die("workers did not register");
}

std::string VariantLabel(const benchmark::State& state) {
  return std::string(TransportName(static_cast<Transport>(state.range(0)))) + (state.range(1) ? " sync=on" : " sync=off") +
         (state.range(2) ? " worker=runtime" : " worker=raw");
}

constexpr int kWorkers = 2;
constexpr int kBatch = 1000;

// ---------------------------------------------------------------- throughput

// What one throughput variant submits: runs of `submit`, each with
// tasks_per_run no-op tasks, batch runs per iteration, decided with kinds
// (nullptr = the server's own kinds).
struct Workload {
  json submit = ProbeSubmit();
  int tasks_per_run = 1;
  int batch = kBatch;
  const sm::KindRegistry* kinds = nullptr;
};

void RunThroughput(benchmark::State& state, Transport transport, bool sync, bool runtime, const Workload& load = {}) {
  spdlog::set_level(spdlog::level::warn);
  BenchBroker broker(sync, transport, {}, load.kinds);
  broker.Start();
  RawClient client(broker.endpoint(), broker.keys());
  AddFakeMachine(client);
  WorkerLog log;
  Workers workers(broker, kWorkers, runtime, log);
  WaitForWorkers(client, kWorkers);

  const size_t tasks_per_batch = static_cast<size_t>(load.batch) * static_cast<size_t>(load.tasks_per_run);
  size_t runs = 0, collisions = 0, runs_polls = 0;
  double task_window_s = 0, total_s = 0, cpu_s = 0;
  for (auto _ : state) {
    log.Reset();
    const double c0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    collisions += SubmitBatch(client, load.batch, load.submit);
    log.WaitResults(tasks_per_batch);
    // End of the batch: first wait (cheaply, "events" of one run) for the run
    // whose result was sent last; the broker handles results in arrival order
    // and commits every turn, so by then (nearly) all are committed. Then
    // confirm with the store index. Polling "runs" alone, whose answer lists
    // every unfinished run, cost about a third of the process CPU (run 11).
    std::string last_run;
    {
      std::lock_guard<std::mutex> l(log.mu);
      last_run = log.last_run;
    }
    WaitDurablyFinished(client, last_run);
    for (;;) {
      ++runs_polls;
      if (Unfinished(client) == 0) break;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    const auto t1 = Clock::now();
    cpu_s += ProcessCpuSeconds() - c0;
    total_s += Seconds(t1 - t0);
    {
      std::lock_guard<std::mutex> l(log.mu);
      task_window_s += Seconds(log.last_result - log.first_task);
    }
    runs += static_cast<size_t>(load.batch);
  }
  const double tasks = static_cast<double>(runs) * load.tasks_per_run;
  state.counters["runs_per_s"] = static_cast<double>(runs) / total_s;
  state.counters["task_rt_per_s"] = tasks / task_window_s;
  // All threads of the process (broker, workers, client) per run: what a run
  // costs in CPU regardless of how loaded the machine is.
  state.counters["cpu_us_per_run"] = cpu_s * 1e6 / static_cast<double>(runs);
  if (load.tasks_per_run > 1) {
    // End to end, durably recorded: every task's result is committed.
    state.counters["tasks_per_s"] = tasks / total_s;
    state.counters["cpu_us_per_task"] = cpu_s * 1e6 / tasks;
  }
  state.counters["run_id_collisions"] = static_cast<double>(collisions);
  state.counters["runs_polls_per_batch"] = static_cast<double>(runs_polls) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(runs));
}

void BM_BrokerThroughput(benchmark::State& state) {
  RunThroughput(state, static_cast<Transport>(state.range(0)), state.range(1) != 0, state.range(2) != 0);
  state.SetLabel(VariantLabel(state));
}

// Raw workers whose every result carries a 2 KiB evidence blob (a real
// probe result carries npu-smi's output): the broker stores each blob before
// deciding, and durability must not cost an extra fsync per result.
void BM_BrokerThroughputEvidence(benchmark::State& state) {
  g_evidence_bytes = 2048;
  RunThroughput(state, Transport::kIpc, state.range(0) != 0, false);
  g_evidence_bytes = 0;
  state.SetLabel(std::string("ipc") + (state.range(0) ? " sync=on" : " sync=off") + " worker=raw evidence=2KiB");
}

// Task round trips apart from run creation and finish: each run schedules
// `tasks` no-op tasks at once (the bench-fanout kind, registered only here,
// like torch-profile's one analyse task per rank) and finishes when all
// succeeded. Per task: TaskScheduled, dispatch, result, TaskSucceeded,
// committed; per run on top: RunSubmitted, two StateChanged, RunFinished.
const sm::KindRegistry& BenchKinds() {
  static const sm::KindRegistry* kinds = [] {
    auto* r = new sm::KindRegistry;
    r->Register(MakeFanoutKind());
    return r;
  }();
  return *kinds;
}

void BM_BrokerTaskFanout(benchmark::State& state) {
  Workload load;
  const int tasks = static_cast<int>(state.range(3));
  load.submit = json{{"kind", kFanoutKind}, {"spec", {{"tasks", tasks}}}};
  load.tasks_per_run = tasks;
  load.batch = std::max(1, 16000 / tasks);
  load.kinds = &BenchKinds();
  RunThroughput(state, static_cast<Transport>(state.range(0)), state.range(1) != 0, state.range(2) != 0, load);
  state.SetLabel(VariantLabel(state) + " tasks/run=" + std::to_string(tasks));
}

// ---------------------------------------------------------------- latency

void BM_BrokerLatency(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const auto transport = static_cast<Transport>(state.range(0));
  const bool sync = state.range(1) != 0, runtime = state.range(2) != 0;
  BenchBroker broker(sync, transport);
  broker.Start();
  RawClient client(broker.endpoint(), broker.keys());
  AddFakeMachine(client);
  WorkerLog log;
  Workers workers(broker, kWorkers, runtime, log);
  WaitForWorkers(client, kWorkers);

  std::vector<double> ack_us, d2r_us, e2e_us;
  double events_per_run = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const std::string run_id = CallOrDie(client, "submit", ProbeSubmit())["run_id"];
    const auto t1 = Clock::now();
    log.WaitResultFor(run_id);
    for (;;) {
      json evs = CallOrDie(client, "events", json{{"run_id", run_id}})["events"];
      if (!evs.empty() && evs.back()["type"] == "RunFinished") {
        events_per_run = static_cast<double>(evs.size());
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const auto t2 = Clock::now();
    ack_us.push_back(Micros(t1 - t0));
    d2r_us.push_back(Micros(t2 - t1));
    e2e_us.push_back(Micros(t2 - t0));
  }
  state.counters["submit_ack_p50_us"] = Percentile(ack_us, 0.50);
  state.counters["submit_ack_p99_us"] = Percentile(ack_us, 0.99);
  state.counters["d2r_p50_us"] = Percentile(d2r_us, 0.50);
  state.counters["d2r_p99_us"] = Percentile(d2r_us, 0.99);
  state.counters["e2e_p50_us"] = Percentile(e2e_us, 0.50);
  state.counters["e2e_p99_us"] = Percentile(e2e_us, 0.99);
  state.counters["events_per_run"] = events_per_run;
  state.SetLabel(VariantLabel(state));
}

// transport: 0 ipc, 1 tcp, 2 tcp+curve, 3 ipc+curve (Transport).
void Variants(benchmark::internal::Benchmark* b) {
  for (int transport : {0, 1, 2, 3})
    for (int sync : {1, 0})
      for (int rt : {0, 1}) b->Args({transport, sync, rt});
  b->ArgNames({"transport", "sync", "runtime"});
}

void FanoutVariants(benchmark::internal::Benchmark* b) {
  for (int transport : {0, 1, 2, 3})
    for (int sync : {1, 0})
      for (int rt : {0, 1}) b->Args({transport, sync, rt, 16});
  b->ArgNames({"transport", "sync", "runtime", "tasks"});
}

BENCHMARK(BM_BrokerThroughput)->Apply(Variants)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BrokerThroughputEvidence)->Arg(1)->Arg(0)->ArgName("sync")->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BrokerTaskFanout)->Apply(FanoutVariants)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BrokerLatency)->Apply(Variants)->Iterations(100)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------- recovery

constexpr int kFinishedRuns = 10'000;
constexpr int kUnfinishedRuns = 100;

// Data dir with 10,000 finished and 100 unfinished probe runs, built once
// through the real broker (sync off while building).
std::string* g_recovery_dir = nullptr;
const std::string& RecoveryDir() {
  if (g_recovery_dir) return *g_recovery_dir;
  g_recovery_dir = new std::string(MakeTempDir("npuprof_recovery_bench_"));
  BenchBroker broker(/*sync=*/false, Transport::kIpc, *g_recovery_dir);
  broker.Start();
  RawClient client(broker.endpoint());
  AddFakeMachine(client);
  {
    WorkerLog log;
    Workers workers(broker, 1, /*runtime=*/false, log);
    WaitForWorkers(client, 1);
    for (int done = 0; done < kFinishedRuns; done += kBatch) {
      SubmitBatch(client, kBatch);
      log.WaitResults(static_cast<size_t>(done + kBatch));
    }
    while (Unfinished(client) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // No worker now: these stay in "probing" with their task outstanding.
  SubmitBatch(client, kUnfinishedRuns);
  if (Unfinished(client) != kUnfinishedRuns) Die("unexpected number of unfinished runs");
  return *g_recovery_dir;
}

void BM_Recovery(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const std::string& dir = RecoveryDir();
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto b = std::make_unique<BenchBroker>(/*sync=*/true, Transport::kIpc, dir);
    RawClient client(b->endpoint());
    client.Send("ping", json::object());
    b->Start();
    if (!client.Recv().ok()) Die("ping failed");
    const auto t1 = Clock::now();
    state.SetIterationTime(Seconds(t1 - t0));
    if (Unfinished(client) != kUnfinishedRuns) Die("recovery lost runs");
    b.reset();
  }
  state.counters["finished_runs"] = kFinishedRuns;
  state.counters["unfinished_runs"] = kUnfinishedRuns;
}
BENCHMARK(BM_Recovery)->Iterations(5)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  if (npuprof::bench::g_recovery_dir) {
    std::error_code ec;
    std::filesystem::remove_all(*npuprof::bench::g_recovery_dir, ec);
    delete npuprof::bench::g_recovery_dir;
  }
  benchmark::Shutdown();
  return 0;
}
