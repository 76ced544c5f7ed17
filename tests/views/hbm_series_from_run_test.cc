// The adapter from a run's event log + npu_mem CSVs to the views' inputs
// (views/hbm_series_from_run.h) and the inference window it and the
// memory-profile kind cut the series at (statemachine/inference_window.h):
// target clock preferred, server clock with its wider margin otherwise,
// the collect step's window when the log has one, the phases moved onto the
// target's clock, the device's series with the most samples, bad CSVs skipped;
// a deployment's every node labelled and moved onto npuprof's clock by its
// measured offset (or left on the head's clock when none was measured).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "statemachine/inference_window.h"
#include "tests/views/view_fixtures.h"
#include "views/hbm_series_from_run.h"

namespace npuprof::views {
namespace {

using nlohmann::json;

constexpr double kT0Ms = 1.7e12;  // server ms since the epoch

json Ev(const std::string& type, double t_ms, json payload) {
  return {{"type", type}, {"time_ms", t_ms}, {"payload", std::move(payload)}};
}

json Scheduled(const std::string& id, const std::string& kind, double t_ms, json payload = json::object()) {
  return Ev("TaskScheduled", t_ms, {{"task_id", id}, {"kind", kind}, {"payload", std::move(payload)}});
}

json Succeeded(const std::string& id, double t_ms, json result = json::object(), json blobs = json::object()) {
  return Ev("TaskSucceeded", t_ms, {{"task_id", id}, {"result", std::move(result)}, {"blobs", std::move(blobs)}});
}

// Devices 0 and 1 on a 50 Hz grid from kT0Ms - 5 s to + 5 s (target clock =
// server clock + offset_ms): idle 1000 MB, `act` MB more while the request
// runs (server [kT0Ms, kT0Ms + 300 ms]), back to idle after (released).
std::string Csv(double offset_ms, double act, int devices = 2) {
  std::string out = "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n";
  for (int i = 0; i < 500; ++i) {
    const double t_ms = kT0Ms - 5000 + i * 20;
    const bool in = t_ms >= kT0Ms && t_ms <= kT0Ms + 300;
    for (int d = 0; d < devices; ++d) {
      const long kb = static_cast<long>((1000 + d + (in ? act : 0)) * 1024);
      out += fmt::format("{},Device,0,{},{},{:.3f}\n", d, kb, kb, (t_ms + offset_ms) * 1000.0);
    }
  }
  return out;
}

// A memory-profile log: baseline, launch, ready, the inference request at
// kT0Ms (target clock read around it when offset_ms is set), stop, collect.
json Log(std::optional<double> offset_ms, bool collect_window = true) {
  json infer_result = {{"ok", true}};
  if (offset_ms)
    infer_result["target_clock"] = {{"before_ns", static_cast<int64_t>((kT0Ms + 10 + *offset_ms) * 1e6)},
                                    {"after_ns", static_cast<int64_t>((kT0Ms + 290 + *offset_ms) * 1e6)}};
  json events = json::array({
      Scheduled("t1", "memory.npu_smi", kT0Ms - 9000, {{"phase", "baseline"}}), Succeeded("t1", kT0Ms - 8900),
      Scheduled("t2", "service.launch", kT0Ms - 8000), Succeeded("t2", kT0Ms - 7900),
      Scheduled("t3", "service.wait_ready", kT0Ms - 7800), Succeeded("t3", kT0Ms - 2000),
      Scheduled("t4", "memory.infer", kT0Ms), Succeeded("t4", kT0Ms + 300, infer_result),
      Scheduled("t5", "service.stop", kT0Ms + 1000), Succeeded("t5", kT0Ms + 1500)});
  json record = infer_result;
  record["server_window_ms"] = {{"start_ms", kT0Ms}, {"end_ms", kT0Ms + 300}, {"ready_ms", kT0Ms - 2000}};
  json collect_payload = json::object();
  if (collect_window)
    if (auto w = sm::ChooseInferenceWindow(record)) collect_payload["inference_window"] = sm::ChosenWindowToJson(*w);
  events.push_back(Scheduled("t6", "memory.collect_csvs", kT0Ms + 2000, collect_payload));
  events.push_back(Succeeded(
      "t6", kT0Ms + 2100,
      {{"npu_mem", json::array({{{"file", "npu_mem_a.csv"}, {"event", "Device"}, {"device_id", 0}, {"samples", 500}},
                                {{"file", "npu_mem_b.csv"}, {"event", "Device"}, {"device_id", 0}, {"samples", 10}},
                                {{"file", "npu_mem_a.csv"}, {"event", "APP"}, {"device_id", 1}, {"samples", 900}},
                                {{"file", "npu_mem_a.csv"}, {"event", "Device"}, {"device_id", 1}, {"samples", 500}}})}},
      {{"msprof_csvs/npu_mem_a.csv", "sha-a"}, {"msprof_csvs/npu_mem_b.csv", "sha-b"}}));
  return json{{"events", events}};
}

const PhaseMarker* Phase(const HbmSeriesSet& s, const std::string& key) {
  for (const auto& p : s.phases)
    if (p.key == key) return &p;
  return nullptr;
}

TEST(InferenceWindow, TargetClockPreferredServerClockWithWiderMargin) {
  json rec = {{"server_window_ms", {{"start_ms", 1000}, {"end_ms", 1300}}}};
  auto w = sm::ChooseInferenceWindow(rec);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->clock, "server");
  EXPECT_DOUBLE_EQ(w->window.start_us, 1e6);
  EXPECT_DOUBLE_EQ(w->window.end_us, 1.3e6);
  EXPECT_DOUBLE_EQ(w->margin_us, sm::kServerMarginUs);
  rec["target_clock"] = {{"before_ns", int64_t{5'000'000'000}}, {"after_ns", int64_t{5'100'000'000}}};
  w = sm::ChooseInferenceWindow(rec);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->clock, "target");
  EXPECT_DOUBLE_EQ(w->window.start_us, 5e6);
  EXPECT_DOUBLE_EQ(w->window.end_us, 5.1e6);
  EXPECT_DOUBLE_EQ(w->margin_us, sm::kTargetMarginUs);
  EXPECT_FALSE(w->ready_us);
  // The ready instant is moved onto the target's clock by the midpoints' offset.
  rec["server_window_ms"]["ready_ms"] = 400;
  w = sm::ChooseInferenceWindow(rec);
  ASSERT_TRUE(w->ready_us);
  EXPECT_DOUBLE_EQ(*w->ready_us, 4e5 + (5.05e6 - 1.15e6));
  EXPECT_EQ(sm::PeakOptionsFor(*w).base_not_before_us, w->ready_us);
  EXPECT_DOUBLE_EQ(sm::PeakOptionsFor(*w).margin_us, sm::kTargetMarginUs);
  // Round trip through the collect payload's form.
  auto back = sm::ChosenWindowFromJson(sm::ChosenWindowToJson(*w));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->clock, "target");
  EXPECT_DOUBLE_EQ(back->window.end_us, 5.1e6);
  EXPECT_EQ(back->ready_us, w->ready_us);
}

TEST(InferenceWindow, InvertedOrMissingReadingsAreNoWindow) {
  // An inverted target reading falls back to the server's times.
  json rec = {{"target_clock", {{"before_ns", 9}, {"after_ns", 1}}},
              {"server_window_ms", {{"start_ms", 1000}, {"end_ms", 1300}}}};
  EXPECT_EQ(sm::ChooseInferenceWindow(rec)->clock, "server");
  rec["server_window_ms"]["end_ms"] = 10;
  EXPECT_FALSE(sm::ChooseInferenceWindow(rec));
  EXPECT_FALSE(sm::ChooseInferenceWindow(json::object()));
  EXPECT_FALSE(sm::ChooseInferenceWindow(json("x")));
  EXPECT_FALSE(sm::ChosenWindowFromJson(json{{"start_us", 1}, {"end_us", 2}, {"clock", "moon"}, {"margin_us", 0}}));
  EXPECT_FALSE(sm::ChosenWindowFromJson(json{{"start_us", 1}, {"end_us", 2}, {"clock", "target"}}));
  EXPECT_FALSE(sm::ChosenWindowFromJson(nullptr));
}

TEST(InferenceWindow, DeviceSeriesFilesPicksTheDeviceSeriesWithTheMostSamples) {
  const json rows = json::array({{{"file", "a"}, {"event", "Device"}, {"device_id", 0}, {"samples", 5}},
                                 {{"file", "b"}, {"event", "Device"}, {"device_id", 0}, {"samples", 50}},
                                 {{"file", "c"}, {"event", "APP"}, {"device_id", 1}, {"samples", 99}},
                                 {{"file", "d"}, {"event", "Device"}, {"device_id", nullptr}, {"samples", 99}},
                                 {{"file", 7}, {"event", "Device"}, {"device_id", 2}}});
  const auto files = sm::DeviceSeriesFiles(rows);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.at(0), "b");
  EXPECT_TRUE(sm::DeviceSeriesFiles(json("nope")).empty());
}

TEST(HbmSeriesFromRun, NamesTheCsvsToFetch) {
  const auto csvs = NpuMemCsvsOfRun(Log(0.0));
  ASSERT_EQ(csvs.size(), 2u);
  EXPECT_EQ(csvs[0].file, "npu_mem_a.csv");
  EXPECT_EQ(csvs[0].blob, "sha-a");
  EXPECT_EQ(csvs[0].device_id, 0);
  EXPECT_EQ(csvs[1].device_id, 1);
  EXPECT_TRUE(NpuMemCsvsOfRun(json{{"events", json::array()}}).empty());
  EXPECT_TRUE(NpuMemCsvsOfRun(json("garbage")).empty());
}

// A flush wait that also collected (its result's `collected`, its payload's
// `collect`, issue 38) is read as the collection it stands for: the same
// CSVs and the same window as the log whose collection ran apart.
TEST(HbmSeriesFromRun, AFlushWaitThatCollectedIsReadAsTheCollection) {
  json log = Log(0.0);
  json folded = json::array();
  for (auto e : log["events"]) {
    if (e["payload"]["task_id"] == "t6" && e["type"] == "TaskScheduled") {
      e["payload"]["kind"] = "memory.wait_flush";
      e["payload"]["payload"] = {{"msprof_dir", "/rt/msprof_data"}, {"collect", e["payload"]["payload"]}};
    } else if (e["payload"]["task_id"] == "t6") {
      e["payload"]["result"] = {{"signal", "end_info"}, {"collected", e["payload"]["result"]}};
    }
    folded.push_back(e);
  }
  const json flog = {{"events", folded}};
  const auto csvs = NpuMemCsvsOfRun(flog), apart = NpuMemCsvsOfRun(log);
  ASSERT_EQ(csvs.size(), apart.size());
  ASSERT_EQ(csvs.size(), 2u);
  for (size_t i = 0; i < csvs.size(); ++i) {
    EXPECT_EQ(csvs[i].file, apart[i].file);
    EXPECT_EQ(csvs[i].blob, apart[i].blob);
    EXPECT_EQ(csvs[i].device_id, apart[i].device_id);
  }
  const auto w = InferenceWindowOfRun(flog), wa = InferenceWindowOfRun(log);
  ASSERT_TRUE(w && wa);
  EXPECT_DOUBLE_EQ(w->window.start_us, wa->window.start_us);
  EXPECT_EQ(w->clock, wa->clock);
  // A wait that did not collect stands for no collection.
  folded[folded.size() - 1]["payload"]["result"].erase("collected");
  EXPECT_TRUE(NpuMemCsvsOfRun(json{{"events", folded}}).empty());
}

// A run over several machines collects on every node: the curve reads the
// head's collect (the run's machine), not the node that answered last.
TEST(HbmSeriesFromRun, ADeploymentsCurveIsTheHeadsSeries) {
  json log = Log(0.0);
  json& events = log["events"];
  events.insert(events.begin(), Ev("RunSubmitted", kT0Ms - 10000, {{"kind", "memory-profile"}, {"machine", "head"}}));
  for (auto& e : events)
    if (e["type"] == "TaskScheduled" && e["payload"]["kind"] == "memory.collect_csvs")
      e["payload"]["payload"]["machine"] = {{"name", "head"}};
  events.push_back(Scheduled("t7", "memory.collect_csvs", kT0Ms + 2001, {{"machine", {{"name", "worker"}}}}));
  events.push_back(Succeeded(
      "t7", kT0Ms + 2200,
      {{"npu_mem", json::array({{{"file", "npu_mem_w.csv"}, {"event", "Device"}, {"device_id", 0}, {"samples", 500}}})}},
      {{"msprof_csvs/npu_mem_w.csv", "sha-w"}}));
  const auto csvs = NpuMemCsvsOfRun(log);
  ASSERT_EQ(csvs.size(), 2u);
  EXPECT_EQ(csvs[0].blob, "sha-a");
}

TEST(HbmSeriesFromRun, TargetClockAheadOfTheServerMovesPhasesAndFindsThePeak) {
  // The target's clock runs 1 h ahead: the series and the target readings
  // are on it; the phases from the log are moved onto it.
  const double off_ms = 3600e3;
  const json log = Log(off_ms);
  const auto set = HbmSeriesSetFromRun(log, {{"npu_mem_a.csv", "sha-a", std::nullopt, Csv(off_ms, 180)}});
  ASSERT_EQ(set.series.size(), 2u);
  ASSERT_EQ(set.peaks.size(), 2u);
  for (const auto& pk : set.peaks) {
    EXPECT_DOUBLE_EQ(pk.delta_mb, 180) << pk.device_id;
    EXPECT_DOUBLE_EQ(pk.base_mb, 1000 + pk.device_id);
  }
  EXPECT_EQ(set.series[0].file, "msprof_csvs/npu_mem_a.csv");
  EXPECT_EQ(set.series[0].blob, "sha-a");
  const PhaseMarker* inf = Phase(set, "inference");
  ASSERT_NE(inf, nullptr);
  EXPECT_DOUBLE_EQ(inf->start_us, (kT0Ms + 10 + off_ms) * 1000);
  const PhaseMarker* ready = Phase(set, "ready");
  ASSERT_NE(ready, nullptr);
  // The offset is the midpoints' difference: target [10, 290] vs server [0, 300] ms.
  EXPECT_NEAR(ready->start_us, (kT0Ms - 2000 + off_ms) * 1000, 1);
  for (const char* k : {"baseline", "launch", "stop"}) EXPECT_NE(Phase(set, k), nullptr) << k;
}

TEST(HbmSeriesFromRun, ServerClockWhenTheTargetGaveNone) {
  const auto set = HbmSeriesSetFromRun(Log(std::nullopt), {{"npu_mem_a.csv", "", std::nullopt, Csv(0, 250)}});
  ASSERT_EQ(set.peaks.size(), 2u);
  EXPECT_DOUBLE_EQ(set.peaks[0].delta_mb, 250);
  const auto w = InferenceWindowOfRun(Log(std::nullopt));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->clock, "server");
  EXPECT_DOUBLE_EQ(TargetClockOffsetUs(Log(std::nullopt)), 0);
}

TEST(HbmSeriesFromRun, OlderLogsWithoutTheCollectWindowUseTheInferenceTask) {
  const json log = Log(0.0, /*collect_window=*/false);
  const auto w = InferenceWindowOfRun(log);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->clock, "target");
  const auto set = HbmSeriesSetFromRun(log, {{"npu_mem_a.csv", "", std::nullopt, Csv(0, 99)}});
  ASSERT_EQ(set.peaks.size(), 2u);
  EXPECT_DOUBLE_EQ(set.peaks[1].delta_mb, 99);
}

TEST(HbmSeriesFromRun, MostSamplesWinsAndBadCsvsAreSkipped) {
  // Device 0's short series in b loses to a's; an unparseable CSV is skipped;
  // a CSV without a Device_id column takes the device its PROF dir maps to.
  std::string old_format = "event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n";
  for (int i = 0; i < 3; ++i) old_format += fmt::format("Device,0,1024,1024,{:.3f}\n", (kT0Ms + i * 20) * 1000.0);
  const auto set = HbmSeriesSetFromRun(Log(0.0), {{"npu_mem_b.csv", "", std::nullopt, Csv(0, 50, 1).substr(0, 400)},
                                                  {"bad.csv", "", std::nullopt, "no,header\n\xff\xfe"},
                                                  {"npu_mem_a.csv", "", std::nullopt, Csv(0, 50)},
                                                  {"old.csv", "", 7, old_format}});
  ASSERT_EQ(set.series.size(), 3u);
  EXPECT_EQ(set.series[0].file, "msprof_csvs/npu_mem_a.csv");
  EXPECT_EQ(set.series[0].samples.size(), 500u);
  EXPECT_EQ(set.series[2].device_id, 7);
  // Device 7's three samples lie inside the window with none before it: no peak.
  EXPECT_EQ(set.peaks.size(), 2u);
}

TEST(HbmSeriesFromRun, NoInferenceNoPeaksButTheCurve) {
  json log = Log(0.0);
  json kept = json::array();
  for (const auto& e : log["events"])
    if (e["payload"]["task_id"] != "t4" && e["payload"]["task_id"] != "t6") kept.push_back(e);
  log["events"] = kept;
  const auto set = HbmSeriesSetFromRun(log, {{"npu_mem_a.csv", "", std::nullopt, Csv(0, 50)}});
  EXPECT_EQ(set.series.size(), 2u);
  EXPECT_TRUE(set.peaks.empty());
  EXPECT_EQ(Phase(set, "inference"), nullptr);
}

TEST(HbmSeriesFromRun, SavedRealRunHasBothDevicesAndThePhases) {
  const json events = testing::TestJson("views/memory_profile.events.json");
  const auto set = testing::SeriesSetFromRun(events, testing::ReadTestData("views/npu_mem.csv"), "npu_mem.csv", "x");
  ASSERT_EQ(set.series.size(), 2u);
  ASSERT_EQ(set.peaks.size(), 2u);
  for (const char* k : {"baseline", "launch", "ready", "inference", "stop"}) EXPECT_NE(Phase(set, k), nullptr) << k;
  // The simulator's activation (180 MB, retained) on both devices.
  for (const auto& pk : set.peaks) EXPECT_NEAR(pk.delta_mb, 180, 1) << pk.device_id;
}

// A deployment over two machines, the head's clock 50 ms ahead of npuprof's
// and the worker's 3250 ms: every node's devices, labelled with their
// machine, each cut at its own collect's window, all moved onto npuprof's
// clock by their node's offset (the phases with the head's).
json DeploymentLog(bool measured) {
  json log = Log(50.0);
  json& events = log["events"];
  events.insert(events.begin(), Ev("RunSubmitted", kT0Ms - 10000,
                                   {{"kind", "memory-profile"},
                                    {"machine", "head"},
                                    {"spec", {{"nodes", {{{"machine", "head"}}, {{"machine", "worker"}}}}}}}));
  if (measured)
    events.push_back(Ev("ClockMeasured", kT0Ms - 7000,
                        {{"when", "start"},
                         {"offsets", {{{"machine", "head"}, {"offset_ms", 50.0}, {"uncertainty_ms", 1.0}},
                                      {{"machine", "worker"}, {"offset_ms", 3250.0}, {"uncertainty_ms", 1.0}}}}}));
  // The worker's collect: the head's window moved by 3200 ms onto its clock.
  json window = sm::ChosenWindowToJson(*InferenceWindowOfRun(Log(50.0)));
  window["start_us"] = window["start_us"].get<double>() + 3200e3;
  window["end_us"] = window["end_us"].get<double>() + 3200e3;
  if (window.contains("ready_us")) window["ready_us"] = window["ready_us"].get<double>() + 3200e3;
  events.push_back(Scheduled("t7", "memory.collect_csvs", kT0Ms + 2000,
                             {{"machine", {{"name", "worker"}}}, {"inference_window", window}}));
  events.push_back(Succeeded(
      "t7", kT0Ms + 2200,
      {{"npu_mem", json::array({{{"file", "npu_mem_w.csv"}, {"event", "Device"}, {"device_id", 0}, {"samples", 500}},
                                {{"file", "npu_mem_w.csv"}, {"event", "Device"}, {"device_id", 1}, {"samples", 500}}})}},
      {{"msprof_csvs/npu_mem_w.csv", "sha-w"}}));
  return log;
}

TEST(HbmSeriesFromRun, EveryNodeOfADeploymentOnNpuprofsClock) {
  const json log = DeploymentLog(true);
  const auto csvs = NpuMemCsvsOfRun(log);
  ASSERT_EQ(csvs.size(), 4u) << "each node's CSV of each device, the head's first";
  EXPECT_EQ(csvs[0].machine, "head");
  EXPECT_EQ(csvs.back().machine, "worker");
  EXPECT_EQ(csvs.back().blob, "sha-w");
  std::vector<NpuMemCsv> fetched;
  for (auto c : csvs) {
    c.text = c.machine == "worker" ? Csv(3250, 300) : Csv(50, 180);
    fetched.push_back(c);
  }
  const HbmSeriesSet set = HbmSeriesSetFromRun(log, fetched);
  EXPECT_EQ(set.clock, "npuprof");
  ASSERT_EQ(set.series.size(), 4u);
  EXPECT_EQ(set.series[0].machine, "head");
  EXPECT_EQ(set.series[3].machine, "worker");
  // Every node's first sample at npuprof's kT0Ms - 5 s.
  for (const auto& s : set.series) EXPECT_NEAR(s.samples.front().t_us, (kT0Ms - 5000) * 1000.0, 1.0) << s.machine;
  ASSERT_EQ(set.peaks.size(), 4u);
  for (const auto& p : set.peaks) {
    EXPECT_NEAR(p.delta_mb, p.machine == "worker" ? 300.0 : 180.0, 0.01) << p.machine << " " << p.device_id;
    EXPECT_GE(p.t_us, kT0Ms * 1000.0) << p.machine;
    EXPECT_LE(p.t_us, (kT0Ms + 300) * 1000.0) << p.machine;
  }
  const PhaseMarker* inference = Phase(set, "inference");
  ASSERT_NE(inference, nullptr);
  EXPECT_NEAR(inference->start_us, (kT0Ms + 10) * 1000.0, 1.0) << "the head's window minus the head's offset";
  const PhaseMarker* stop = Phase(set, "stop");
  ASSERT_NE(stop, nullptr);
  EXPECT_NEAR(stop->start_us, (kT0Ms + 1000) * 1000.0, 1.0) << "the server's times, on npuprof's clock";
}

TEST(HbmSeriesFromRun, ADeploymentWithoutOffsetsStaysOnTheHeadsClock) {
  const json log = DeploymentLog(false);
  std::vector<NpuMemCsv> fetched;
  for (auto c : NpuMemCsvsOfRun(log)) {
    c.text = c.machine == "worker" ? Csv(3250, 300) : Csv(50, 180);
    fetched.push_back(c);
  }
  const HbmSeriesSet set = HbmSeriesSetFromRun(log, fetched);
  EXPECT_EQ(set.clock, "target");
  ASSERT_EQ(set.series.size(), 4u);
  EXPECT_NEAR(set.series[0].samples.front().t_us, (kT0Ms - 5000 + 50) * 1000.0, 1.0) << "the head's own clock";
  EXPECT_NEAR(set.series[3].samples.front().t_us, (kT0Ms - 5000 + 3250) * 1000.0, 1.0) << "not moved";
  // Each node still cut at its own collect's window.
  for (const auto& p : set.peaks) EXPECT_NEAR(p.delta_mb, p.machine == "worker" ? 300.0 : 180.0, 0.01) << p.machine;
}

}  // namespace
}  // namespace npuprof::views
