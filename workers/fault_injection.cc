#include "workers/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

namespace npuprof::workers {

TaskHandler WithWorkerAbortFault(const std::string& kind, TaskHandler handler) {
  const char* env = std::getenv("NPUPROF_FAULT_WORKER_ABORT_IN_TASK");
  if (!env || !*env) return handler;
  const std::string spec = env;
  const auto colon = spec.find(':');
  if (spec.substr(0, colon) != kind) return handler;
  int delay_ms = 500;
  if (colon != std::string::npos) delay_ms = std::atoi(spec.c_str() + colon + 1);
  return [handler = std::move(handler), kind, delay_ms](const proto::Task& task, TaskContext& ctx) {
    if (task.attempt() == 1) {
      spdlog::critical("fault injection: worker aborts {} ms into {} ({})", delay_ms, task.task_id(), kind);
      std::thread([delay_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        std::raise(SIGKILL);
      }).detach();
    }
    return handler(task, ctx);
  };
}

}  // namespace npuprof::workers
