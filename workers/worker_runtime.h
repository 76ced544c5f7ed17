// WorkerRuntime: a worker process's connection to the broker (Paranoid
// Pirate): announces its task kinds, heartbeats, runs each task at once on a
// reused thread (a pool as large as the most tasks run at once), reports
// progress and results, and reconnects (announcing itself again) when the
// broker goes silent or forgets it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/curve_keys.h"
#include "common/status.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

struct WorkerOptions {
  std::string broker_endpoint;
  std::string worker_id;  // empty = "<host>-<pid>"
  int capacity = 8;
  int heartbeat_ms = 1000;
  int heartbeat_liveness = 3;
  // CURVE keys for a broker that requires them (cli::ResolvePeerKeys); none = plain.
  std::optional<CurveClientKeys> curve;
};

class WorkerRuntime {
 public:
  explicit WorkerRuntime(WorkerOptions opts);
  ~WorkerRuntime();

  void Register(const std::string& kind, TaskHandler handler);
  // Runs until stop becomes true; waits for running tasks to end.
  Status Run(const std::atomic<bool>& stop);
  ssh::SshPool& pool();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npuprof::workers
