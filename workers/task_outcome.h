// What a task handler hands back to the worker runtime, and what it is given.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "npuprof.pb.h"

namespace npuprof::ssh {
class SshPool;
}

namespace npuprof::workers {

using json = nlohmann::json;

struct TaskOutcome {
  bool ok = false;
  bool retryable = false;
  std::string error;       // human-readable, names the cause and the fix
  std::string error_kind;  // machine-readable ("unreachable", "npu_smi_missing", ...)
  json result = json::object();
  // Evidence: (name, bytes). The broker stores each content-addressed and
  // records name -> sha256 in the task's event.
  std::vector<std::pair<std::string, std::string>> blobs;

  static TaskOutcome Success(json result) {
    TaskOutcome o;
    o.ok = true;
    o.result = std::move(result);
    return o;
  }
  static TaskOutcome Failure(std::string kind, std::string error, bool retryable) {
    TaskOutcome o;
    o.error_kind = std::move(kind);
    o.error = std::move(error);
    o.retryable = retryable;
    return o;
  }
};

struct TaskContext {
  ssh::SshPool& pool;
  std::function<void(const std::string&)> progress;  // extends the lease
  const std::atomic<bool>& cancelled;                 // broker asked to stop this attempt
};

using TaskHandler = std::function<TaskOutcome(const proto::Task&, TaskContext&)>;

}  // namespace npuprof::workers
