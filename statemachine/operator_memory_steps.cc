#include "statemachine/operator_memory_steps.h"

#include <nlohmann/json.hpp>

namespace npuprof::sm {

std::vector<std::string> OperatorMemoryServeArgs(const run_specs::MemoryProfileSpec& spec) {
  if (!spec.operator_memory()) return {};
  const nlohmann::json cfg = {{"profiler", "torch"},
                              {"torch_profiler_dir", std::string("./") + kOperatorMemoryDir},
                              {"torch_profiler_with_stack", false},
                              {"torch_profiler_with_memory", true}};
  return {"--profiler-config", cfg.dump()};
}

tasks::TorchProfileControl OperatorMemoryControl(const std::string& step, std::optional<int64_t> port) {
  tasks::TorchProfileControl p;
  p.set_role(step);
  p.set_action(step == "profile_start" ? "start_profile" : "stop_profile");
  if (port) p.set_port(static_cast<int32_t>(*port));
  p.set_timeout_s(600);  // the stop waits for every rank's trace to be written
  return p;
}

tasks::MemoryOperatorMemory OperatorMemoryTask(const run_specs::MemoryProfileSpec& spec,
                                               const std::string& runtime_dir, const std::string& step) {
  tasks::MemoryOperatorMemory p;
  p.set_step(step);
  p.set_profile_root(runtime_dir + "/" + kOperatorMemoryDir);
  p.set_top_n(static_cast<int32_t>(spec.operator_memory_top() > 0 ? spec.operator_memory_top() : 10));
  p.set_analyse_timeout_s(spec.export_timeout_s() > 0 ? spec.export_timeout_s() : 1800);
  return p;
}

}  // namespace npuprof::sm
