#include "bench/fanout_kind.h"

#include "statemachine/spec_checks.h"

namespace npuprof::bench {
namespace {

class FanoutKind : public sm::RunKind {
 public:
  std::string_view name() const override { return kFanoutKind; }

  const sm::TransitionTable& transitions() const override {
    static const sm::TransitionTable table({{"queued", "running"},
                                            {"running", "completed"},
                                            {"running", "failed"},
                                            {"queued", "cancelled"},
                                            {"running", "cancelled"}},
                                           {"completed", "failed", "cancelled"});
    return table;
  }

  Status ValidateSpec(sm::json& spec) const override { return sm::CheckIntRange(spec, "tasks", 16, 1, 4096); }

  void OnStart(sm::Decision& d) const override {
    d.Transition("running");
    sm::TaskPolicy policy;
    policy.max_attempts = 1;
    policy.lease_ms = 60000;
    const int n = d.state().spec.value("tasks", 16);
    for (int i = 0; i < n; ++i) d.ScheduleTask(kFanoutTask, sm::json{{"index", i}}, policy);
  }

  void OnTaskSucceeded(sm::Decision& d, const sm::TaskInfo&, const sm::TaskResult&) const override {
    for (const auto& [id, t] : d.state().tasks)
      if (t.status != sm::TaskStatus::kSucceeded) return;
    d.Finish(sm::RunStatus::kOk);
  }

  void OnTaskFailed(sm::Decision& d, const sm::TaskInfo& task, const sm::TaskFailure&) const override {
    d.Finish(sm::RunStatus::kFailed, "task " + task.task_id + " failed");
  }
};

}  // namespace

std::unique_ptr<sm::RunKind> MakeFanoutKind() { return std::make_unique<FanoutKind>(); }

}  // namespace npuprof::bench
