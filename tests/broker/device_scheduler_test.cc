// The broker's device scheduler alone (pure): FIFO per machine, no overtaking
// on conflicting devices, disjoint runs side by side, "any N" requests.
#include <map>

#include <gtest/gtest.h>

#include "broker/device_scheduler.h"

namespace npuprof::broker {
namespace {

using json = nlohmann::json;

sm::LeaseLeg ExplicitLeg(sm::DeviceIds devices, const std::string& machine = "m1") {
  sm::LeaseLeg l;
  l.machine = machine;
  l.devices = devices;
  l.count = static_cast<int>(devices.size());
  return l;
}

sm::LeaseInfo Explicit(sm::DeviceIds devices, const std::string& machine = "m1") {
  sm::LeaseInfo l;
  l.phase = sm::LeasePhase::kWaiting;
  l.legs.push_back(ExplicitLeg(std::move(devices), machine));
  return l;
}

// A multi-node lease: one explicit leg per (machine, devices).
sm::LeaseInfo Gang(std::vector<std::pair<std::string, sm::DeviceIds>> legs) {
  sm::LeaseInfo l;
  l.phase = sm::LeasePhase::kWaiting;
  for (auto& [m, d] : legs) l.legs.push_back(ExplicitLeg(d, m));
  return l;
}

sm::LeaseInfo Any(int count, sm::DeviceIds free, sm::DeviceIds busy = {}) {
  sm::LeaseInfo l;
  l.phase = sm::LeasePhase::kWaiting;
  sm::LeaseLeg leg;
  leg.machine = "m1";
  leg.count = count;
  leg.free = std::move(free);
  leg.busy = std::move(busy);
  l.legs.push_back(std::move(leg));
  return l;
}

// One Schedule call with everything it reports.
struct Scheduled {
  std::vector<DeviceScheduler::Grant> g;
  std::vector<DeviceScheduler::Refusal> r;
  std::vector<DeviceScheduler::Check> c;
};
Scheduled ScheduleAll(DeviceScheduler& s) {
  Scheduled out;
  s.Schedule(&out.g, &out.r, &out.c);
  return out;
}

std::vector<std::string> GrantedRuns(DeviceScheduler& s) {
  std::vector<DeviceScheduler::Grant> g;
  std::vector<DeviceScheduler::Refusal> r;
  s.Schedule(&g, &r);
  std::vector<std::string> out;
  for (const auto& x : g) out.push_back(x.run_id);
  for (const auto& x : r) out.push_back("refused:" + x.run_id);
  return out;
}

TEST(DeviceScheduler, DisjointRequestsStartTogether) {
  DeviceScheduler s;
  s.Wait("a", Explicit({0, 1}), 1);
  s.Wait("b", Explicit({2, 3}), 2);
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.holders(), 2u);
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(DeviceScheduler, ConflictingRequestsWaitInSubmissionOrder) {
  DeviceScheduler s;
  s.Hold("h", "m1", {0, 1});
  s.Wait("b", Explicit({1, 2}), 5);
  s.Wait("c", Explicit({2, 3}), 6);  // free now, but b (earlier) wants device 2
  s.Wait("d", Explicit({4}), 7);     // no conflict with anyone: starts
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"d"}));
  const json w = s.WaitingFor("c");
  EXPECT_EQ(w["queued_ahead"], 1);
  EXPECT_NE(w["reason"].get<std::string>().find("device 2 wanted by an earlier queued run"), std::string::npos)
      << w.dump();
  EXPECT_NE(s.WaitingFor("b")["reason"].get<std::string>().find("device 1 held by run h"), std::string::npos);

  s.Drop("h");
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"b"}));
  s.Drop("b");
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(s.WaitingFor("c").is_null());
}

TEST(DeviceScheduler, OrderIsTheRequestPositionNotTheCallOrder) {
  DeviceScheduler s;
  s.Hold("h", "m1", {0});
  s.Wait("late", Explicit({0}), 20);
  s.Wait("early", Explicit({0}), 10);  // recovered later but requested first
  s.Drop("h");
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"early"}));
}

TEST(DeviceScheduler, MachinesAreIndependent) {
  DeviceScheduler s;
  s.Hold("h", "m1", {0});
  s.Wait("x", Explicit({0}, "m2"), 1);
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"x"}));
}

TEST(DeviceScheduler, AnyRequestTakesFreeOnesAndWaitsForOursButRefusesForeignBusy) {
  DeviceScheduler s;
  s.Hold("h", "m1", {0, 1});
  // The probe saw 0,1 busy (ours) and 2,3 free; 7 busy with someone else's process.
  s.Wait("a", Any(2, {2, 3}, {0, 1, 7}), 1);
  s.Wait("b", Any(2, {2, 3}, {0, 1, 7}), 2);
  s.Wait("c", Any(6, {2, 3}, {0, 1, 7}), 3);
  std::vector<DeviceScheduler::Grant> g;
  std::vector<DeviceScheduler::Refusal> r;
  s.Schedule(&g, &r);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].run_id, "a");
  EXPECT_EQ(g[0].legs.at(0).devices, (sm::DeviceIds{2, 3}));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].run_id, "c");
  EXPECT_NE(r[0].error.find("needs 6 free NPU(s)"), std::string::npos) << r[0].error;
  s.Drop("h");
  g.clear();
  r.clear();
  s.Schedule(&g, &r);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].run_id, "b");
  EXPECT_EQ(g[0].legs.at(0).devices, (sm::DeviceIds{0, 1}));
}

TEST(DeviceScheduler, SyncRebuildsFromRunState) {
  DeviceScheduler s;
  sm::RunState held;
  held.run_id = "h";
  held.lease = Explicit({0});
  held.lease.phase = sm::LeasePhase::kHeld;
  held.lease.legs[0].granted = {0};
  s.Sync(held);
  sm::RunState waiting;
  waiting.run_id = "w";
  waiting.lease = Explicit({0});
  waiting.lease.request_pos = 9;
  s.Sync(waiting);
  EXPECT_TRUE(GrantedRuns(s).empty());
  held.terminal = true;
  s.Sync(held);
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"w"}));
}

TEST(DeviceScheduler, QuarantinedDevicesAreGrantedToNobodyUntilCleared) {
  DeviceScheduler s;
  s.Quarantine("m1", {0, 1}, "old", "its service.stop failed: unreachable: no route", 5000);
  s.Wait("a", Explicit({0, 1}), 1);
  s.Wait("b", Explicit({2}), 2);  // disjoint: not held back
  auto [g, r, c] = ScheduleAll(s);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].run_id, "b");
  EXPECT_TRUE(r.empty());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].run_id, "a");
  EXPECT_EQ(c[0].devices, (sm::DeviceIds{0, 1}));
  const json why = s.WaitingFor("a");
  EXPECT_NE(why.value("reason", "").find("quarantined: run old's service may still be running"), std::string::npos)
      << why.dump();
  const json q = s.Quarantined();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].value("run_id", ""), "old");
  EXPECT_EQ(q[0].value("since_ms", 0), 5000);
  EXPECT_EQ(s.QuarantinedAmong("m1", {1, 2}), (sm::DeviceIds{1}));
  EXPECT_TRUE(s.QuarantinedAmong("m2", {1}).empty());
  s.Clear("m1", {0});
  EXPECT_TRUE(GrantedRuns(s).empty()) << "device 1 is still quarantined";
  s.Clear("m1", {1});
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(s.Quarantined().empty());
}

TEST(DeviceScheduler, AnyRequestSkipsQuarantinedCandidatesAndAsksForACheckWhenShort) {
  DeviceScheduler s;
  s.Hold("h", "m1", {0, 1});
  s.Drop("h");  // 0,1 known (npuprof's own), now released
  s.Quarantine("m1", {0}, "old", "stop failed", 1);
  // The probe saw 0 busy (the orphaned service), 1..3 free.
  s.Wait("a", Any(3, {1, 2, 3}, {0}), 1);
  s.Wait("b", Any(4, {1, 2, 3}, {0}), 2);
  auto [g, r, c] = ScheduleAll(s);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].run_id, "a");
  EXPECT_EQ(g[0].legs.at(0).devices, (sm::DeviceIds{1, 2, 3})) << "the quarantined device is never picked";
  EXPECT_TRUE(r.empty()) << "b can get 4 once 0 is cleared: it waits";
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].run_id, "b");
  EXPECT_EQ(c[0].devices, (sm::DeviceIds{0}));
  EXPECT_NE(s.WaitingFor("b").value("reason", "").find("quarantined"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::broker

namespace npuprof::broker {
namespace {

// Every grant names every leg of its run; the holders never hold a device twice.
void ExpectWholeGrants(const std::vector<DeviceScheduler::Grant>& grants, const std::map<std::string, size_t>& legs) {
  for (const auto& g : grants) {
    const size_t want = legs.at(g.run_id);
    EXPECT_EQ(g.legs.size(), want) << "a gang is granted whole: run " << g.run_id;
  }
}

TEST(DeviceSchedulerGang, OverlappingGangsAndAOneNodeRunEachRunOnceNeverHalfHeld) {
  DeviceScheduler s;
  const std::map<std::string, size_t> legs = {{"g1", 2}, {"g2", 2}, {"one", 1}};
  s.Hold("busy", "b", {0, 1});  // b is partly taken: g1 cannot start yet
  s.Wait("g1", Gang({{"a", {0, 1}}, {"b", {0, 1}}}), 1);
  s.Wait("g2", Gang({{"b", {2, 3}}, {"c", {0, 1}}}), 2);
  s.Wait("one", Explicit({0, 1}, "a"), 3);  // wants what g1 waits for on a: no overtaking
  auto first = ScheduleAll(s);
  ExpectWholeGrants(first.g, legs);
  ASSERT_EQ(first.g.size(), 1u);
  EXPECT_EQ(first.g[0].run_id, "g2") << "disjoint from every earlier waiter: starts";
  EXPECT_EQ(s.holders(), 2u) << "g1 holds nothing while it waits (no hold-and-wait)";
  json why = s.WaitingFor("g1");
  ASSERT_TRUE(why.contains("nodes"));
  EXPECT_NE(why["reason"].get<std::string>().find("on b: devices 0,1 held by run busy"), std::string::npos)
      << why.dump();
  EXPECT_EQ(why["nodes"][0]["reason"], "fits now");
  EXPECT_NE(s.WaitingFor("one")["reason"].get<std::string>().find("wanted by an earlier queued run"),
            std::string::npos);

  s.Drop("busy");
  auto second = ScheduleAll(s);
  ExpectWholeGrants(second.g, legs);
  ASSERT_EQ(second.g.size(), 1u);
  EXPECT_EQ(second.g[0].run_id, "g1");
  ASSERT_EQ(second.g[0].legs.size(), 2u);
  EXPECT_EQ(second.g[0].legs[1].machine, "b");
  EXPECT_EQ(second.g[0].legs[1].devices, (sm::DeviceIds{0, 1}));

  s.Drop("g1");
  auto third = ScheduleAll(s);
  ExpectWholeGrants(third.g, legs);
  ASSERT_EQ(third.g.size(), 1u);
  EXPECT_EQ(third.g[0].run_id, "one");
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(DeviceSchedulerGang, TwoGangsCrossingTwoMachinesNeverDeadlock) {
  // g1 wants a then b, g2 b then a: with partial holds each would hold one
  // machine and wait for the other forever. Whole grants: one runs, then the other.
  DeviceScheduler s;
  s.Wait("g1", Gang({{"a", {0}}, {"b", {0}}}), 1);
  s.Wait("g2", Gang({{"b", {0}}, {"a", {0}}}), 2);
  auto first = ScheduleAll(s);
  ASSERT_EQ(first.g.size(), 1u);
  EXPECT_EQ(first.g[0].run_id, "g1");
  EXPECT_EQ(s.waiting(), 1u);
  s.Drop("g1");
  auto second = ScheduleAll(s);
  ASSERT_EQ(second.g.size(), 1u);
  EXPECT_EQ(second.g[0].run_id, "g2");
}

TEST(DeviceSchedulerGang, ALegThatCanNeverFitRefusesTheWholeRun) {
  DeviceScheduler s;
  sm::LeaseInfo l = Gang({{"a", {0}}});
  sm::LeaseLeg any;
  any.machine = "b";
  any.count = 4;
  any.free = {0, 1};
  l.legs.push_back(any);
  s.Wait("g", l, 1);
  auto out = ScheduleAll(s);
  EXPECT_TRUE(out.g.empty());
  ASSERT_EQ(out.r.size(), 1u);
  EXPECT_NE(out.r[0].error.find("needs 4 free NPU(s) on b"), std::string::npos) << out.r[0].error;
  EXPECT_EQ(s.holders(), 0u);
}

TEST(DeviceSchedulerGang, SyncRebuildsEveryHeldLeg) {
  DeviceScheduler s;
  sm::RunState held;
  held.run_id = "g";
  held.lease = Gang({{"a", {0}}, {"b", {1}}});
  held.lease.phase = sm::LeasePhase::kHeld;
  held.lease.legs[0].granted = {0};
  held.lease.legs[1].granted = {1};
  s.Sync(held);
  s.Wait("x", Explicit({1}, "b"), 5);
  EXPECT_TRUE(GrantedRuns(s).empty()) << "b:1 is held by the gang";
  held.terminal = true;
  s.Sync(held);
  EXPECT_EQ(GrantedRuns(s), (std::vector<std::string>{"x"}));
}

}  // namespace
}  // namespace npuprof::broker
