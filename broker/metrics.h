// BrokerMetrics: what `npuprof server --metrics-listen` exposes, kept up to
// date by the broker loop at a few hook points and rendered by the HTTP
// thread (broker/metrics_http.h). Pure data behind one mutex: no I/O (the
// figures read at scrape time come in as ScrapeReadings).
//
// Hook points (each a one-line call in broker code, all optional: a broker
// without metrics pays nothing):
//   EventCommitted  commit.cc, AfterCommit: once per committed event of a
//                   run. The committed event stream is the source of truth
//                   of every run and task counter; events that were decided
//                   but not committed never count, imported runs never pass
//                   here. A watched service's HbmSampled sets its devices'
//                   npuprof_service_hbm_used_bytes; its RunFinished drops them.
//   CommitTimed     commit.cc, Commit: the synced group commit (AppendGroup).
//   TaskAnswered    dispatch_loop.cc, HandleWorker: the result of the
//                   attempt in flight (dispatch -> result).
//   ClientAnswered / ClientMalformed  client_api.cc, HandleClient.
//   TurnEnded       dispatch_loop.cc, Run: once per loop turn, the gauges
//                   (leases per machine, workers, tasks in flight/pending).
// Each hook takes the mutex once and does a few map lookups and adds; no
// allocation once a label set has been seen. Render holds the mutex while it
// formats (tens of microseconds for a few hundred series), so the loop can
// wait at most that long on a hook.
//
// Counters start at zero when the server starts (Prometheus treats that as a
// reset); gauges are current values. Label values come from the engine (run
// and task kinds, statuses, redispatch reasons), the inventory (machines) or
// a fixed list (client verbs: anything else counts as "other"), so the
// number of series stays bounded whatever clients send.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "broker/metrics_registry.h"
#include "broker/metrics_scrape.h"
#include "npuprof.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::broker {

class DeviceScheduler;
class WorkerRegistry;

class BrokerMetrics {
 public:
  BrokerMetrics();
  BrokerMetrics(const BrokerMetrics&) = delete;
  BrokerMetrics& operator=(const BrokerMetrics&) = delete;

  // ---- broker loop
  // e was committed for run (the cached state once the turn's events are applied).
  void EventCommitted(const proto::Event& e, const sm::RunState& run);
  void CommitTimed(std::chrono::steady_clock::duration d);
  void TaskAnswered(std::string_view task_kind, std::chrono::steady_clock::duration since_dispatch);
  void ClientAnswered(std::string_view verb, bool ok);
  void ClientMalformed();
  void TurnEnded(const DeviceScheduler& leases, const WorkerRegistry& workers, size_t tasks_in_flight,
                 size_t tasks_pending);

  // ---- HTTP thread
  // The exposition (text format 0.0.4) with the scrape-time figures set first.
  std::string Render(const metrics::ScrapeReadings& readings);

 private:
  // The kind of run's task task_id ("" when unknown).
  std::string_view TaskKind(const sm::RunState& run, std::string_view task_id);

  std::mutex mu_;
  metrics::MetricsRegistry reg_;
  std::string task_id_scratch_;  // reused for task lookups

  metrics::MetricFamily& runs_submitted_;
  metrics::MetricFamily& runs_recovered_;
  metrics::MetricFamily& runs_finished_;
  metrics::MetricFamily& runs_active_;
  metrics::MetricFamily& runs_queued_;
  metrics::MetricFamily& devices_leased_;
  metrics::MetricFamily& task_attempts_;
  metrics::MetricFamily& task_retries_;
  metrics::MetricFamily& task_redispatches_;
  metrics::MetricFamily& task_results_;
  metrics::MetricFamily& task_results_ignored_;
  metrics::MetricFamily& tasks_abandoned_;
  metrics::MetricFamily& task_duration_;
  metrics::MetricFamily& tasks_pending_;
  metrics::MetricFamily& tasks_in_flight_;
  metrics::MetricFamily& workers_;
  metrics::MetricFamily& worker_slots_;
  metrics::MetricFamily& events_committed_;
  metrics::MetricFamily& commit_duration_;
  metrics::MetricFamily& store_size_;
  metrics::MetricFamily& client_requests_;
  metrics::MetricFamily& loop_turns_;
  metrics::MetricFamily& service_hbm_used_;  // serve --watch-hbm: the last sample per device
  metrics::MetricFamily& process_start_;
  metrics::MetricFamily& process_cpu_;
  metrics::MetricFamily& process_resident_;
  metrics::MetricFamily& process_virtual_;
  metrics::MetricFamily& process_open_fds_;
  metrics::MetricFamily& process_max_fds_;
};

}  // namespace npuprof::broker
