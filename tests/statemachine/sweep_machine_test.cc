// The sweep kind (statemachine/sweep_machine.h), driven input by input with a
// stand-in child kind: validation of every point before anything is
// submitted, derived child ids, the verdict from the children, cancel.
#include <gtest/gtest.h>

#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/child_runs.h"
#include "statemachine/sweep_machine.h"

namespace npuprof::sm::testing {
namespace {

// A child kind with the name and two checks of memory-profile.
class FakeMemoryKind : public RunKind {
 public:
  std::string_view name() const override { return "memory-profile"; }
  const TransitionTable& transitions() const override {
    static const TransitionTable t({{"queued", "completed"}, {"queued", "cancelled"}}, {"completed", "cancelled"});
    return t;
  }
  Status ValidateSpec(json& spec) const override {
    if (!spec.contains("machine_record")) return Status::Invalid("machine_record missing");
    const double g = spec.value("gpu_memory_utilization", 0.85);
    if (!(g > 0 && g <= 1)) return Status::Invalid("gpu_memory_utilization must be in (0, 1]");
    spec["gpu_memory_utilization"] = g;
    return Status::Ok();
  }
  void OnStart(Decision&) const override {}
  void OnTaskSucceeded(Decision&, const TaskInfo&, const TaskResult&) const override {}
  void OnTaskFailed(Decision&, const TaskInfo&, const TaskFailure&) const override {}
};

const KindRegistry& Kinds() {
  static const KindRegistry* r = [] {
    auto* k = new KindRegistry();
    k->Register(std::make_unique<FakeMemoryKind>());
    RegisterSweepKind(*k);
    return k;
  }();
  return *r;
}

json Spec(const std::vector<std::string>& gmus) {
  json points = json::array();
  for (const auto& g : gmus)
    points.push_back({{"point", {{"gpu-memory-utilization", g}}}, {"spec", {{"gpu_memory_utilization", std::stod(g)}}}});
  return {{"machine", "sim1"},
          {"machine_record", {{"name", "sim1"}, {"host", "127.0.0.1"}, {"user", "u"}, {"port", 22}}},
          {"child_kind", "memory-profile"},
          {"grid", {{{"key", "gpu-memory-utilization"}, {"values", gmus}}}},
          {"points", points}};
}

struct SweepRun {
  RunState s;
  uint64_t seq = 0;
  std::vector<std::string> types;
  Status Feed(const Input& in) {
    auto r = Decide(Kinds(), s, in);
    if (!r.ok()) return r.status();
    types.clear();
    for (const auto& e : *r) {
      types.push_back(e.type);
      Apply(Kinds(), s, e.type, e.payload, ++seq, in.now_ms);
    }
    return Status::Ok();
  }
  Status Submit(json spec, const std::string& id = "sw1") {
    s.run_id = id;
    Input in;
    in.type = Input::Type::kSubmit;
    in.now_ms = 1000;
    in.kind = "sweep";
    in.spec = std::move(spec);
    return Feed(in);
  }
  Status ChildEnded(const std::string& child, const std::string& status) {
    Input in;
    in.type = Input::Type::kSignal;
    in.now_ms = 2000;
    in.signal = ev::kSignalWatchedRunFinished;
    in.result = {{"run_id", child}, {"status", status}, {"state", status == "ok" ? "completed" : status},
                 {"summary", {{"error", status == "ok" ? json(nullptr) : json("it broke")}}}};
    return Feed(in);
  }
  json Summary() const { return Kinds().Find("sweep")->Summary(s); }
};

TEST(Sweep, ValidatesEveryPointBeforeAnythingIsSubmitted) {
  SweepRun r;
  Status st = r.Submit(Spec({"0.8", "1.5"}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("grid point 1 (gpu-memory-utilization=1.5)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("gpu_memory_utilization must be in (0, 1]"), std::string::npos);
  EXPECT_TRUE(r.types.empty());

  json dup = Spec({"0.9", "0.90"});
  st = r.Submit(dup);
  EXPECT_NE(st.message().find("give the same memory-profile run"), std::string::npos) << st.message();
  json short_points = Spec({"0.8", "0.9"});
  short_points["points"].erase(1);
  EXPECT_NE(r.Submit(short_points).message().find("the grid has 2 points, the spec lists 1"), std::string::npos);
  json port = Spec({"0.8"});
  port["points"][0]["spec"]["port"] = 8000;
  EXPECT_NE(r.Submit(port).message().find("drop --port"), std::string::npos);
  // A point's spec is judged as the child's submission will be: refused now,
  // naming the point and the key, not child by child later.
  json typo = Spec({"0.8"});
  typo["points"][0]["spec"]["gpu_memory_utilisation"] = 0.8;
  const std::string why = r.Submit(typo).message();
  EXPECT_NE(why.find("grid point 0"), std::string::npos) << why;
  EXPECT_NE(why.find("gpu_memory_utilisation"), std::string::npos) << why;
  EXPECT_TRUE(r.types.empty()) << "nothing was submitted";
  json kind = Spec({"0.8"});
  kind["child_kind"] = "serve";
  EXPECT_NE(r.Submit(kind).message().find("memory-profile or torch-profile"), std::string::npos);
}

// Grid keys go through the managed-flag rule (statemachine/managed_flags.h):
// a vLLM spelling of a flag the child kind sets from an option is refused
// naming the option, and a key that is such an option must be what each
// point's spec gives (a hand-made spec cannot label 0.8 as 0.9).
TEST(Sweep, GridKeysFollowTheManagedFlagRule) {
  SweepRun r;
  json vllm_key = Spec({"1", "2"});
  vllm_key["grid"][0]["key"] = "tensor-parallel-size";
  for (auto& p : vllm_key["points"]) p["point"] = {{"tensor-parallel-size", p["point"]["gpu-memory-utilization"]}};
  const std::string why = r.Submit(vllm_key).message();
  EXPECT_NE(why.find("--grid tensor-parallel-size: vLLM's --tensor-parallel-size is set by npuprof from --tp"),
            std::string::npos)
      << why;
  json mislabelled = Spec({"0.8", "0.9"});
  mislabelled["points"][1]["spec"]["gpu_memory_utilization"] = 0.7;
  const std::string wrong = r.Submit(mislabelled).message();
  EXPECT_NE(wrong.find("grid point 1 (gpu-memory-utilization=0.9): the point says gpu-memory-utilization=0.9 but "
                       "its spec gives gpu_memory_utilization = 0.7"),
            std::string::npos)
      << wrong;
  EXPECT_TRUE(r.types.empty()) << "nothing was submitted";
  const Status written_so = r.Submit(Spec({"0.8", "0.90"}));
  EXPECT_TRUE(written_so.ok()) << "0.90 labels 0.9: " << written_so.message();
}

TEST(Sweep, SubmitsOneChildPerPointUnderDerivedIds) {
  SweepRun r;
  ASSERT_TRUE(r.Submit(Spec({"0.8", "0.9"})).ok());
  EXPECT_EQ(r.s.state, "running");
  EXPECT_EQ(r.types, (std::vector<std::string>{"RunSubmitted", "StateChanged", "ChildRunRequested", "WatchRequested",
                                               "ChildRunRequested", "WatchRequested"}));
  EXPECT_EQ(r.s.watching, (std::vector<std::string>{"sw1-p0", "sw1-p1"}));
  auto c = RequestedChild(Kinds(), r.s, "sw1-p1");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->kind, "memory-profile");
  EXPECT_EQ(c->spec["gpu_memory_utilization"], 0.9);
  EXPECT_EQ(c->spec["machine"], "sim1");
  EXPECT_EQ(c->spec["sweep_run"], "sw1");
  EXPECT_FALSE(c->spec.contains("machine_record"));  // the broker fills it from its inventory
  EXPECT_EQ(RequestedChild(Kinds(), r.s, "sw1-p2").status().code(), Code::kNotFound);
  EXPECT_EQ(RequestedChildren(Kinds(), r.s).size(), 2u);
  const json sum = r.Summary();
  EXPECT_EQ(sum["children"][0]["point"]["gpu-memory-utilization"], "0.8");
  EXPECT_EQ(sum["sweep_status"], "running");
}

TEST(Sweep, OkOnlyWhenEveryChildIsOkElsePartial) {
  SweepRun ok;
  ASSERT_TRUE(ok.Submit(Spec({"0.8", "0.9"})).ok());
  ASSERT_TRUE(ok.ChildEnded("sw1-p1", "ok").ok());
  EXPECT_FALSE(ok.s.terminal);
  ASSERT_TRUE(ok.ChildEnded("not-mine", "ok").ok());  // ignored
  EXPECT_FALSE(ok.s.terminal);
  ASSERT_TRUE(ok.ChildEnded("sw1-p0", "ok").ok());
  EXPECT_TRUE(ok.s.terminal);
  EXPECT_EQ(ok.s.status, RunStatus::kOk);
  EXPECT_EQ(ok.Summary()["points_ok"], 2);

  SweepRun partial;
  ASSERT_TRUE(partial.Submit(Spec({"0.8", "0.9"})).ok());
  ASSERT_TRUE(partial.ChildEnded("sw1-p0", "ok").ok());
  ASSERT_TRUE(partial.ChildEnded("sw1-p1", "failed").ok());
  EXPECT_EQ(partial.s.status, RunStatus::kFailed);
  EXPECT_NE(partial.s.error.find("partial: 1 of 2 points ok"), std::string::npos) << partial.s.error;
  const json sum = partial.Summary();
  EXPECT_EQ(sum["sweep_status"], "partial");
  EXPECT_EQ(sum["children"][1]["status"], "failed");
  EXPECT_EQ(sum["children"][1]["error"], "it broke");
}

TEST(Sweep, CancelReachesEveryUnfinishedChildThenEnds) {
  SweepRun r;
  ASSERT_TRUE(r.Submit(Spec({"0.7", "0.8", "0.9"})).ok());
  ASSERT_TRUE(r.ChildEnded("sw1-p0", "ok").ok());
  Input cancel;
  cancel.type = Input::Type::kCancel;
  cancel.now_ms = 3000;
  ASSERT_TRUE(r.Feed(cancel).ok());
  EXPECT_EQ(r.types, (std::vector<std::string>{"CancelRequested", "ChildCancelRequested", "ChildCancelRequested",
                                               "StateChanged"}));
  EXPECT_EQ(r.s.state, "cancelling");
  EXPECT_EQ(UnfinishedChildren(r.s), (std::vector<std::string>{"sw1-p1", "sw1-p2"}));
  ASSERT_TRUE(r.ChildEnded("sw1-p1", "cancelled").ok());
  EXPECT_FALSE(r.s.terminal);
  ASSERT_TRUE(r.ChildEnded("sw1-p2", "cancelled").ok());
  EXPECT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kCancelled);
  EXPECT_EQ(r.Summary()["sweep_status"], "cancelled");
}

TEST(Sweep, ARunIdTooLongForItsChildrenFailsAtOnce) {
  SweepRun r;
  ASSERT_TRUE(r.Submit(Spec({"0.8"}), std::string(59, 's')).ok());
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("at most 58"), std::string::npos) << r.s.error;
  EXPECT_TRUE(r.s.watching.empty());
}

}  // namespace
}  // namespace npuprof::sm::testing
