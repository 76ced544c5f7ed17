#include "broker/metrics.h"

#include <array>

#include "broker/device_scheduler.h"
#include "broker/metrics_payload_peek.h"
#include "broker/worker_registry.h"
#include "statemachine/event_types.h"
#include "statemachine/serve_hbm_watch.h"

namespace npuprof::broker {

namespace ev = sm::ev;
using metrics::MetricType;

namespace {

// Durations of tasks: a probe takes tens of milliseconds, an analyse or a
// readiness wait minutes; a service watch lasts as long as its service.
const std::vector<double>& TaskBounds() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,    2.5,
                                        5,     10,   30,    60,   120, 300,  600, 1800, 3600};
  return b;
}
// A synced group commit: an fsync, from tens of microseconds to a slow disk's second.
const std::vector<double>& CommitBounds() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};
  return b;
}

// The verbs the broker answers (client_api.cc); any other counts as "other".
std::string_view VerbLabel(std::string_view verb) {
  static constexpr std::array<std::string_view, 16> kVerbs = {
      "blob",         "cancel",         "events",       "import", "machine.add", "machine.list",
      "machine.remove", "machine.show", "manifest",     "ping",   "runs",        "show",
      "signal",       "submit",         "verify",       "workers"};
  for (std::string_view v : kVerbs)
    if (v == verb) return v;
  return "other";
}

std::string_view Field(const proto::Event& e, std::string_view key, std::string_view fallback) {
  auto v = metrics::PeekTopLevel(e.payload_json(), key);
  return v && !v->empty() ? *v : fallback;
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// An HbmSampled payload (a few devices: parsed whole) sets each device's gauge.
void SetServiceHbm(metrics::MetricFamily& family, const proto::Event& e, const sm::RunState& run) {
  const nlohmann::json p = nlohmann::json::parse(e.payload_json(), nullptr, false);
  if (!p.is_object() || !p.contains("devices") || !p["devices"].is_array()) return;
  for (const auto& d : p["devices"]) {
    if (!d.is_object() || !d.contains("device_id") || !d["device_id"].is_number_integer() ||
        !d.contains("used_mb") || !d["used_mb"].is_number())
      continue;
    const std::string device = std::to_string(d["device_id"].get<int64_t>());
    family.With({run.run_id, run.machine, device}).Set(d["used_mb"].get<double>() * 1024 * 1024);
  }
}

}  // namespace

BrokerMetrics::BrokerMetrics()
    : runs_submitted_(reg_.Add("npuprof_runs_submitted_total", "Runs submitted to this server since it started.",
                               MetricType::kCounter, {"kind"})),
      runs_recovered_(reg_.Add("npuprof_runs_recovered_total",
                               "Unfinished runs resumed when this server started (RunRecovered).",
                               MetricType::kCounter, {"kind"})),
      runs_finished_(reg_.Add("npuprof_runs_finished_total",
                              "Runs that finished since this server started, by final status (ok, failed, cancelled).",
                              MetricType::kCounter, {"kind", "status"})),
      runs_active_(reg_.Add("npuprof_runs_active",
                            "Runs submitted or recovered by this server that have not finished.", MetricType::kGauge,
                            {"kind"})),
      runs_queued_(reg_.Add("npuprof_runs_queued",
                            "Runs waiting for NPUs of a machine (requested, not yet leased).", MetricType::kGauge,
                            {"machine"})),
      devices_leased_(reg_.Add("npuprof_devices_leased", "NPUs of a machine leased to runs.", MetricType::kGauge,
                               {"machine"})),
      task_attempts_(reg_.Add("npuprof_task_attempts_total",
                              "Task attempts scheduled: first attempts plus re-dispatches.", MetricType::kCounter,
                              {"kind"})),
      task_retries_(reg_.Add("npuprof_task_retries_total",
                             "Retryable task failures that scheduled a retry after backoff.", MetricType::kCounter,
                             {"kind"})),
      task_redispatches_(reg_.Add("npuprof_task_redispatches_total",
                                  "Tasks dispatched again, by reason (retry, worker_lost, recovery).",
                                  MetricType::kCounter, {"kind", "reason"})),
      task_results_(reg_.Add("npuprof_task_results_total",
                             "Task results recorded: succeeded, failed (final) or retried (a retry follows).",
                             MetricType::kCounter, {"kind", "outcome"})),
      task_results_ignored_(reg_.Add("npuprof_task_results_ignored_total",
                                     "Task results ignored: stale attempts, duplicates, unknown tasks.",
                                     MetricType::kCounter)),
      tasks_abandoned_(reg_.Add("npuprof_tasks_abandoned_total",
                                "Tasks abandoned because their run ended or moved on.", MetricType::kCounter,
                                {"kind"})),
      task_duration_(reg_.Add("npuprof_task_duration_seconds",
                              "Time from dispatching a task attempt to a worker to receiving its result.",
                              MetricType::kHistogram, {"kind"}, TaskBounds())),
      tasks_pending_(reg_.Add("npuprof_tasks_pending", "Tasks scheduled and waiting for a free worker slot.",
                              MetricType::kGauge)),
      tasks_in_flight_(reg_.Add("npuprof_worker_tasks_in_flight",
                                "Task attempts dispatched to workers and not answered yet.", MetricType::kGauge)),
      workers_(reg_.Add("npuprof_workers", "Workers connected to the broker.", MetricType::kGauge)),
      worker_slots_(reg_.Add("npuprof_worker_slots", "Task slots of the connected workers (their capacity).",
                             MetricType::kGauge)),
      events_committed_(reg_.Add("npuprof_events_committed_total", "Run events committed to the store.",
                                 MetricType::kCounter)),
      commit_duration_(reg_.Add("npuprof_store_commit_duration_seconds",
                                "Duration of one synced group commit (every decision of a loop turn).",
                                MetricType::kHistogram, {}, CommitBounds())),
      store_size_(reg_.Add("npuprof_store_size_bytes", "Size of the store's files on disk (read when scraped).",
                           MetricType::kGauge)),
      client_requests_(reg_.Add("npuprof_client_requests_total", "Client requests answered, by verb and result.",
                                MetricType::kCounter, {"verb", "result"})),
      loop_turns_(reg_.Add("npuprof_broker_loop_turns_total", "Turns of the broker loop.", MetricType::kCounter)),
      service_hbm_used_(reg_.Add("npuprof_service_hbm_used_bytes",
                                 "Device memory (HBM) a watched service's NPU used at its last sample "
                                 "(serve --watch-hbm).",
                                 MetricType::kGauge, {"run_id", "machine", "device"})),
      process_start_(reg_.Add("process_start_time_seconds", "Start time of the process since the Unix epoch.",
                              MetricType::kGauge)),
      process_cpu_(reg_.Add("process_cpu_seconds_total", "User and system CPU time of the process.",
                            MetricType::kCounter)),
      process_resident_(reg_.Add("process_resident_memory_bytes", "Resident memory of the process.",
                                 MetricType::kGauge)),
      process_virtual_(reg_.Add("process_virtual_memory_bytes", "Virtual memory of the process.",
                                MetricType::kGauge)),
      process_open_fds_(reg_.Add("process_open_fds", "Open file descriptors of the process.", MetricType::kGauge)),
      process_max_fds_(reg_.Add("process_max_fds", "Limit of open file descriptors of the process.",
                                MetricType::kGauge)) {}

std::string_view BrokerMetrics::TaskKind(const sm::RunState& run, std::string_view task_id) {
  task_id_scratch_.assign(task_id);
  const sm::TaskInfo* t = run.FindTask(task_id_scratch_);
  return t && !t->kind.empty() ? std::string_view(t->kind) : std::string_view("unknown");
}

void BrokerMetrics::EventCommitted(const proto::Event& e, const sm::RunState& run) {
  std::lock_guard<std::mutex> lock(mu_);
  events_committed_.Only().Inc();
  const std::string& t = e.type();
  const std::string_view run_kind = run.kind.empty() ? std::string_view("unknown") : std::string_view(run.kind);
  if (t == ev::kTaskScheduled) {
    task_attempts_.With({Field(e, "kind", "unknown")}).Inc();
  } else if (t == ev::kTaskRedispatched) {
    const std::string_view kind = TaskKind(run, Field(e, "task_id", ""));
    task_attempts_.With({kind}).Inc();
    task_redispatches_.With({kind, Field(e, "reason", "unknown")}).Inc();
  } else if (t == ev::kTaskRetryScheduled) {
    task_retries_.With({TaskKind(run, Field(e, "task_id", ""))}).Inc();
  } else if (t == ev::kTaskSucceeded) {
    task_results_.With({TaskKind(run, Field(e, "task_id", "")), "succeeded"}).Inc();
  } else if (t == ev::kTaskFailed) {
    // final is written whenever it is true (an older store wrote it always).
    const bool final = Field(e, "final", "false") == "true";
    task_results_.With({TaskKind(run, Field(e, "task_id", "")), final ? "failed" : "retried"}).Inc();
  } else if (t == ev::kTaskResultIgnored) {
    task_results_ignored_.Only().Inc();
  } else if (t == ev::kTaskAbandoned) {
    tasks_abandoned_.With({TaskKind(run, Field(e, "task_id", ""))}).Inc();
  } else if (t == ev::kRunSubmitted) {
    runs_submitted_.With({run_kind}).Inc();
    runs_active_.With({run_kind}).Add(1);
  } else if (t == ev::kRunRecovered) {
    runs_recovered_.With({run_kind}).Inc();
    runs_active_.With({run_kind}).Add(1);
  } else if (t == ev::kRunFinished) {
    runs_finished_.With({run_kind, Field(e, "status", "unknown")}).Inc();
    runs_active_.With({run_kind}).Add(-1);
    service_hbm_used_.RemoveWhere(0, run.run_id);
  } else if (t == sm::kHbmSampled) {
    SetServiceHbm(service_hbm_used_, e, run);
  }
}

void BrokerMetrics::CommitTimed(std::chrono::steady_clock::duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  commit_duration_.Only().Observe(Seconds(d));
}

void BrokerMetrics::TaskAnswered(std::string_view task_kind, std::chrono::steady_clock::duration since_dispatch) {
  std::lock_guard<std::mutex> lock(mu_);
  task_duration_.With({task_kind.empty() ? std::string_view("unknown") : task_kind}).Observe(Seconds(since_dispatch));
}

void BrokerMetrics::ClientAnswered(std::string_view verb, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  client_requests_.With({VerbLabel(verb), ok ? "ok" : "error"}).Inc();
}

void BrokerMetrics::ClientMalformed() {
  std::lock_guard<std::mutex> lock(mu_);
  client_requests_.With({"malformed", "error"}).Inc();
}

void BrokerMetrics::TurnEnded(const DeviceScheduler& leases, const WorkerRegistry& workers, size_t tasks_in_flight,
                              size_t tasks_pending) {
  std::lock_guard<std::mutex> lock(mu_);
  loop_turns_.Only().Inc();
  leases.ForEachMachine([this](const std::string& machine, size_t queued, size_t leased) {
    runs_queued_.With({machine}).Set(static_cast<double>(queued));
    devices_leased_.With({machine}).Set(static_cast<double>(leased));
  });
  double slots = 0;
  for (const auto& [identity, w] : workers.all()) slots += w.capacity;
  workers_.Only().Set(static_cast<double>(workers.all().size()));
  worker_slots_.Only().Set(slots);
  tasks_in_flight_.Only().Set(static_cast<double>(tasks_in_flight));
  tasks_pending_.Only().Set(static_cast<double>(tasks_pending));
}

std::string BrokerMetrics::Render(const metrics::ScrapeReadings& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto set = [](metrics::MetricFamily& f, const std::optional<double>& v) {
    if (v) f.Only().Set(*v);
  };
  set(store_size_, r.store_size_bytes);
  set(process_start_, r.process.start_time_seconds);
  set(process_cpu_, r.process.cpu_seconds);  // a counter whose value the kernel keeps
  set(process_resident_, r.process.resident_bytes);
  set(process_virtual_, r.process.virtual_bytes);
  set(process_open_fds_, r.process.open_fds);
  set(process_max_fds_, r.process.max_fds);
  return reg_.Render();
}

}  // namespace npuprof::broker
