// What the demo prints per step (cli/demo_story.h), on outputs shaped like
// the verbs' real ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/demo_story.h"

namespace npuprof::cli {
namespace {

using json = nlohmann::json;

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(DemoStory, ProbeIsADeviceTableWithTheBusyReason) {
  json probe = {{"run_id", "r1"}, {"state", "completed"}, {"status", "ok"},
                {"probe", {{"device_count", 2}, {"busy_threshold_mb", 4096}, {"free_devices", {0}},
                           {"busy_devices", {{{"logical_id", 1}, {"reason", "process listed on NPU 1 chip 0 (pid 7)"}}}},
                           {"devices", {{{"npu", 0}, {"chip", 0}, {"name", "910B3"}, {"hbm_used_mb", 2862},
                                         {"hbm_total_mb", 65536}, {"health", "OK"}},
                                        {{"npu", 1}, {"chip", 0}, {"name", "910B3"}, {"hbm_used_mb", 32862},
                                         {"hbm_total_mb", 65536}, {"health", "OK"}}}}}}};
  const std::string out = Joined(StoryLines(StoryView::kProbe, probe.dump(2)));
  EXPECT_NE(out.find("run r1: completed (ok)"), std::string::npos) << out;
  EXPECT_NE(out.find("2.8 GiB / 64.0 GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("busy: process listed on NPU 1 chip 0 (pid 7)"), std::string::npos) << out;
  EXPECT_NE(out.find("free [0]"), std::string::npos) << out;
}

TEST(DemoStory, AServiceSaysWhereItRunsAndHowItsReadinessWasSeen) {
  json serve = {{"run_id", "r2"}, {"state", "ready"}, {"status", "running"},
                {"service", {{"status", "ready"}, {"devices", {0, 1}}, {"pid", 42}, {"port", 8123},
                             {"served_model_name", "demo"},
                             {"ready", {{"ready_after_ms", 552}, {"rounds", 4}, {"seen_by", "log"}}}}}};
  std::string out = Joined(StoryLines(StoryView::kService, serve.dump(2)));
  EXPECT_NE(out.find("devices [0,1], pid 42, 127.0.0.1:8123, served model 'demo'"), std::string::npos) << out;
  EXPECT_NE(out.find("ready after 552 ms (4 rounds; HTTP asked as soon as its log said start-up complete)"),
            std::string::npos)
      << out;
  serve["service"]["ready"]["seen_by"] = "probe";
  out = Joined(StoryLines(StoryView::kService, serve.dump(2)));
  EXPECT_NE(out.find("(4 rounds; found by the HTTP probe)"), std::string::npos) << out;
}

TEST(DemoStory, TorchShowsBothGatesAndEveryRank) {
  json tp = {{"run_id", "r2"}, {"state", "completed"}, {"status", "ok"}, {"analysis_status", "ok"},
             {"rank_count", 2}, {"expected_ranks", 2},
             {"workload_status", {{"status", "ok"}, {"bench_ok", 6}, {"bench_total", 6}, {"bench_threshold", 0.8},
                                  {"followup_ok", true}}},
             {"remote_profile_dirs",
              {{{"path", "/x/vm_1_ascend_pt"}, {"analysis_status", "ok"}, {"analyse", {{"exit_code", 0}}},
                {"outputs", {{"trace_view_json", {{"event_count", 5287}, {"size", 1187626}}},
                             {"kernel_details_csv", {{"exists", true}, {"data_rows_checked", 1047}}}}}}}}};
  const std::string out = Joined(StoryLines(StoryView::kTorch, tp.dump()));
  EXPECT_NE(out.find("workload gate: ok — 6/6 benchmark requests ok (needs 80%), follow-up ok"), std::string::npos)
      << out;
  EXPECT_NE(out.find("analysis gate: ok (2 of 2 expected ranks found)"), std::string::npos) << out;
  EXPECT_NE(out.find("vm_1_ascend_pt: analyse exit 0, ok; trace_view.json 5287 events (1.2 MB), kernel_details.csv 1047 rows"),
            std::string::npos)
      << out;
}

TEST(DemoStory, ADeploymentsMemoryReportIsOneLinePerMachineAndDeviceThenTheTotals) {
  const json dev = {{"machine", "node-b"},
                    {"device_id", 1},
                    {"hbm_used_mb", 52000.0},
                    {"components", {{{"key", "weights"}, {"value_mb", 385.7}}, {{"key", "kv_cache"}, {"value_mb", nullptr}}}}};
  const json totals = {{"devices", 1}, {"hbm_used_mb", 52000.0}, {"components_mb", {{"weights", 385.7}}}};
  const json r = {{"devices", {dev}}, {"nodes", {{{"machine", "node-b"}, {"totals", totals}}}}, {"totals", totals}};
  const auto lines = StoryLines(StoryView::kDeploymentMemory, r.dump());
  ASSERT_EQ(lines.size(), 5u) << Joined(lines);
  EXPECT_EQ(lines[1], "node-b            1    52000.0      385.7          -          -          -");
  EXPECT_EQ(lines[2], "totals");
  EXPECT_EQ(lines[4].rfind("deployment", 0), 0u) << lines[4];
}

TEST(DemoStory, ADeploymentsMemoryProfileShowsEveryNodeAndTheClockOffsets) {
  const json hbm = {{"0", {{"used_mb", 56202.0}}}, {"1", {{"used_mb", 56202.0}}}};
  const json run = {
      {"run_id", "r1"}, {"state", "completed"}, {"status", "ok"}, {"tp", 2}, {"dp", 2}, {"msprof_status", "ok"},
      {"machine", "node-a"}, {"service", {{"devices", {0, 1}}, {"pid", 11}}}, {"after_infer_hbm", hbm},
      {"nodes", {{{"node", 1}, {"machine", "node-b"}, {"service", {{"devices", {0, 1}}, {"pid", 22}}},
                  {"after_infer_hbm", {{"0", {{"used_mb", 1024.0}}}}}}}},
      {"clock_offsets",
       {{"start", {{"offsets", {{{"machine", "node-a"}, {"offset_ms", 0.004}, {"uncertainty_ms", 0.064}},
                                {{"machine", "node-b"}, {"offset_ms", 3200.5}, {"uncertainty_ms", 0.041}},
                                {{"machine", "node-c"}, {"error", "no answer"}}}}}},
        {"end", nullptr}}}};
  const auto lines = StoryLines(StoryView::kDeploymentRun, run.dump());
  ASSERT_EQ(lines.size(), 5u) << Joined(lines);
  EXPECT_EQ(lines[0], "run r1: completed (ok)");
  EXPECT_EQ(lines[1], "tp 2, dp 2 over 2 nodes, msprof ok");
  EXPECT_EQ(lines[2], "  node 0 node-a (head): devices [0,1], pid 11; HBM after inference: 0 54.9 GiB, 1 54.9 GiB");
  EXPECT_EQ(lines[3], "  node 1 node-b: devices [0,1], pid 22; HBM after inference: 0 1.0 GiB");
  EXPECT_EQ(lines[4],
            "clock offsets from npuprof's host at the start: node-a +0.004 ms (±0.064), node-b +3200.500 ms (±0.041), "
            "node-c not measured");
}

TEST(DemoStory, ReportTextDropsTheEvidenceLinesOnly) {
  const std::string report =
      "[Device 0] Total HBM: 64.00 GiB\n"
      "Model weights                      |       7262.9 |      7.093 |   12.9% | vLLM log\n"
      "                                     <- vllm_serve.log:10 [c0f79a6af5ad] \"Loading model weights took 7.0927 GB\"\n"
      "                                     ~ safetensors headers (exact bytes) 7262.9 MB (+0.00%)\n"
      "                                     1632000 tokens\n"
      "  npu-smi used:          56,202.0 MB\n";
  const auto lines = StoryLines(StoryView::kReportText, report);
  const std::string out = Joined(lines);
  EXPECT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(out.find("<-"), std::string::npos) << out;
  EXPECT_NE(out.find("1632000 tokens"), std::string::npos);
  EXPECT_NE(out.find("npu-smi used"), std::string::npos);
}

TEST(DemoStory, CompareTextKeepsTheConfigurationAndTheTotalsNotThePerDeviceTables) {
  const std::string compare =
      "HBM memory compare\n"
      "[Runs]\n"
      "  A  r1  (reference (A))\n"
      "  B  r2\n"
      "[Configuration differences]\n"
      "  gpu_memory_utilization   0.85   0.9\n"
      "[Position 0] devices: A=0 B=0\n"
      "  KV cache reserve   28000.0   31200.0   +3200.0   +11.4%\n"
      "[Position 1] devices: A=1 B=1\n"
      "  KV cache reserve   28000.0   31200.0   +3200.0   +11.4%\n"
      "[Totals (sum over devices)]\n"
      "  KV cache reserve   56000.0   62400.0   +6400.0   +11.4%\n"
      "[Notes]\n"
      "  position 0: B has no graph capture\n";
  const std::string out = Joined(StoryLines(StoryView::kCompareText, compare));
  EXPECT_NE(out.find("gpu_memory_utilization"), std::string::npos) << out;
  EXPECT_NE(out.find("[Totals (sum over devices)]"), std::string::npos) << out;
  EXPECT_NE(out.find("+6400.0"), std::string::npos) << out;
  EXPECT_EQ(out.find("[Position 0]"), std::string::npos) << out;
  EXPECT_EQ(out.find("+3200.0"), std::string::npos) << out;
  EXPECT_EQ(out.find("[Notes]"), std::string::npos) << out;
}

TEST(DemoStory, VerifySaysTheVerdictAndNamesWhatFailed) {
  json ok = {{"ok", true}, {"lease_audit", {{"ok", true}, {"lease_events", 8}, {"error", nullptr}}},
             {"runs", {{{"run_id", "a"}, {"ok", true}, {"events", 7}}, {{"run_id", "b"}, {"ok", true}, {"events", 3}}}}};
  EXPECT_EQ(StoryLines(StoryView::kVerify, ok.dump())[0],
            "verified: 2 streams, 10 events replayed; 0 with a problem; lease audit ok (8 lease events)");
  json bad = ok;
  bad["ok"] = false;
  bad["runs"][1] = {{"run_id", "b"}, {"ok", false}, {"events", 2}, {"error", "event #3: hash does not match"}};
  const std::string out = Joined(StoryLines(StoryView::kVerify, bad.dump()));
  EXPECT_NE(out.find("NOT verified"), std::string::npos) << out;
  EXPECT_NE(out.find("b: event #3: hash does not match"), std::string::npos) << out;
}

TEST(DemoStory, AnythingElseIsShownAsItsFirstLinesAndBounded) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
  const auto lines = StoryLines(StoryView::kProbe, text, 10);
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], "line 0");
  EXPECT_EQ(lines[9], "… (91 more lines in the step's file)");
  EXPECT_FALSE(StoryLines(StoryView::kService, std::string("\xff\xfe not json", 13)).empty());
  EXPECT_FALSE(StoryLines(StoryView::kMemory, "{}").empty());
}

}  // namespace
}  // namespace npuprof::cli

namespace npuprof::cli {
namespace {

TEST(DemoStory, SweepShowsEachPointAndItsStatus) {
  const std::string out =
      R"({"run_id": "r-sw", "status": "ok", "sweep_status": "ok", "points": 2, "points_ok": 2,
          "children": [{"run_id": "r-sw-p0", "point": {"gpu-memory-utilization": "0.85"}, "status": "ok"},
                       {"run_id": "r-sw-p1", "point": {"gpu-memory-utilization": "0.9"}, "status": "ok"}]})";
  const auto lines = StoryLines(StoryView::kSweep, out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "sweep r-sw: ok (2 of 2 points ok)");
  EXPECT_NE(lines[2].find("r-sw-p1"), std::string::npos);
  EXPECT_NE(lines[2].find("gpu-memory-utilization=0.9"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::cli
