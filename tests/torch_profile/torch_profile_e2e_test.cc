// torch-profile and analyse-root end to end: `npuprof` CLI -> server ->
// local workers -> real sshd -> simulated Ascend target (tests/sim).
// Delays are kept small (flush 0 s, short prompts, few requests).
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class TorchProfileE2E : public ::testing::Test {
 protected:
  void StartTarget(const std::vector<std::string>& sim_args = {}) {
    Status st = h_.Start(sim_args, 2);
    ASSERT_TRUE(st.ok()) << st.message();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
  }

  // The submit command; `extra` options replace the defaults of the same name.
  std::vector<std::string> Args(const std::string& tag, const std::vector<std::string>& extra = {}) {
    std::vector<std::pair<std::string, std::string>> opts = {
        {"--machine", "sim1"}, {"--model", model_}, {"--served-model-name", "qwen"}, {"--tp", "2"},
        {"--tag", tag}, {"--mode", "enforce_eager"}, {"--request-kind", "text"},
        {"--benchmark-output-tokens", "4"}, {"--prompt-tokens", "32"}, {"--benchmark-total-requests", "4"},
        {"--benchmark-concurrency", "2"}, {"--flush-seconds", "0"}, {"--health-timeout", "60"},
        {"--profile-control-timeout", "30"}, {"--request-timeout", "30"}};
    for (size_t i = 0; i + 1 < extra.size(); i += 2) {
      auto it = std::find_if(opts.begin(), opts.end(), [&](const auto& o) { return o.first == extra[i]; });
      if (it != opts.end()) it->second = extra[i + 1];
      else opts.emplace_back(extra[i], extra[i + 1]);
    }
    std::vector<std::string> a = {"submit", "torch-profile"};
    for (const auto& [k, v] : opts) {
      a.push_back(k);
      a.push_back(v);
    }
    return a;
  }

  // Runs with --wait; returns the manifest.
  json Collect(const std::string& tag, const std::vector<std::string>& extra = {}, int expect_exit = -1) {
    auto a = Args(tag, extra);
    a.push_back("--wait");
    CliResult r = h_.Cli(a, 170);
    if (expect_exit >= 0) {
      EXPECT_EQ(r.exit_code, expect_exit) << r.err;
    }
    json m = r.json();
    EXPECT_TRUE(m.is_object()) << "stdout: " << r.out << "\nstderr: " << r.err;
    return m.is_object() ? m : json::object();
  }

  void ExpectServiceGone(const json& m) {
    EXPECT_TRUE(h_.LiveServicePids().empty()) << "service processes still alive";
    const json stop = m.value("stop_result", json(nullptr));
    ASSERT_TRUE(stop.is_object()) << m.dump(2);
    EXPECT_TRUE(stop.value("stopped", false) || stop.value("already_gone", false)) << stop.dump();
  }

  // How the flush wait ended, for the log (figures, not assertions).
  static void LogFlush(const json& m) {
    const json f = m.value("flush", json::object());
    std::cerr << "[flush] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << ": signal "
              << f.value("signal", "") << ", waited_ms " << f.value("waited_ms", -1) << ", polls "
              << f.value("polls", -1) << std::endl;
  }

  static std::vector<std::string> SortedStatuses(const json& m) {
    std::vector<std::string> v;
    for (const auto& d : m.value("remote_profile_dirs", json::array())) v.push_back(d.value("analysis_status", ""));
    std::sort(v.begin(), v.end());
    return v;
  }

  NpuprofHarness h_;
  std::string model_;
};

TEST_F(TorchProfileE2E, CleanTextRunTp2ThenExportAndAnalyseRoot) {
  StartTarget();
  json m = Collect("clean", {}, 0);
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["workload_status"]["bench_total"], 4);
  EXPECT_EQ(m["rank_count"], 2);
  EXPECT_EQ(m["expected_ranks"], 2);
  ASSERT_EQ(m["remote_profile_dirs"].size(), 2u);
  for (const auto& d : m["remote_profile_dirs"]) {
    EXPECT_EQ(d["analysis_status"], "ok");
    EXPECT_TRUE(d["outputs"]["kernel_details_csv"]["exists"].get<bool>());
    EXPECT_TRUE(d["outputs"]["trace_view_json"]["exists"].get<bool>());
    EXPECT_TRUE(std::filesystem::exists(d["outputs"]["kernel_details_csv"]["path"].get<std::string>()));
  }
  EXPECT_EQ(m["benchmark_results"].size(), 4u);
  EXPECT_EQ(m["followup_result"]["ok"], true);
  EXPECT_EQ(m["start_profile"]["status"], 200);
  EXPECT_EQ(m["stop_profile"]["status"], 200);
  EXPECT_TRUE(m["remote_profile_root"].is_string());
  // Finalise at once: the flush wait ends on the profiler_info signal, no fixed window.
  LogFlush(m);
  EXPECT_EQ(m["flush"]["signal"], "profiler_info") << m["flush"].dump();
  EXPECT_EQ(m["flush"]["flush_timed_out"], false);
  EXPECT_EQ(m["flush"]["min_wait_s"], 0);
  EXPECT_TRUE(m["flush"]["waited_ms"].is_number_integer());
  EXPECT_TRUE(m["error"].is_null());
  EXPECT_TRUE(m.contains("completed_at"));
  ExpectServiceGone(m);

  // export writes DIR/manifest.json
  const std::string out = h_.Dir() + "/export1";
  CliResult ex = h_.Cli({"export", m["run_id"], out});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::ifstream f(out + "/manifest.json");
  json exported = json::parse(f, nullptr, false);
  EXPECT_EQ(exported["analysis_status"], "ok");
  EXPECT_EQ(exported["remote_profile_root"], m["remote_profile_root"]);

  // analyse-root on the root this run produced: re-runs analyse (new markers), same verdicts.
  CliResult ar = h_.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root",
                         m["remote_profile_root"].get<std::string>(), "--expected-ranks", "2", "--wait"});
  EXPECT_EQ(ar.exit_code, 0) << ar.err;
  json am = ar.json();
  EXPECT_EQ(am["analysis_status"], "ok") << am.dump(2);
  EXPECT_EQ(am["rank_count"], 2);
  ASSERT_EQ(am["remote_profile_dirs"].size(), 2u);
  EXPECT_EQ(am["remote_profile_dirs"][0]["analysis_status"], "ok");
  EXPECT_EQ(am["remote_profile_dirs"][0]["analyse"]["reattached"], false);

  // expecting 4 ranks on that root trips rank_count_mismatch
  CliResult ar4 = h_.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root",
                          m["remote_profile_root"].get<std::string>(), "--expected-ranks", "4", "--wait"});
  EXPECT_EQ(ar4.exit_code, 1);
  EXPECT_EQ(ar4.json()["analysis_status"], "rank_count_mismatch");

  // a root that does not exist: no_profile_dirs
  CliResult none = h_.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root", h_.Dir() + "/nowhere",
                           "--expected-ranks", "1", "--wait"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.json()["analysis_status"], "no_profile_dirs");
}

TEST_F(TorchProfileE2E, InvalidInputsRefusedBeforeAnythingRuns) {
  StartTarget();
  struct Case { std::vector<std::string> extra; const char* field; };
  const std::vector<Case> cases = {{{"--mode", "turbo"}, "mode"},
                                   {{"--tp", "0"}, "tp"},
                                   {{"--benchmark-success-threshold", "1.5"}, "benchmark_success_threshold"},
                                   {{"--tag", "a;b"}, "tag"},
                                   {{"--request-kind", "vl"}, "image_path"}};
  for (const auto& c : cases) {
    CliResult r = h_.Cli(Args("x", c.extra));
    EXPECT_EQ(r.exit_code, 2) << c.field;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << r.err;
  }
  CliResult runs = h_.Cli({"runs", "--json", "--kind", "torch-profile"});
  EXPECT_TRUE(runs.json()["runs"].empty()) << runs.out;
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(TorchProfileE2E, FollowupFailing) {
  StartTarget({"--fault", "chat_fail_ratio=0.2"});  // 4 wave requests ok, 5th chat (follow-up) fails
  json m = Collect("followup", {}, 1);
  EXPECT_EQ(m["status"], "failed");
  EXPECT_EQ(m["workload_status"]["status"], "followup_failed");
  EXPECT_EQ(m["workload_status"]["bench_ok"], 4);
  EXPECT_NE(m["error"].get<std::string>().find("followup_failed"), std::string::npos);
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, BelowThreshold) {
  StartTarget({"--fault", "chat_fail_ratio=0.5"});  // 2 of 4 fail
  json m = Collect("below", {}, 1);
  EXPECT_EQ(m["workload_status"]["status"], "benchmark_below_threshold");
  EXPECT_EQ(m["workload_status"]["bench_ok"], 2);
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_NE(m["error"].get<std::string>().find("re-collect required"), std::string::npos);
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, ExactlyAtThresholdIsOk) {
  StartTarget({"--fault", "chat_fail_ratio=0.2"});  // of 5: the 5th fails -> 4/5 = 0.8
  json m = Collect("at", {"--benchmark-total-requests", "5"}, 0);
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["workload_status"]["bench_ok"], 4);
  EXPECT_DOUBLE_EQ(m["workload_status"]["bench_success_rate"].get<double>(), 0.8);
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, RankWithoutProfileDir) {
  StartTarget({"--fault", "rank_no_profile=1"});
  json m = Collect("noprof", {}, 1);
  EXPECT_EQ(m["analysis_status"], "rank_count_mismatch");
  EXPECT_EQ(m["rank_count"], 1);
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  ExpectServiceGone(m);
}

// torch_npu finalises late (rank 1 after 2 s, its data landing in chunks):
// the wait polls until both ranks wrote profiler_info and stopped growing,
// so the service is stopped only then and every rank is analysed whole.
TEST_F(TorchProfileE2E, LateFinaliseIsWaitedFor) {
  StartTarget({"--finalise-delay", "0.3,2"});
  json m = Collect("late", {}, 0);
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  LogFlush(m);
  EXPECT_EQ(m["flush"]["signal"], "profiler_info") << m["flush"].dump();
  EXPECT_EQ(m["flush"]["flush_timed_out"], false);
  EXPECT_EQ(m["flush"]["ranks_finalised"], 2);
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(SortedStatuses(m), (std::vector<std::string>{"ok", "ok"}));
  // The simulator's truth: both ranks finalised, none abandoned by the stop.
  int finalised = 0;
  for (const auto& t : h_.SimTruthFiles())
    for (const auto& sess : t.value("profile_sessions", json::array()))
      for (const auto& r : sess.value("ranks", json::array())) {
        EXPECT_FALSE(r.value("abandoned", true)) << r.dump();
        finalised += r["finalised_at"].is_number() ? 1 : 0;
      }
  EXPECT_EQ(finalised, 2);
  ExpectServiceGone(m);
}

// Rank 1 never finalises: the wait ends at --flush-timeout, the run goes on,
// records the timeout, and the analysis gate marks that rank partial.
TEST_F(TorchProfileE2E, FinaliseNeverComesTimesOutAndTheGateJudges) {
  StartTarget({"--fault", "finalise_hang=1"});
  json m = Collect("hang", {"--flush-timeout", "2"}, 1);
  EXPECT_EQ(m["status"], "failed") << m.dump(2);
  LogFlush(m);
  EXPECT_EQ(m["flush"]["signal"], "timeout") << m["flush"].dump();
  EXPECT_EQ(m["flush"]["flush_timed_out"], true);
  EXPECT_EQ(m["flush"]["ranks_finalised"], 1);
  EXPECT_EQ(m["flush_timeout"], 2);
  EXPECT_EQ(m["analysis_status"], "partial");
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  int unfinalised = 0;
  for (const auto& d : m["remote_profile_dirs"])
    if (d.contains("finalised")) {
      ++unfinalised;
      EXPECT_EQ(d["analysis_status"], "partial") << d.dump();
    }
  EXPECT_EQ(unfinalised, 1);
  const std::string err = m["error"];
  EXPECT_NE(err.find("analysis gate: partial"), std::string::npos) << err;
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, RankWithoutKernelDetails) {
  StartTarget({"--fault", "rank_no_kernel_details=1"});
  json m = Collect("nokd", {}, 1);
  EXPECT_EQ(m["analysis_status"], "missing_kernel_details");
  EXPECT_EQ(SortedStatuses(m), (std::vector<std::string>{"missing_kernel_details", "ok"}));
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, MissingTraceViewIsPartial) {
  StartTarget({"--fault", "rank_no_trace_view=0"});
  json m = Collect("notv", {}, 1);
  EXPECT_EQ(m["analysis_status"], "partial");
  EXPECT_EQ(SortedStatuses(m), (std::vector<std::string>{"ok", "partial"}));
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, NoProfileDirs) {
  StartTarget({"--fault", "chat_fail_ratio=1"});  // nothing succeeds in the window -> no *_ascend_pt
  json m = Collect("nodirs", {}, 1);
  EXPECT_EQ(m["analysis_status"], "no_profile_dirs");
  EXPECT_EQ(m["rank_count"], 0);
  EXPECT_EQ(m["workload_status"]["status"], "followup_failed");
  const std::string err = m["error"];
  EXPECT_NE(err.find("workload gate: followup_failed"), std::string::npos) << err;
  EXPECT_NE(err.find("analysis gate: no_profile_dirs"), std::string::npos) << err;
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, StartProfile500) {
  StartTarget({"--fault", "start_profile_500"});
  json m = Collect("sp500", {}, 1);
  EXPECT_EQ(m["status"], "failed");
  EXPECT_EQ(m["start_profile"]["status"], 500);
  EXPECT_NE(m["error"].get<std::string>().find("start_profile"), std::string::npos);
  EXPECT_TRUE(m["benchmark_results"].empty());
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, NeverReady) {
  StartTarget({"--fault", "never_ready"});
  auto a = Args("nr", {"--health-timeout", "3"});
  a.push_back("--wait");
  CliResult r = h_.Cli(a, 170);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  json m = r.json();
  EXPECT_EQ(m["status"], "failed");
  EXPECT_NE(m["error"].get<std::string>().find("never_ready"), std::string::npos) << m["error"];
  EXPECT_TRUE(m["start_profile"].is_null());
  ExpectServiceGone(m);
}

std::string WritePng(const std::string& path, int w, int h) {
  std::vector<unsigned char> px(static_cast<size_t>(w) * h * 4, 128);
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = PNG_FORMAT_RGBA;
  png_image_write_to_file(&img, path.c_str(), 0, px.data(), 0, nullptr);
  return path;
}

TEST_F(TorchProfileE2E, VlRun) {
  StartTarget();
  const std::string img = WritePng(h_.Dir() + "/cat.png", 320, 200);
  json m = Collect("vl", {"--request-kind", "vl", "--image-path", img, "--image-height", "100",
                          "--prompt-tokens", "16", "--max-model-len", "4096"},
                   0);
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["request_kind"], "vl");
  EXPECT_EQ(m["image_meta"]["height"], 100);
  EXPECT_EQ(m["image_meta"]["width"], 160);
  EXPECT_EQ(m["image_meta"]["source_width"], 320);
  // The simulator counts 256 prompt tokens per image part.
  const json usage = m["benchmark_results"][0]["body"]["usage"];
  EXPECT_GE(usage["prompt_tokens"].get<int>(), 256) << usage;
  ExpectServiceGone(m);
}

TEST_F(TorchProfileE2E, ModesMapToFlags) {
  StartTarget();
  std::map<std::string, std::string> runs;
  for (const char* mode : {"enforce_eager", "full_decode_only", "piecewise_graph"}) {
    auto a = Args(std::string("mode-") + mode, {"--mode", mode});
    CliResult r = h_.Cli(a);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    runs[mode] = r.json()["run_id"];
  }
  const std::map<std::string, std::vector<std::string>> want = {
      {"enforce_eager", {"--enforce-eager"}},
      {"full_decode_only", {"--compilation-config", R"({"cudagraph_mode":"FULL_DECODE_ONLY"})"}},
      {"piecewise_graph", {"--compilation-config", R"({"cudagraph_mode":"PIECEWISE"})"}}};
  for (const auto& [mode, run] : runs) {
    CliResult w = h_.Cli({"watch", run}, 170);
    CliResult mr = h_.Cli({"manifest", run});
    json m = mr.json();
    EXPECT_EQ(m["status"], "ok") << mode << m.dump(2);
    const auto args = m["serve_args"].get<std::vector<std::string>>();
    const auto& flags = want.at(mode);
    auto it = std::search(args.begin(), args.end(), flags.begin(), flags.end());
    EXPECT_NE(it, args.end()) << mode;
    if (mode != "enforce_eager") {
      EXPECT_EQ(std::count(args.begin(), args.end(), "--enforce-eager"), 0);
    }
    // The service really got them.
    const json argv_json = m["service_result"].value("serve_argv", json::array());
    const auto argv = argv_json.get<std::vector<std::string>>();
    EXPECT_NE(std::search(argv.begin(), argv.end(), flags.begin(), flags.end()), argv.end()) << argv_json.dump();
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--profiler-config"), argv.end()) << argv_json.dump();
  }
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(TorchProfileE2E, CancelDuringWorkload) {
  StartTarget({"--set", "delays.token=0.02"});
  auto a = Args("cancel", {"--benchmark-output-tokens", "200", "--benchmark-concurrency", "1",
                           "--benchmark-total-requests", "6"});
  CliResult r = h_.Cli(a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string run = r.json()["run_id"];
  std::string state;
  for (int i = 0; i < 600 && state != "workload"; ++i) {
    state = h_.Cli({"show", run}).json().value("state", "");
    if (state == "completed" || state == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(state, "workload");
  ASSERT_EQ(h_.Cli({"cancel", run}).exit_code, 0);
  CliResult w = h_.Cli({"watch", run}, 170);
  json m = h_.Cli({"manifest", run}).json();
  EXPECT_EQ(m["status"], "cancelled") << m.dump(2);
  ExpectServiceGone(m);
}

}  // namespace
}  // namespace npuprof::testing

namespace npuprof::testing {
namespace {

// The server (with its local workers) dies in the middle of the wave; after a
// restart recovery re-dispatches the outstanding task and the run completes,
// stopping the service it started.
TEST_F(TorchProfileE2E, ServerKilledDuringWorkloadRecovers) {
  StartTarget({"--set", "delays.token=0.01"});
  CliResult r = h_.Cli(Args("kill", {"--benchmark-output-tokens", "150", "--benchmark-concurrency", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string run = r.json()["run_id"];
  std::string state;
  for (int i = 0; i < 600 && state != "workload"; ++i) {
    state = h_.Cli({"show", run}).json().value("state", "");
    if (state == "completed" || state == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(state, "workload");
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());
  h_.Cli({"watch", run}, 170);
  json m = h_.Cli({"manifest", run}).json();
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["analysis_status"], "ok");
  ExpectServiceGone(m);
}

}  // namespace
}  // namespace npuprof::testing
