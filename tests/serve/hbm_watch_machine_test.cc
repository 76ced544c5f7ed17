// The serve kind's HBM watch (statemachine/serve_hbm_watch.h), pure: the
// first sample when ready, one sample at a time with a timer between, a
// failed sample taken again at the next interval, a stop while a sample is
// out, a re-delivered answer and a replay that fold nothing twice, and show's
// hbm_watch per device.
#include <gtest/gtest.h>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/serve_machine.h"
#include "statemachine/service_spec.h"

namespace npuprof::sm {
namespace {

json Spec(int64_t watch_hbm_s = 1) {
  return json{{"machine", "m1"},
              {"machine_record", {{"name", "m1"}, {"host", "h"}, {"user", "u"}}},
              {"model", "/models/qwen"},
              {"tp", 2},
              {"watch_hbm_s", watch_hbm_s}};
}

// Drives one run through Decide/Apply like the broker does.
struct WatchRun {
  KindRegistry reg;
  RunState s;
  int64_t now = 1'000'000;
  WatchRun() {
    reg.Register(std::make_unique<ServeMachine>());
    s.run_id = "r1";
  }
  Result<std::vector<NewEvent>> Do(Input in) {
    in.now_ms = (now += 10);
    auto r = Decide(reg, s, in);
    if (r.ok())
      for (const auto& e : *r) Apply(reg, s, e.type, e.payload, s.last_seq + 1, now);
    return r;
  }
  void Submit(json spec) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = "serve";
    in.spec = std::move(spec);
    ASSERT_TRUE(Do(in).ok());
    while (auto lease = npuprof::sm::testing::NextLeaseInput(s)) ASSERT_TRUE(Do(*lease).ok());
  }
  std::vector<const TaskInfo*> PendingAll(const std::string& kind) const {
    std::vector<const TaskInfo*> out;
    for (const auto& [id, t] : s.tasks)
      if (t.kind == kind && t.in_flight()) out.push_back(&t);
    return out;
  }
  const TaskInfo* Pending(const std::string& kind) const {
    auto all = PendingAll(kind);
    return all.empty() ? nullptr : all.front();
  }
  Input MakeResult(const TaskInfo& t, bool ok, json result, const std::string& error_kind = "") {
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t.task_id;
    in.attempt = t.attempt;
    in.ok = ok;
    in.error_kind = error_kind;
    in.error = ok ? "" : "boom";
    in.result = std::move(result);
    return in;
  }
  void Answer(const std::string& kind, bool ok, json result, const std::string& error_kind = "") {
    const TaskInfo* t = Pending(kind);
    ASSERT_NE(t, nullptr) << "no pending " << kind << " in state " << s.state;
    auto r = Do(MakeResult(*t, ok, std::move(result), error_kind));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  int ArmedSampleTimers() const {
    int n = 0;
    for (const auto& [id, t] : s.timers) n += t.armed && t.purpose == kHbmSampleTimer;
    return n;
  }
  void FireSampleTimer() {
    for (const auto& [id, t] : s.timers)
      if (t.armed && t.purpose == kHbmSampleTimer) {
        Input in;
        in.type = Input::Type::kTimerFired;
        in.timer_id = id;
        ASSERT_TRUE(Do(in).ok());
        return;
      }
    FAIL() << "no armed hbm_sample timer";
  }
  void Ready() {
    Submit(Spec());
    Answer(kServiceLaunchTask, true,
           {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"port", 18000}, {"devices", {2, 3}}});
    Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
    ASSERT_EQ(s.state, "ready");
  }
  json Summary() const { return reg.Find("serve")->Summary(s); }
};

// A sample result: t seconds, device 2 at used2 MB, device 3 at used3 MB.
json Sample(int64_t no, double t_s, int64_t used2, int64_t used3) {
  return {{"sample_no", no},
          {"t_ms", static_cast<int64_t>(1'700'000'000'000 + t_s * 1000)},
          {"clock", "target"},
          {"devices", {{{"device_id", 2}, {"used_mb", used2}, {"total_mb", 65536}},
                       {{"device_id", 3}, {"used_mb", used3}, {"total_mb", 65536}}}}};
}

TEST(ServeHbmWatch, OffByDefault) {
  WatchRun r;
  r.Submit(Spec(0));
  r.Answer(kServiceLaunchTask, true, {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"devices", {2, 3}}});
  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
  EXPECT_EQ(r.Pending(kServiceHbmSampleTask), nullptr);
  EXPECT_FALSE(r.Summary().contains("hbm_watch"));
}

TEST(ServeHbmWatch, SpecIsChecked) {
  for (const json& bad : {json(-1), json(86401), json("10")}) {
    json spec = Spec();
    spec["watch_hbm_s"] = bad;
    Status st = ServeMachine().ValidateSpec(spec);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("watch_hbm_s"), std::string::npos) << st.message();
  }
  json spec = Spec(60);
  ASSERT_TRUE(ServeMachine().ValidateSpec(spec).ok());
  EXPECT_TRUE(CheckRunSpec("serve", spec).ok());
}

TEST(ServeHbmWatch, SamplesOneAtATimeWithATimerBetween) {
  WatchRun r;
  r.Ready();
  const TaskInfo* t = r.Pending(kServiceHbmSampleTask);
  ASSERT_NE(t, nullptr) << "the first sample is taken when ready";
  EXPECT_EQ(t->payload["devices"], json({2, 3}));
  EXPECT_EQ(t->payload["sample_no"], 1);
  EXPECT_EQ(r.ArmedSampleTimers(), 0);
  // 10 samples of a leak of 10 MB/s on device 2; device 3 steady.
  for (int i = 1; i <= 10; ++i) {
    ASSERT_EQ(r.PendingAll(kServiceHbmSampleTask).size(), 1u) << "one sample out at a time";
    r.Answer(kServiceHbmSampleTask, true, Sample(i, i, 30000 + 10 * i, 28000));
    EXPECT_EQ(r.Pending(kServiceHbmSampleTask), nullptr) << "the next waits for its timer";
    ASSERT_EQ(r.ArmedSampleTimers(), 1);
    r.FireSampleTimer();
  }
  const json w = r.Summary()["hbm_watch"];
  EXPECT_EQ(w["interval_s"], 1);
  EXPECT_EQ(w["samples"], 10);
  EXPECT_EQ(w["verdict"], "growing");
  ASSERT_EQ(w["devices"].size(), 2u);
  EXPECT_EQ(w["devices"][0]["device_id"], 2);
  EXPECT_EQ(w["devices"][0]["verdict"], "growing");
  EXPECT_NEAR(w["devices"][0]["slope_mb_per_h"].get<double>(), 36000, 1e-3);
  EXPECT_EQ(w["devices"][0]["first_growing_sample"], 5);
  EXPECT_EQ(w["devices"][0]["text"], "growing: +36000.0 MB/h");
  EXPECT_EQ(w["devices"][1]["verdict"], "steady");
  EXPECT_TRUE(w["devices"][1]["first_growing_sample"].is_null());
  EXPECT_EQ(w["recent"].size(), 10u);
  EXPECT_EQ(w["recent"][9]["devices"][0]["used_mb"], 30100);
  // The data the fold wrote is what its message declares.
  EXPECT_TRUE(CheckKindData("serve", r.s.data).ok()) << CheckKindData("serve", r.s.data).ToString();
}

TEST(ServeHbmWatch, TheSeriesKeptIsBoundedAndTheSumsStayExact) {
  WatchRun r;
  r.Ready();
  const int n = static_cast<int>(kHbmRecentKept) + 30;
  for (int i = 1; i <= n; ++i) {
    r.Answer(kServiceHbmSampleTask, true, Sample(i, 60.0 * i, 30000 + i, 28000));  // 60 MB/h
    r.FireSampleTimer();
  }
  const json w = r.Summary()["hbm_watch"];
  EXPECT_EQ(w["samples"], n);
  EXPECT_EQ(w["recent"].size(), static_cast<size_t>(kHbmRecentKept));
  EXPECT_EQ(w["recent"][0]["sample_no"], n - kHbmRecentKept + 1);
  EXPECT_NEAR(w["devices"][0]["slope_mb_per_h"].get<double>(), 60, 1e-6) << "over every sample, not the kept ones";
  EXPECT_EQ(w["devices"][0]["samples"], n);
}

TEST(ServeHbmWatch, AFailedSampleIsTakenAgainAtTheNextInterval) {
  WatchRun r;
  r.Ready();
  r.Answer(kServiceHbmSampleTask, false, {{"sample_no", 1}, {"error_detail", "dcmi error"}}, "npu_smi_failed");
  EXPECT_EQ(r.s.state, "ready");
  ASSERT_EQ(r.ArmedSampleTimers(), 1);
  r.FireSampleTimer();
  const TaskInfo* t = r.Pending(kServiceHbmSampleTask);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->payload["sample_no"], 1) << "no sample was recorded";
}

TEST(ServeHbmWatch, StopWhileASampleIsOutEndsTheSampling) {
  WatchRun r;
  r.Ready();
  const TaskInfo* t = r.Pending(kServiceHbmSampleTask);
  ASSERT_NE(t, nullptr);
  const TaskInfo out = *t;
  Input stop;
  stop.type = Input::Type::kSignal;
  stop.signal = "stop";
  stop.result = {{"force", false}};
  ASSERT_TRUE(r.Do(stop).ok());
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.Pending(kServiceHbmSampleTask), nullptr) << "the sample out is abandoned";
  EXPECT_EQ(r.ArmedSampleTimers(), 0);
  // Its late answer records nothing and schedules nothing.
  ASSERT_TRUE(r.Do(r.MakeResult(out, true, Sample(1, 1, 30000, 28000))).ok());
  EXPECT_EQ(r.Summary()["hbm_watch"]["samples"], 0);
  EXPECT_EQ(r.ArmedSampleTimers(), 0);
  r.Answer(kServiceStopTask, true, {{"stopped", true}});
  EXPECT_EQ(r.s.state, "completed");
}

TEST(ServeHbmWatch, ATimerAfterTheStopSchedulesNothing) {
  WatchRun r;
  r.Ready();
  r.Answer(kServiceHbmSampleTask, true, Sample(1, 1, 30000, 28000));
  ASSERT_EQ(r.ArmedSampleTimers(), 1);
  std::string timer_id;
  for (const auto& [id, t] : r.s.timers)
    if (t.armed && t.purpose == kHbmSampleTimer) timer_id = id;
  Input stop;
  stop.type = Input::Type::kSignal;
  stop.signal = "stop";
  stop.result = {{"force", true}};
  ASSERT_TRUE(r.Do(stop).ok());
  Input fire;
  fire.type = Input::Type::kTimerFired;
  fire.timer_id = timer_id;
  (void)r.Do(fire);  // a cancelled timer: the engine passes over it
  EXPECT_EQ(r.Pending(kServiceHbmSampleTask), nullptr);
}

TEST(ServeHbmWatch, ARedeliveredAnswerFoldsOnce) {
  WatchRun r;
  r.Ready();
  const TaskInfo first = *r.Pending(kServiceHbmSampleTask);
  r.Answer(kServiceHbmSampleTask, true, Sample(1, 1, 30000, 28000));
  // The same attempt's answer again (a worker that re-sent it after a reconnect).
  (void)r.Do(r.MakeResult(first, true, Sample(1, 1, 30000, 28000)));
  EXPECT_EQ(r.Summary()["hbm_watch"]["samples"], 1);
  EXPECT_EQ(r.ArmedSampleTimers(), 1);
  // The fold itself: the same HbmSampled twice counts once.
  RunState s = r.s;
  const json again = r.Summary()["hbm_watch"]["recent"][0];
  ApplyHbmSampled(s, again);
  EXPECT_EQ(s.data["hbm_watch"], r.s.data["hbm_watch"]);
}

TEST(ServeHbmWatch, ReplayOfTheEventsGivesTheSameSummary) {
  WatchRun r;
  r.Ready();
  std::vector<NewEvent> events;
  for (int i = 1; i <= 6; ++i) {
    r.Answer(kServiceHbmSampleTask, true, Sample(i, 2.0 * i, 30000 + 5 * i, 28000 + (i % 2)));
    r.FireSampleTimer();
  }
  // Fold the HbmSampled payloads again from scratch.
  RunState fresh;
  fresh.kind = "serve";
  const json summary = r.Summary();
  for (const json& ev : summary["hbm_watch"]["recent"]) ApplyHbmSampled(fresh, ev);
  EXPECT_EQ(fresh.data["hbm_watch"], r.s.data["hbm_watch"]);
}

TEST(ServeHbmWatch, WithTheWorkloadAWavePrecedesEachSampleAndGrowthPerRequestShows) {
  WatchRun r;
  json spec = Spec();
  spec["watch_workload"] = true;
  r.Submit(spec);
  r.Answer(kServiceLaunchTask, true,
           {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"port", 18000}, {"devices", {2, 3}}});
  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
  for (int i = 1; i <= 6; ++i) {
    const TaskInfo* wave = r.Pending(kHbmWaveTask);
    ASSERT_NE(wave, nullptr) << "cycle " << i;
    EXPECT_EQ(r.Pending(kServiceHbmSampleTask), nullptr) << "the sample waits for the wave";
    EXPECT_EQ(wave->payload["port"], 18000);
    EXPECT_EQ(wave->payload["total"], kHbmWaveRequests);
    EXPECT_EQ(wave->payload["first_index"], (i - 1) * 8);
    // Every wave answers 8 requests; a leak of 5 MB per request on device 2.
    r.Answer(kHbmWaveTask, true, {{"role", "wave"}, {"total", 8}, {"ok_count", 8}, {"wall_ms", 40}});
    const TaskInfo* sample = r.Pending(kServiceHbmSampleTask);
    ASSERT_NE(sample, nullptr);
    EXPECT_EQ(sample->payload["requests"], i * 8);
    r.Answer(kServiceHbmSampleTask, true, Sample(i, 1.0 * i, 30000 + 40 * i, 28000));
    r.FireSampleTimer();
  }
  const json w = r.Summary()["hbm_watch"];
  EXPECT_EQ(w["requests"], 40) << "requests answered between the first and the last sample";
  EXPECT_NEAR(w["devices"][0]["per_request"]["mb_per_request"].get<double>(), 5, 1e-6);
  EXPECT_NEAR(w["devices"][1]["per_request"]["mb_per_request"].get<double>(), 0, 1e-6);
  // A failed wave: the sample is taken all the same, with no requests added.
  r.Answer(kHbmWaveTask, false, json::object(), "unreachable");
  const TaskInfo* sample = r.Pending(kServiceHbmSampleTask);
  ASSERT_NE(sample, nullptr);
  EXPECT_EQ(sample->payload["requests"], 48);
}

}  // namespace
}  // namespace npuprof::sm
