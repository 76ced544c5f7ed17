// Runs that start other runs (statemachine/child_runs.h): whether a run has
// children is "the run lists requested children" (ChildRunRequested, folded
// for every kind), and what each child is comes from the parent's kind — so
// a parent kind other than sweep has its children submitted (and at recovery
// submitted again), and a run whose data merely holds a "children" key has
// none.
#include <gtest/gtest.h>

#include "statemachine/child_runs.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"

namespace npuprof::sm {
namespace {

// A parent kind that is not a sweep: it asks for one probe child at start.
class ParentKind : public RunKind {
 public:
  std::string_view name() const override { return "test-parent"; }
  const TransitionTable& transitions() const override {
    static const TransitionTable t({{"queued", "waiting"}, {"waiting", "completed"}, {"queued", "cancelled"},
                                    {"waiting", "cancelled"}},
                                   {"completed", "cancelled"});
    return t;
  }
  Status ValidateSpec(json&) const override { return Status::Ok(); }
  void OnStart(Decision& d) const override {
    d.Transition("waiting");
    d.Emit(ev::kChildRunRequested, json{{"run_id", d.state().run_id + "-c0"}, {"index", 0}});
    d.WatchRun(d.state().run_id + "-c0");
  }
  std::optional<ChildRequest> ChildRequestFor(const RunState& parent, const std::string& id) const override {
    if (id != parent.run_id + "-c0") return std::nullopt;
    return ChildRequest{id, "probe", json{{"machine", parent.spec.value("machine", "")}}};
  }
  void OnTaskSucceeded(Decision&, const TaskInfo&, const TaskResult&) const override {}
  void OnTaskFailed(Decision&, const TaskInfo&, const TaskFailure&) const override {}
};

// Asks for a child but cannot say what it is (a kind with a bug).
class MuteParentKind : public ParentKind {
 public:
  std::string_view name() const override { return "test-mute-parent"; }
  std::optional<ChildRequest> ChildRequestFor(const RunState&, const std::string&) const override {
    return std::nullopt;
  }
};

// Keeps a "children" key in its data of its own, and asks for no child.
class ListKeepingKind : public RunKind {
 public:
  std::string_view name() const override { return "test-lists"; }
  const TransitionTable& transitions() const override {
    static const TransitionTable t({{"queued", "completed"}}, {"completed"});
    return t;
  }
  Status ValidateSpec(json&) const override { return Status::Ok(); }
  void OnStart(Decision& d) const override { d.Emit("ListKept", json{{"children", {"x", "y"}}}); }
  void ApplyKindEvent(RunState& s, const std::string& type, const json& p) const override {
    if (type == "ListKept") s.data["children"] = p["children"];
  }
  void OnTaskSucceeded(Decision&, const TaskInfo&, const TaskResult&) const override {}
  void OnTaskFailed(Decision&, const TaskInfo&, const TaskFailure&) const override {}
};

const KindRegistry& Kinds() {
  static const KindRegistry* r = [] {
    auto* k = new KindRegistry();
    k->Register(std::make_unique<ParentKind>());
    k->Register(std::make_unique<MuteParentKind>());
    k->Register(std::make_unique<ListKeepingKind>());
    return k;
  }();
  return *r;
}

RunState Started(const std::string& kind) {
  RunState s;
  s.run_id = "p1";
  Input in;
  in.type = Input::Type::kSubmit;
  in.kind = kind;
  in.spec = json{{"machine", "m1"}};
  in.now_ms = 1000;
  auto events = Decide(Kinds(), s, in);
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  if (events.ok())
    for (const auto& e : *events) Apply(Kinds(), s, e.type, e.payload, s.last_seq + 1, 1000);
  return s;
}

TEST(ChildRuns, AParentOfAnyKindHasItsRequestedChildrenSubmitted) {
  const RunState s = Started("test-parent");
  EXPECT_TRUE(HasChildRuns(s));
  EXPECT_EQ(s.requested_children, std::vector<std::string>{"p1-c0"});
  auto child = RequestedChild(Kinds(), s, "p1-c0");
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(child->kind, "probe");
  EXPECT_EQ(child->spec["machine"], "m1");
  const auto all = RequestedChildren(Kinds(), s);
  ASSERT_EQ(all.size(), 1u) << "what recovery submits again";
  EXPECT_EQ(all[0].run_id, "p1-c0");
  EXPECT_EQ(RequestedChild(Kinds(), s, "p1-c9").status().code(), Code::kNotFound);
}

TEST(ChildRuns, AListedChildItsKindCannotDescribeIsNamedNotDropped) {
  const RunState s = Started("test-mute-parent");
  EXPECT_TRUE(HasChildRuns(s));
  std::vector<std::string> errors;
  EXPECT_TRUE(RequestedChildren(Kinds(), s, &errors).empty());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("run p1 asked for child p1-c0, but its kind 'test-mute-parent' does not say"),
            std::string::npos)
      << errors[0];
}

TEST(ChildRuns, ADataKeyNamedChildrenIsNoRequest) {
  const RunState s = Started("test-lists");
  ASSERT_EQ(s.data["children"], json({"x", "y"}));
  EXPECT_FALSE(HasChildRuns(s)) << "only ChildRunRequested makes a run a parent";
  EXPECT_TRUE(RequestedChildren(Kinds(), s).empty());
}

}  // namespace
}  // namespace npuprof::sm
