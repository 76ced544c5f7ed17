// A long HBM watch (serve --watch-hbm, statemachine/serve_hbm_watch.h) in
// the pure engine: thousands of samples, some retried, some failed for good,
// then a stop. The run's state stays the same size however many samples
// were taken (the ended sample tasks and fired timers are forgotten by the
// fold, statemachine/forget_ended.h), while every sample is still folded and
// every event is in the log; the log replays (the verifier's checks) to the
// same summary; a late duplicate answer of a forgotten task changes nothing.
#include <gtest/gtest.h>

#include <map>

#include "statemachine/engine.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/service_spec.h"
#include "tests/statemachine/lease_run.h"
#include "tests/support/lease_inputs.h"

namespace npuprof::sm {
namespace {

using lease_test::LeaseRun;
using lease_test::StableHash;

struct LongWatch : LeaseRun {
  int64_t answered = 0;  // samples folded

  const TaskInfo* Pending(const std::string& kind) const {
    for (const auto& [id, t] : s.tasks)
      if (t.kind == kind && t.in_flight()) return &t;
    return nullptr;
  }
  void Result(const TaskInfo& t, bool ok, json result, bool retryable = false) {
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t.task_id;
    in.attempt = t.attempt;
    in.ok = ok;
    in.retryable = retryable;
    in.error = ok ? "" : "npu-smi: device busy";
    in.error_kind = ok ? "" : "remote_failed";
    in.result = std::move(result);
    auto r = Feed(in);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Fire(const std::string& purpose) {
    for (const auto& [id, t] : s.timers)
      if (t.armed && t.purpose == purpose) {
        Input in;
        in.type = Input::Type::kTimerFired;
        in.timer_id = id;
        ASSERT_TRUE(Feed(in).ok());
        return;
      }
    FAIL() << "no armed " << purpose << " timer";
  }
  void Ready() {
    json spec = lease_test::ServeSpec(json::array({2, 3}));
    spec["watch_hbm_s"] = 10;
    Submit(spec);
    while (auto lease = testing::NextLeaseInput(s)) ASSERT_TRUE(Feed(*lease).ok());
    ASSERT_NE(Pending(kServiceLaunchTask), nullptr) << s.state;
    Result(*Pending(kServiceLaunchTask), true,
           {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"port", 18000}, {"devices", {2, 3}}});
    Result(*Pending(kServiceWaitReadyTask), true, {{"ready_after_ms", 900}});
    ASSERT_EQ(s.state, "ready");
  }
  // Sample i: every 7th answered after one retryable failure, every 13th
  // failed for good (the next one comes at the next interval).
  void Sample(int64_t i) {
    const TaskInfo* t = Pending(kServiceHbmSampleTask);
    ASSERT_NE(t, nullptr) << "no sample out at cycle " << i;
    if (i % 13 == 0) {
      Result(*t, false, nullptr, false);
    } else {
      if (i % 7 == 0) {
        Result(*t, false, nullptr, true);
        Fire("retry");
        t = Pending(kServiceHbmSampleTask);
        ASSERT_NE(t, nullptr);
      }
      const int64_t no = PayloadNo(*t);
      Result(*t, true,
             {{"sample_no", no},
              {"t_ms", 1'700'000'000'000 + i * 10'000},
              {"clock", "target"},
              {"devices", {{{"device_id", 2}, {"used_mb", 30000 + i % 3}, {"total_mb", 65536}},
                           {{"device_id", 3}, {"used_mb", 31000 + i / 10}, {"total_mb", 65536}}}}});
      ++answered;
    }
    Fire(kHbmSampleTimer);
  }
  static int64_t PayloadNo(const TaskInfo& t) {
    return t.payload.is_object() && t.payload.contains("sample_no") ? t.payload["sample_no"].get<int64_t>() : 0;
  }
  json Watch() const { return DefaultKinds().Find("serve")->Summary(s)["hbm_watch"]; }
};

TEST(ServeHbmWatchLong, StateStaysTheSameSizeOverThousandsOfSamples) {
  LongWatch w;
  w.Ready();
  for (int64_t i = 1; i <= 20; ++i) w.Sample(i);
  const size_t tasks_early = w.s.tasks.size(), timers_early = w.s.timers.size();
  const std::string data_early = w.s.data.dump();
  for (int64_t i = 21; i <= 3000; ++i) {
    w.Sample(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(w.s.tasks.size(), tasks_early) << "ended sample tasks are forgotten";
  EXPECT_EQ(w.s.timers.size(), timers_early) << "fired timers are forgotten";
  EXPECT_LE(w.s.data.dump().size(), data_early.size() * 8) << "bounded data (the last 120 samples)";
  // Every sample is folded nonetheless: the count, the exact sums.
  const json watch = w.Watch();
  EXPECT_EQ(watch["samples"], w.answered);
  EXPECT_EQ(watch["recent"].size(), 120u);
  EXPECT_EQ(watch["devices"][0]["samples"], w.answered);
  EXPECT_EQ(watch["devices"][0]["verdict"], "steady");
  EXPECT_EQ(watch["devices"][1]["verdict"], "growing") << "1 MB per 10 samples of 10 s: 36 MB/h; "
                                                        << watch["devices"][1].dump();
  EXPECT_NEAR(watch["devices"][1]["slope_mb_per_h"].get<double>(), 36.0, 0.5);
  // Every event is still in the log: five per answered sample at least.
  EXPECT_GT(w.log.size(), static_cast<size_t>(5 * w.answered));
}

TEST(ServeHbmWatchLong, TheLogOfALongWatchReplaysToTheSameSummary) {
  LongWatch w;
  w.Ready();
  for (int64_t i = 1; i <= 1500; ++i) {
    w.Sample(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  Input stop;
  stop.type = Input::Type::kSignal;
  stop.signal = "stop";
  stop.result = {{"force", false}};
  ASSERT_TRUE(w.Feed(stop).ok());
  const TaskInfo* st = w.Pending(kServiceStopTask);
  ASSERT_NE(st, nullptr) << w.s.state;
  w.Result(*st, true, {{"stopped", true}});
  ASSERT_TRUE(w.s.terminal) << w.s.state;
  const auto v = VerifyRunEvents(DefaultKinds(), w.log, StableHash);
  ASSERT_TRUE(v.ok) << v.first_divergence;
  EXPECT_EQ(v.events, w.log.size());
  const RunKind* serve = DefaultKinds().Find("serve");
  EXPECT_EQ(serve->Summary(v.state), serve->Summary(w.s));
  EXPECT_EQ(serve->Manifest(v.state), serve->Manifest(w.s));
  EXPECT_EQ(v.state.tasks.size(), w.s.tasks.size());
}

TEST(ServeHbmWatchLong, ALateDuplicateOfAForgottenSampleChangesNothing) {
  LongWatch w;
  w.Ready();
  const TaskInfo first = *w.Pending(kServiceHbmSampleTask);
  w.Sample(1);
  w.Sample(2);  // schedules sample 3: sample 1's task is forgotten
  ASSERT_EQ(w.s.FindTask(first.task_id), nullptr);
  const json before = w.Watch();
  const size_t events = w.log.size();
  w.Result(first, true,
           {{"sample_no", 1}, {"t_ms", 1'700'000'000'000}, {"clock", "target"},
            {"devices", {{{"device_id", 2}, {"used_mb", 99999}, {"total_mb", 65536}}}}});
  ASSERT_EQ(w.log.size(), events + 1);
  EXPECT_EQ(w.log.back().type(), "TaskResultIgnored");
  EXPECT_NE(w.log.back().payload_json().find("unknown task"), std::string::npos) << w.log.back().payload_json();
  EXPECT_EQ(w.Watch(), before);
}

// A decimal interval (0.1..86400 s) arms the next sample's timer that many
// milliseconds after the answer; out of range is refused naming the field.
TEST(ServeHbmWatchLong, ADecimalIntervalArmsItsTimerInMilliseconds) {
  for (const json& bad : {json(0.05), json(-0.5), json(86400.5), json("0.5")}) {
    json spec = lease_test::ServeSpec(nullptr);
    spec["watch_hbm_s"] = bad;
    const Status st = DefaultKinds().Find("serve")->ValidateSpec(spec);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("watch_hbm_s"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("0.1..86400"), std::string::npos) << st.message();
  }
  LongWatch w;
  json spec = lease_test::ServeSpec(json::array({2, 3}));
  spec["watch_hbm_s"] = 0.25;
  w.Submit(spec);
  while (auto lease = testing::NextLeaseInput(w.s)) ASSERT_TRUE(w.Feed(*lease).ok());
  w.Result(*w.Pending(kServiceLaunchTask), true,
           {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"port", 18000}, {"devices", {2, 3}}});
  w.Result(*w.Pending(kServiceWaitReadyTask), true, {{"ready_after_ms", 900}});
  const TaskInfo* t = w.Pending(kServiceHbmSampleTask);
  ASSERT_NE(t, nullptr);
  w.Result(*t, true, {{"sample_no", 1}, {"t_ms", 1'700'000'000'000}, {"clock", "target"},
                      {"devices", {{{"device_id", 2}, {"used_mb", 1}, {"total_mb", 2}}}}});
  int armed = 0;
  for (const auto& [id, tm] : w.s.timers)
    if (tm.armed && tm.purpose == kHbmSampleTimer) {
      ++armed;
      EXPECT_EQ(tm.deadline_ms, w.now + 250);
    }
  EXPECT_EQ(armed, 1);
  EXPECT_EQ(w.Watch()["interval_s"], 0.25);
}

}  // namespace
}  // namespace npuprof::sm
