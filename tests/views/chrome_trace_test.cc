// The Chrome trace writer, checked by the strict validator on real event
// lists (saved from runs over the simulated target) and on a log with
// retries, a lost worker and a server restart; and the validator itself on
// documents that break each rule.
#include <gtest/gtest.h>

#include <set>

#include "tests/views/trace_validator.h"
#include "tests/views/view_fixtures.h"
#include "views/chrome_trace.h"
#include "views/node_timeline.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

TraceCheck BuildAndValidate(const json& events, const std::vector<views::DeviceHbmSeries>& hbm = {}) {
  auto trace = views::BuildChromeTrace(events, hbm);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  if (!trace.ok()) return {};
  TraceCheck c = ValidateChromeTrace(Dump(*trace));
  for (const auto& p : c.problems) ADD_FAILURE() << p;
  return c;
}

std::vector<json> Named(const TraceCheck& c, const std::string& ph, int pid = -1) {
  std::vector<json> out;
  for (const auto& e : c.events)
    if (e["ph"] == ph && (pid < 0 || e["pid"] == pid)) out.push_back(e);
  return out;
}

size_t CountType(const json& events_doc, const std::string& type) {
  size_t n = 0;
  for (const auto& e : events_doc["events"]) n += e["type"] == type;
  return n;
}

TEST(ChromeTrace, RealMemoryProfileRunWithItsHbmSeries) {
  const json events = TestJson("views/memory_profile.events.json");
  ASSERT_TRUE(events.is_object());
  const auto set = SeriesSetFromRun(events, ReadTestData("views/npu_mem.csv"), "npu_mem.csv", "abc");
  ASSERT_FALSE(set.series.empty());
  TraceCheck c = BuildAndValidate(events, set.series);
  // The run, its states: one span per state the run was in.
  EXPECT_EQ(c.process_names[1].rfind("run " + events["run_id"].get<std::string>() + " (memory-profile)", 0), 0u)
      << c.process_names[1];
  size_t state_spans = 0;
  for (const auto& e : Named(c, "X", 1)) state_spans += e["tid"] == 1;
  EXPECT_EQ(state_spans, CountType(events, "StateChanged") + 1);
  // Every scheduled task and every re-dispatch is one attempt span on a worker's track.
  size_t attempts = 0;
  std::set<std::string> task_ids;
  for (const auto& e : c.events)
    if (e["ph"] == "X" && e["pid"] != 1) {
      ++attempts;
      task_ids.insert(e["args"]["task_id"].get<std::string>());
      EXPECT_TRUE(e["args"].contains("outcome"));
    }
  EXPECT_EQ(attempts, CountType(events, "TaskScheduled") + CountType(events, "TaskRedispatched"));
  EXPECT_EQ(task_ids.size(), CountType(events, "TaskScheduled"));
  bool worker_named = false;
  for (const auto& [pid, name] : c.process_names) worker_named = worker_named || name.rfind("worker ", 0) == 0;
  EXPECT_TRUE(worker_named);
  // Key instants.
  std::set<std::string> instants;
  for (const auto& e : Named(c, "i")) instants.insert(e["name"]);
  for (const char* k : {"submitted", "devices requested", "devices leased", "service ready", "inference answered",
                        "service stopped", "devices released", "finished ok"})
    EXPECT_TRUE(instants.count(k)) << k;
  // One HBM counter track per device, every sample of its series.
  EXPECT_EQ(c.counter_names.size(), set.series.size());
  size_t samples = 0;
  for (const auto& s : set.series) samples += s.samples.size();
  EXPECT_EQ(Named(c, "C").size(), samples);
  EXPECT_EQ(c.process_names[1000], "HBM (msprof npu_mem)");
}

TEST(ChromeTrace, RealTorchProfileRun) {
  const json events = TestJson("views/torch_profile.events.json");
  ASSERT_TRUE(events.is_object());
  TraceCheck c = BuildAndValidate(events);
  std::set<std::string> instants;
  for (const auto& e : Named(c, "i")) instants.insert(e["name"]);
  for (const char* k : {"start_profile", "stop_profile", "service stopped", "finished ok"})
    EXPECT_TRUE(instants.count(k)) << k;
  // Concurrent analyse attempts of one worker never share a thread: checked
  // by the validator's nesting rule; the analyse tasks are all there.
  size_t analyse = 0;
  for (const auto& e : Named(c, "X"))
    analyse += e["name"].get<std::string>().rfind("torch_profile.analyse_rank", 0) == 0;
  EXPECT_EQ(analyse, 2u);
  EXPECT_TRUE(c.counter_names.empty());
}

// A log with a retried failure, a lost worker and a server restart.
json RetryLog() {
  json ev = json::array();
  int seq = 0;
  auto add = [&](double t, const std::string& type, json p) {
    ev.push_back({{"seq", ++seq}, {"type", type}, {"time_ms", t}, {"payload", p}, {"cause", "test"}});
  };
  add(1000, "RunSubmitted", {{"kind", "probe"}, {"spec", json::object()}, {"machine", "sim1"}});
  add(1000, "StateChanged", {{"from", "new"}, {"to", "probing"}});
  add(1000, "TaskScheduled", {{"task_id", "r.t1"}, {"kind", "probe.npu_smi"}, {"attempt", 1}, {"payload", json::object()}});
  add(1000, "TaskScheduled", {{"task_id", "r.t2"}, {"kind", "memory.npu_smi"}, {"attempt", 1},
                              {"payload", {{"phase", "baseline"}}}});
  add(1500, "TaskFailed", {{"task_id", "r.t1"}, {"attempt", 1}, {"error_kind", "unreachable"}, {"error", "no route"},
                           {"retryable", true}, {"worker", "w-a"}, {"final", false}});
  add(1500, "TaskRetryScheduled", {{"task_id", "r.t1"}, {"next_attempt", 2}, {"timer_id", "r.tm1"}, {"deadline_ms", 2500}});
  add(1500, "TimerScheduled", {{"timer_id", "r.tm1"}, {"purpose", "retry"}, {"deadline_ms", 2500}});
  add(2500, "TimerFired", {{"timer_id", "r.tm1"}});
  add(2500, "TaskRedispatched", {{"task_id", "r.t1"}, {"attempt", 2}, {"reason", "retry"}});
  add(3000, "TaskRedispatched", {{"task_id", "r.t2"}, {"attempt", 2}, {"reason", "worker_lost"}, {"worker", "w-b"}});
  add(3200, "TaskSucceeded", {{"task_id", "r.t1"}, {"attempt", 2}, {"worker", "w-a"},
                              {"result", {{"ssh_commands", 3}}}});
  add(4000, "RunRecovered", {{"outstanding_tasks", json::array()}, {"armed_timers", json::array()}});
  add(4000, "TaskRedispatched", {{"task_id", "r.t2"}, {"attempt", 3}, {"reason", "recovery"}});
  add(4100, "TaskResultIgnored", {{"task_id", "r.t2"}, {"attempt", 2}, {"worker", "w-b"}, {"reason", "stale attempt"}});
  add(4500, "TaskSucceeded", {{"task_id", "r.t2"}, {"attempt", 3}, {"worker", "w-a"}, {"result", json::object()}});
  add(4600, "StateChanged", {{"from", "probing"}, {"to", "done"}});
  add(4600, "RunFinished", {{"status", "ok"}});
  return {{"run_id", "r"}, {"events", ev}};
}

// A two-node run whose worker's clock runs 3.2 s ahead: the saved run's
// events, its ranks as the head's and two more on the worker, each with a
// kernel window on its node's clock. The trace puts both nodes on npuprof's
// clock: one process per node, the worker's windows moved back by its
// offset, the offsets in otherData.
TEST(ChromeTrace, NodesOfAMultiNodeRunOnOneClock) {
  const json events = TestJson("views/torch_profile.events.json");
  const double t0_us = events["events"][0]["time_ms"].get<double>() * 1000.0;
  const auto dir = [&](const std::string& machine, int device, const std::string& name, double start_us) {
    return json{{"path", "/p/" + name}, {"machine", machine}, {"device_id", device},
                {"kernel_summary", {{"total_us", 100}, {"first_start_us", start_us}, {"last_end_us", start_us + 5e5}}}};
  };
  // Truly: head rank at t0 + 1 s, worker rank at t0 + 1.2 s (its clock says + 4.4 s).
  const json m = {
      {"kind", "torch-profile"},
      {"machine", "head"},
      {"nodes", json::array({{{"machine", "head"}}, {{"machine", "worker"}}})},
      {"clock_offsets",
       {{"start", {{"offsets", json::array({{{"machine", "head"}, {"offset_ms", 0.2}, {"uncertainty_ms", 0.1}},
                                            {{"machine", "worker"}, {"offset_ms", 3200.0}, {"uncertainty_ms", 0.3}}})}}},
        {"end", nullptr}}},
      {"remote_profile_dirs",
       json::array({dir("head", 0, "h_ascend_pt", t0_us + 1e6 + 200),
                    dir("worker", 3, "w_ascend_pt", t0_us + 1.2e6 + 3.2e6),
                    {{"path", "/p/nosum_ascend_pt"}, {"machine", "worker"}, {"kernel_summary", nullptr}}})}};
  const auto nodes = views::NodeTimelinesFromManifest(m);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].machine, "worker");
  EXPECT_EQ(nodes[1].measured, "start");
  ASSERT_EQ(nodes[1].ranks.size(), 1u);  // the rank without a window is left out
  EXPECT_EQ(nodes[1].ranks[0].device_id, 3);

  auto trace = views::BuildChromeTrace(events, {}, nodes);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  TraceCheck c = ValidateChromeTrace(Dump(*trace));
  for (const auto& p : c.problems) ADD_FAILURE() << p;
  EXPECT_EQ(c.process_names[2000], "node 0 head (clock +0.2 ms ± 0.1)");
  EXPECT_EQ(c.process_names[2001], "node 1 worker (clock +3200.0 ms ± 0.3)");
  EXPECT_EQ((c.thread_names[{2001, 1}]), "w_ascend_pt (device 3)");
  const auto head = Named(c, "X", 2000), worker = Named(c, "X", 2001);
  ASSERT_EQ(head.size(), 1u);
  ASSERT_EQ(worker.size(), 1u);
  // On one clock: the worker's rank started 200 ms after the head's, not 3.4 s.
  EXPECT_NEAR(worker[0]["ts"].get<double>() - head[0]["ts"].get<double>(), 2e5 - 200 + 200, 1.0);
  EXPECT_NEAR(head[0]["ts"].get<double>(), 1e6 + 200 - 200, 1.0);
  EXPECT_NEAR(worker[0]["dur"].get<double>(), 5e5, 1.0);
  EXPECT_EQ(worker[0]["args"]["offset_ms"], 3200.0);
  const json& offs = (*trace)["otherData"]["clock_offsets"];
  ASSERT_EQ(offs.size(), 2u);
  EXPECT_EQ(offs[1]["machine"], "worker");
  EXPECT_EQ(offs[1]["uncertainty_ms"], 0.3);
  EXPECT_EQ(offs[1]["pid"], 2001);

  // A one-node run: its machine's ranks on their own clock, said so.
  json one = m;
  one.erase("nodes");
  one.erase("clock_offsets");
  for (auto& d : one["remote_profile_dirs"]) d.erase("machine");
  const auto single = views::NodeTimelinesFromManifest(one);
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].measured, "none");
  EXPECT_EQ(single[0].ranks.size(), 2u);
  auto t1 = views::BuildChromeTrace(events, {}, single);
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ((*t1)["otherData"]["clock_offsets"][0]["measured"], "none");
  EXPECT_TRUE(ValidateChromeTrace(Dump(*t1)).ok());
}

TEST(ChromeTrace, RetriesRedispatchesAndRestartsAreVisible) {
  TraceCheck c = BuildAndValidate(RetryLog());
  std::map<std::string, json> by_name;
  for (const auto& e : Named(c, "X"))
    if (e["pid"] != 1) by_name[e["name"]] = e;
  ASSERT_EQ(by_name.size(), 5u) << c.events.dump(1);
  // Attempt 1 failed on w-a, attempt 2 (a retry) succeeded there, with its SSH command count.
  EXPECT_EQ(by_name["probe.npu_smi"]["args"]["outcome"], "failed");
  EXPECT_EQ(by_name["probe.npu_smi"]["args"]["error_kind"], "unreachable");
  EXPECT_EQ(by_name["probe.npu_smi #2"]["args"]["dispatch"], "retry");
  EXPECT_EQ(by_name["probe.npu_smi #2"]["args"]["ssh_commands"], 3);
  EXPECT_EQ(by_name["probe.npu_smi #2"]["ts"], 1500000.0);
  EXPECT_EQ(by_name["probe.npu_smi #2"]["dur"], 700000.0);
  // The baseline snapshot: lost with worker w-b, lost again in the restart (no worker), then done on w-a.
  EXPECT_EQ(by_name["memory.npu_smi baseline"]["args"]["outcome"], "lost (worker_lost)");
  EXPECT_EQ(by_name["memory.npu_smi baseline #2"]["args"]["outcome"], "lost (recovery)");
  EXPECT_EQ(by_name["memory.npu_smi baseline #3"]["args"]["dispatch"], "recovery");
  const int pid_b = by_name["memory.npu_smi baseline"]["pid"];
  const int pid_a = by_name["probe.npu_smi"]["pid"];
  EXPECT_EQ(c.process_names[pid_b], "worker w-b");
  EXPECT_EQ(c.process_names[pid_a], "worker w-a");
  EXPECT_EQ(by_name["memory.npu_smi baseline #2"]["pid"], 2);
  EXPECT_EQ(c.process_names[2], "attempts without a worker");
  // w-a's attempts (1000-1500, 2500-3200, 4000-4500 ms) never overlap: one slot.
  EXPECT_EQ(by_name["memory.npu_smi baseline #3"]["pid"], pid_a);
  EXPECT_EQ(c.thread_names.count({pid_a, 2}), 0u);
  // Timers and the ignored result are instants.
  std::set<std::string> instants;
  for (const auto& e : Named(c, "i")) instants.insert(e["name"]);
  for (const char* k : {"retry scheduled", "timer retry", "timer fired", "recovered after a restart", "result ignored"})
    EXPECT_TRUE(instants.count(k)) << k;
}

TEST(ChromeTrace, ConcurrentAttemptsOfOneWorkerGetTheirOwnSlots) {
  json ev = json::array();
  int seq = 0;
  auto add = [&](double t, const std::string& type, json p) {
    ev.push_back({{"seq", ++seq}, {"type", type}, {"time_ms", t}, {"payload", p}});
  };
  add(0, "RunSubmitted", {{"kind", "x"}});
  for (int i = 0; i < 3; ++i)
    add(10 * i, "TaskScheduled", {{"task_id", "t" + std::to_string(i)}, {"kind", "k"}, {"attempt", 1}});
  for (int i = 0; i < 3; ++i) add(100 + i, "TaskSucceeded", {{"task_id", "t" + std::to_string(i)}, {"worker", "w"}});
  add(200, "TaskScheduled", {{"task_id", "t9"}, {"kind", "k"}, {"attempt", 1}});  // never answered: run still going
  TraceCheck c = BuildAndValidate(json{{"run_id", "r"}, {"events", ev}});
  std::set<int> tids;
  for (const auto& e : Named(c, "X"))
    if (e["pid"] == 10) tids.insert(e["tid"].get<int>());
  EXPECT_EQ(tids, (std::set<int>{1, 2, 3}));
  bool in_flight = false;
  for (const auto& e : Named(c, "X", 2)) in_flight = in_flight || e["args"]["outcome"] == "in flight";
  EXPECT_TRUE(in_flight);
}

TEST(ChromeTrace, AClockSteppingBackKeepsTracksInOrder) {
  json ev = {{{"seq", 1}, {"type", "RunSubmitted"}, {"time_ms", 5000}, {"payload", {{"kind", "x"}}}},
             {{"seq", 2}, {"type", "StateChanged"}, {"time_ms", 6000}, {"payload", {{"from", "new"}, {"to", "a"}}}},
             {{"seq", 3}, {"type", "StateChanged"}, {"time_ms", 4000}, {"payload", {{"from", "a"}, {"to", "b"}}}},
             {{"seq", 4}, {"type", "RunFinished"}, {"time_ms", 7000}, {"payload", {{"status", "ok"}}}}};
  TraceCheck c = BuildAndValidate(json{{"run_id", "r"}, {"events", ev}});
  std::vector<std::pair<std::string, double>> states;
  for (const auto& e : Named(c, "X", 1)) states.emplace_back(e["name"], e["dur"].get<double>());
  ASSERT_EQ(states.size(), 3u);
  EXPECT_EQ(states[1], std::make_pair(std::string("a"), 0.0));  // left at once, as far as the trace can tell
  EXPECT_EQ(states[2], std::make_pair(std::string("b"), 1e6));
}

TEST(ChromeTrace, BadInputsAreErrorsNotCrashes) {
  EXPECT_FALSE(views::BuildChromeTrace(json::object()).ok());
  EXPECT_FALSE(views::BuildChromeTrace(json{{"events", json::array()}}).ok());
  auto no_time = views::BuildChromeTrace(json{{"events", {{{"type", "RunSubmitted"}}}}});
  ASSERT_FALSE(no_time.ok());
  EXPECT_NE(no_time.status().message().find("event 0"), std::string::npos);
  // Payloads of the wrong shape are read as absent.
  json odd = {{"events",
               {{{"type", "RunSubmitted"}, {"time_ms", 5}, {"payload", "not an object"}},
                {{"type", "TaskScheduled"}, {"time_ms", 6}, {"payload", {{"task_id", 7}, {"attempt", "x"}}}},
                {{"type", "StateChanged"}, {"time_ms", 7}, {"payload", {{"to", 3}}}},
                {{"type", "TaskSucceeded"}, {"time_ms", 8}, {"payload", json::array()}},
                {{"type", "RunFinished"}, {"time_ms", 9}, {"payload", nullptr}}}}};
  BuildAndValidate(odd);
  // Invalid UTF-8 in a payload survives as U+FFFD.
  json bytes = {{"run_id", std::string("r\xff")},
                {"events", {{{"type", "RunSubmitted"}, {"time_ms", 1}, {"payload", {{"kind", std::string("k\xfe")}}}}}}};
  auto t = views::BuildChromeTrace(bytes);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(Dump(*t).find("\xEF\xBF\xBD"), std::string::npos);
}

// ---- the validator refuses what breaks the format --------------------------

json Doc(json events) {
  json e = json::array({{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "p"}}}},
                        {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "t"}}}}});
  for (auto& x : events) e.push_back(x);
  return {{"traceEvents", e}};
}

json Ev(const char* ph, double ts, json extra = json::object()) {
  json e = {{"name", "n"}, {"ph", ph}, {"ts", ts}, {"pid", 1}, {"tid", 1}};
  for (auto it = extra.begin(); it != extra.end(); ++it) e[it.key()] = *it;
  return e;
}

TEST(TraceValidator, AcceptsAWellFormedDocument) {
  const auto c = ValidateChromeTrace(Dump(Doc({Ev("B", 1), Ev("X", 2, {{"dur", 1}}), Ev("E", 5), Ev("i", 6, {{"s", "t"}}),
                                               Ev("C", 7, {{"args", {{"MB", 1}}}})})));
  EXPECT_TRUE(c.ok()) << (c.problems.empty() ? "" : c.problems[0]);
}

TEST(TraceValidator, RefusesEachBrokenRule) {
  auto fails = [](const std::string& text, const std::string& why) {
    const auto c = ValidateChromeTrace(text);
    EXPECT_FALSE(c.ok()) << why;
  };
  fails("{\"traceEvents\": [", "truncated JSON");
  fails("{\"events\": []}", "no traceEvents");
  fails(Dump(Doc({Ev("X", 1)})), "X without dur");
  fails(Dump(Doc({Ev("X", 1, {{"dur", -1}})})), "negative dur");
  fails(Dump(Doc({Ev("B", 1)})), "B never closed");
  fails(Dump(Doc({Ev("E", 1)})), "E without B");
  fails(Dump(Doc({Ev("B", 1), Ev("E", 2, {{"name", "other"}})})), "E closes another B");
  fails(Dump(Doc({Ev("i", 5), Ev("i", 4)})), "ts going back on a track");
  fails(Dump(Doc({Ev("X", 1, {{"dur", 5}}), Ev("X", 3, {{"dur", 5}})})), "X spans overlapping without nesting");
  fails(Dump(Doc({Ev("i", -1)})), "negative ts");
  fails(Dump(Doc({Ev("i", 1, {{"ts", "1"}})})), "ts as a string");
  fails(Dump(Doc({Ev("i", 1, {{"pid", "1"}})})), "pid as a string");
  fails(Dump(Doc({Ev("Q", 1)})), "unknown phase");
  fails(Dump(Doc({Ev("i", 1, {{"s", "x"}})})), "bad instant scope");
  fails(Dump(Doc({Ev("C", 1, {{"args", {{"MB", "big"}}}})})), "counter value not a number");
  fails(Dump(Doc({Ev("C", 1)})), "counter without args");
  fails(Dump(Doc({Ev("i", 1, {{"tid", 9}})})), "thread without thread_name");
  fails(Dump(Doc({Ev("i", 1, {{"pid", 9}})})), "process without process_name");
  fails(Dump(Doc({{{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", json::object()}}})),
        "thread_name without a name");
  fails(Dump(Doc({{{"name", "bogus_meta"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", json::object()}}})),
        "unknown metadata");
}

}  // namespace
}  // namespace npuprof::testing
