// Device leases in the pure engine: request, grant, release, refusal, and the
// audits (per-run legality in the replay verifier, double lease across runs).
#include <gtest/gtest.h>

#include "run_specs.pb.h"
#include "statemachine/device_lease.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/service_spec.h"
#include "statemachine/typed_spec.h"
#include "tests/statemachine/lease_run.h"

namespace npuprof::sm {
namespace {

using lease_test::LeaseRun;
using lease_test::ServeSpec;
using lease_test::StableHash;

TEST(DeviceLease, ExplicitDevicesWaitQueuedWithNoTaskUntilGranted) {
  LeaseRun r;
  r.Submit(ServeSpec({2, 3}));
  EXPECT_EQ(r.s.state, "queued");
  EXPECT_TRUE(r.s.tasks.empty());
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
  ASSERT_EQ(r.s.lease.legs.size(), 1u);
  EXPECT_EQ(r.s.lease.legs[0].devices, (DeviceIds{2, 3}));
  EXPECT_EQ(r.Types(), (std::vector<std::string>{ev::kRunSubmitted, kDevicesRequested}));

  ASSERT_TRUE(r.Grant({2, 3}).ok());
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kHeld);
  EXPECT_EQ(r.s.state, "launching");  // the kind's OnStart ran after the grant
  ASSERT_EQ(r.s.tasks.size(), 1u);
  EXPECT_EQ(r.s.tasks.begin()->second.payload["devices"], json({2, 3}));
}

TEST(DeviceLease, GrantOfOtherDevicesOrTwiceIsRefused) {
  LeaseRun r;
  r.Submit(ServeSpec({2, 3}));
  EXPECT_FALSE(r.Grant({0, 1}).ok());
  EXPECT_FALSE(r.Grant({2}).ok());
  ASSERT_TRUE(r.Grant({2, 3}).ok());
  EXPECT_FALSE(r.Grant({2, 3}).ok()) << "a held lease cannot be granted again";
}

TEST(DeviceLease, AnyFreeDevicesProbeFirstThenRequestWithTheProbeView) {
  LeaseRun r;
  r.Submit(ServeSpec(nullptr));
  EXPECT_EQ(r.s.state, "queued");
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kProbing);
  ASSERT_EQ(r.s.tasks.size(), 1u);
  const TaskInfo probe = r.s.tasks.begin()->second;
  EXPECT_EQ(probe.kind, "probe.npu_smi");
  EXPECT_TRUE(IsLeaseProbe(probe));
  Input res;
  res.type = Input::Type::kTaskResult;
  res.task_id = probe.task_id;
  res.attempt = 1;
  res.ok = true;
  res.result = {{"free_devices", {4, 5, 6}}, {"busy_devices", {{{"logical_id", 0}, {"reason", "process"}}}}};
  ASSERT_TRUE(r.Feed(res).ok());
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
  EXPECT_EQ(r.s.lease.count(), 2);
  EXPECT_EQ(r.s.lease.legs[0].free, (DeviceIds{4, 5, 6}));
  EXPECT_EQ(r.s.lease.legs[0].busy, (DeviceIds{0}));
  ASSERT_TRUE(r.Grant({5, 6}).ok());
  EXPECT_EQ(r.s.spec["devices"], json({5, 6})) << "the leased devices become the run's devices";
  const auto& typed = SpecOf<run_specs::ServeSpec>(r.s).devices();
  ASSERT_EQ(typed.list_value().values_size(), 2) << "and its spec message's, decoded again";
  EXPECT_EQ(typed.list_value().values(1).number_value(), 6);
}

TEST(DeviceLease, ProbeFailureFailsTheRunWithTheReason) {
  LeaseRun r;
  r.Submit(ServeSpec(nullptr));
  const TaskInfo probe = r.s.tasks.begin()->second;
  Input res;
  res.type = Input::Type::kTaskResult;
  res.task_id = probe.task_id;
  res.attempt = 1;
  res.ok = false;
  res.retryable = false;
  res.error_kind = "npu_smi_missing";
  res.error = "npu-smi: command not found";
  ASSERT_TRUE(r.Feed(res).ok());
  EXPECT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("npu_smi_missing"), std::string::npos) << r.s.error;
}

TEST(DeviceLease, FinishReleasesBeforeRunFinished) {
  LeaseRun r;
  r.Submit(ServeSpec({0, 1}));
  ASSERT_TRUE(r.Grant({0, 1}).ok());
  Input cancel;
  cancel.type = Input::Type::kCancel;
  ASSERT_TRUE(r.Feed(cancel).ok());
  // Cancelling a launching serve run first stops; finish the run by failing the launch for good.
  const auto types = r.Types();
  auto rel = std::find(types.begin(), types.end(), std::string(kDevicesReleased));
  auto fin = std::find(types.begin(), types.end(), std::string(ev::kRunFinished));
  if (fin != types.end()) {
    ASSERT_NE(rel, types.end());
    EXPECT_LT(rel - types.begin(), fin - types.begin());
  }
  for (const auto& [id, t] : std::map<std::string, TaskInfo>(r.s.tasks)) {
    if (!t.in_flight()) continue;
    Input res;
    res.type = Input::Type::kTaskResult;
    res.task_id = id;
    res.attempt = t.attempt;
    res.ok = false;
    res.error_kind = "boom";
    ASSERT_TRUE(r.Feed(res).ok());
  }
  for (int i = 0; i < 4 && !r.s.terminal; ++i)
    for (const auto& [id, t] : std::map<std::string, TaskInfo>(r.s.tasks)) {
      if (!t.in_flight()) continue;
      Input res;
      res.type = Input::Type::kTaskResult;
      res.task_id = id;
      res.attempt = t.attempt;
      res.ok = true;
      res.result = {{"stopped", true}, {"already_gone", true}};
      (void)r.Feed(res);
    }
  ASSERT_TRUE(r.s.terminal) << r.s.state;
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kReleased);
  const auto t2 = r.Types();
  const auto rel2 = std::find(t2.begin(), t2.end(), std::string(kDevicesReleased));
  ASSERT_NE(rel2, t2.end());
  EXPECT_EQ(t2.back(), ev::kRunFinished);
  auto v = VerifyRunEvents(DefaultKinds(), r.log, StableHash);
  EXPECT_TRUE(v.ok) << v.first_divergence;
}

TEST(DeviceLease, CancelWhileWaitingEndsWithoutALease) {
  LeaseRun r;
  r.Submit(ServeSpec({0, 1}));
  Input cancel;
  cancel.type = Input::Type::kCancel;
  ASSERT_TRUE(r.Feed(cancel).ok());
  EXPECT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kCancelled);
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
  EXPECT_FALSE(r.Grant({0, 1}).ok()) << "no grant after the run ended";
}

// Every kind that leases devices can be cancelled (or stopped) while it
// waits or probes: it ends at once, without a lease, and the probe is abandoned.
TEST(DeviceLease, EveryLeasingKindCancelsCleanlyWhileQueued) {
  const json rec = {{"name", "m1"}, {"host", "h"}, {"user", "u"}, {"runtime_base", "/rt/"}};
  const std::vector<std::pair<std::string, json>> specs = {
      {"serve", ServeSpec(nullptr)},
      {"serve", ServeSpec({0, 1})},
      {"torch-profile", {{"machine", "m1"}, {"machine_record", rec}, {"model", "/models/q"}, {"served_model_name", "q"},
                         {"tp", 2}, {"tag", "t"}, {"mode", "enforce_eager"}, {"request_kind", "text"},
                         {"benchmark_output_tokens", 8}}},
      {"torch-profile", {{"machine", "m1"}, {"machine_record", rec}, {"model", "/models/q"}, {"served_model_name", "q"},
                         {"tp", 2}, {"tag", "t"}, {"mode", "enforce_eager"}, {"request_kind", "text"},
                         {"benchmark_output_tokens", 8}, {"devices", {4, 5}}}},
      {"memory-profile", {{"machine", "m1"}, {"machine_record", rec}, {"model", "/models/q"}, {"tp", 2}}},
  };
  for (const auto& [kind, spec] : specs) {
    SCOPED_TRACE(kind + " " + spec.value("devices", json()).dump());
    LeaseRun r;
    r.Submit(spec, kind);
    ASSERT_EQ(r.s.state, "queued");
    ASSERT_TRUE(r.s.lease.phase == LeasePhase::kWaiting || r.s.lease.phase == LeasePhase::kProbing) << r.s.lease.phase;
    Input cancel;
    cancel.type = Input::Type::kCancel;
    ASSERT_TRUE(r.Feed(cancel).ok());
    EXPECT_TRUE(r.s.terminal);
    EXPECT_EQ(r.s.status, RunStatus::kCancelled);
    for (const auto& [id, t] : r.s.tasks) EXPECT_FALSE(t.in_flight()) << id << " still in flight";
    auto v = VerifyRunEvents(DefaultKinds(), r.log, StableHash);
    EXPECT_TRUE(v.ok) << v.first_divergence;
  }
}

TEST(DeviceLease, RefusalFailsTheRun) {
  LeaseRun r;
  r.Submit(ServeSpec({0, 1}));
  Input no;
  no.type = Input::Type::kLeaseRefused;
  no.error = "needs 2 free NPUs";
  ASSERT_TRUE(r.Feed(no).ok());
  EXPECT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_EQ(r.s.error, "devices_unavailable: needs 2 free NPUs");
}

TEST(DeviceLease, KindsWithoutDevicesStartAtOnce) {
  LeaseRun r;
  r.Submit({{"machine", "m1"}, {"machine_record", {{"name", "m1"}, {"host", "h"}, {"user", "u"}}}}, "probe");
  EXPECT_EQ(r.s.state, "probing");
  EXPECT_TRUE(r.s.lease.phase == LeasePhase::kNone);
}

TEST(DeviceLease, VerifierRejectsAGrantThatWasNeverRequested) {
  LeaseRun r;
  r.Submit(ServeSpec({0, 1}));
  ASSERT_TRUE(r.Grant({0, 1}).ok());
  auto ok = VerifyRunEvents(DefaultKinds(), r.log, StableHash);
  ASSERT_TRUE(ok.ok) << ok.first_divergence;
  // Drop DevicesRequested and renumber: the grant now comes from nowhere.
  std::vector<proto::Event> forged;
  for (const auto& e : r.log)
    if (e.type() != kDevicesRequested) forged.push_back(e);
  for (size_t i = 0; i < forged.size(); ++i) {
    forged[i].set_seq(i + 1);
    forged[i].set_hash(std::to_string(i + 1));
    forged[i].set_prev_hash(i == 0 ? "" : forged[i - 1].hash());
  }
  auto bad = VerifyRunEvents(DefaultKinds(), forged, StableHash);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.first_divergence.find("DevicesLeased"), std::string::npos) << bad.first_divergence;
}

proto::Event LeaseEvent(const std::string& type, const std::string& run, json devices, uint64_t pos) {
  proto::Event e;
  e.set_run_id(run);
  e.set_type(type);
  e.set_global_pos(pos);
  e.set_payload_json(json{{"machine", "m1"}, {"devices", std::move(devices)}}.dump());
  return e;
}

TEST(DeviceLease, DoubleLeaseAuditFindsOverlapAndAcceptsHandOver) {
  std::vector<proto::Event> ok = {LeaseEvent(kDevicesLeased, "a", {0, 1}, 1),
                                  LeaseEvent(kDevicesLeased, "b", {2, 3}, 2),
                                  LeaseEvent(kDevicesReleased, "a", {0, 1}, 3),
                                  LeaseEvent(kDevicesLeased, "c", {1}, 4)};
  EXPECT_EQ(FindDoubleLease(ok), "");
  std::vector<proto::Event> bad = {LeaseEvent(kDevicesLeased, "a", {0, 1}, 1),
                                   LeaseEvent(kDevicesLeased, "b", {1, 2}, 2)};
  const std::string err = FindDoubleLease(bad);
  EXPECT_NE(err.find("run b leased device 1 on m1 while run a held it"), std::string::npos) << err;
}

// One device-id type from the CLI to the audit (device_ids.h): an id the
// audit cannot read as one is never keyed as another device. Before, the
// audit keyed on the id's JSON text, so "1" (which protobuf's parser lets
// through an int64 field) or 1.0 next to 1 hid a double lease.
TEST(DeviceLease, DoubleLeaseAuditReadsIdsWithTheOneParser) {
  for (const json& spelled : {json("1"), json(1.0), json(-1), json(nullptr)}) {
    std::vector<proto::Event> events = {LeaseEvent(kDevicesLeased, "a", {1}, 1),
                                        LeaseEvent(kDevicesLeased, "b", json::array({spelled}), 2)};
    const std::string err = FindDoubleLease(events);
    EXPECT_NE(err.find("global position 2: run b: DevicesLeased.devices"), std::string::npos)
        << spelled.dump() << ": " << err;
    EXPECT_NE(err.find("device indices are integers 0..4095"), std::string::npos) << err;
  }
}

// The fold reads a stored lease's ids with the same parser: an id that is
// not an integer is corruption naming the event, not a device parsed
// leniently (or dropped) later by the scheduler.
TEST(DeviceLease, AStoredLeaseWhoseIdsAreNoIdsIsCorruption) {
  LeaseRun r;
  r.Submit(ServeSpec({0, 1}));
  ASSERT_TRUE(r.Grant({0, 1}).ok());
  for (const json& ids : {json({"0", "1"}), json({0.5, 1}), json({0, 4096})}) {
    RunState s = r.s;
    proto::Event e = LeaseEvent(kDevicesReleased, "r1", ids, 9);
    e.set_seq(s.last_seq + 1);
    const Status st = ApplyStored(DefaultKinds(), s, e);
    EXPECT_EQ(st.code(), Code::kCorruption) << ids.dump();
    EXPECT_NE(st.message().find("DevicesReleased"), std::string::npos) << st.message();
  }
  RunState s = r.s;
  proto::Event requested = LeaseEvent(kDevicesRequested, "r1", json({"2", "3"}), 9);
  requested.set_seq(s.last_seq + 1);
  EXPECT_EQ(ApplyStored(DefaultKinds(), s, requested).code(), Code::kCorruption)
      << "DevicesRequested ids are read the same way";
}

}  // namespace
}  // namespace npuprof::sm
