// serve --watch-hbm end to end: `npuprof submit serve --watch-hbm 0.1`
// against the simulated target over a real sshd. Two services on one target:
// a steady one, then (after the target's config gains a leak:
// tests/sim/README.md "HBM leak") a leaking one. The leaking service is
// flagged growing within 10 samples with a slope within 10 % of the
// simulator's truth; the steady one is flagged at no sample of 100. A tenth
// of a second between samples (the shortest interval) keeps the test short;
// the leak's time scale makes its slope in MB per hour of the host's clock
// large enough to be told from npu-smi's whole MB over a few seconds. Both
// runs' logs replay (`npuprof verify`) after their stop, and the leaking
// run's HTML report carries its verdict.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <cmath>
#include <thread>

#include "statemachine/hbm_drift.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class HbmWatchE2E : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure())
      for (const std::string& run : runs_) {
        CliResult ev = h_.Cli({"events", run});
        std::cerr << "events of " << run << ":\n" << ev.out.substr(0, 20000) << ev.err << std::endl;
      }
    for (const std::string& run : runs_) h_.Cli({"stop", run, "--force", "--wait"});
    h_.Stop();
  }
  std::string Serve(const std::string& device) {
    CliResult r = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--devices", device,
                          "--watch-hbm", "0.1", "--wait"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const json j = r.json();
    const std::string run = j.is_object() ? j.value("run_id", "") : "";
    if (!run.empty()) runs_.push_back(run);
    EXPECT_EQ(j.value("state", ""), "ready") << r.out;
    return run;
  }
  json Show(const std::string& run) { return h_.Cli({"show", run}).json(); }
  // Polls `show` until the run's watch has at least n samples.
  json WaitForSamples(const std::string& run, int64_t n, int timeout_s) {
    json s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      s = Show(run);
      if (s.contains("hbm_watch") && s["hbm_watch"].value("samples", int64_t{0}) >= n) return s;
      if (s.value("terminal", false)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  // The simulator's truth file of the service whose pid is `pid`.
  json TruthOf(const json& show) {
    const int64_t pid = show["service"].value("pid", int64_t{0});
    for (const json& t : h_.SimTruthFiles())
      if (t.value("main_pid", int64_t{0}) == pid) return t;
    return nullptr;
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

TEST_F(HbmWatchE2E, LeakingServiceIsFlaggedAndSteadyOneIsNot) {
  ASSERT_TRUE(h_.Start().ok());
  model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model_.empty());

  const std::string steady = Serve("0");
  ASSERT_FALSE(steady.empty());
  // From now on services start leaking: 36 MB per hour at a time scale of
  // 1000, i.e. 36000 MB per hour of the host's clock (10 MB/s).
  ASSERT_TRUE(h_.UpdateTarget({"--set", R"(leak={"mb_per_h": 36, "time_scale": 1000})"}).ok());
  const std::string leaking = Serve("1");
  ASSERT_FALSE(leaking.empty());

  // The leaking service: flagged growing by its 10th sample, slope within 10 % of the truth.
  const json ls = WaitForSamples(leaking, 10, 120);
  ASSERT_TRUE(ls.contains("hbm_watch")) << ls.dump(2);
  const json lw = ls["hbm_watch"];
  ASSERT_GE(lw["samples"].get<int64_t>(), 10) << lw.dump(2);
  const json truth = TruthOf(ls);
  ASSERT_TRUE(truth.is_object() && truth["leak"].is_object()) << "no leak in the simulator's truth";
  const double truth_slope = truth["leak"]["slope_mb_per_h"].get<double>();
  EXPECT_EQ(truth_slope, 36000);
  EXPECT_EQ(truth["devices"], json({1}));
  ASSERT_EQ(lw["devices"].size(), 1u) << "only the service's devices are sampled";
  const json& dev = lw["devices"][0];
  EXPECT_EQ(dev["device_id"], 1);
  EXPECT_EQ(dev["verdict"], "growing") << lw.dump(2);
  ASSERT_FALSE(dev["first_growing_sample"].is_null()) << lw.dump(2);
  EXPECT_LE(dev["first_growing_sample"].get<int64_t>(), 10);
  EXPECT_GE(dev["first_growing_sample"].get<int64_t>(), sm::kHbmDriftMinSamples);
  EXPECT_NEAR(dev["slope_mb_per_h"].get<double>(), truth_slope, 0.1 * truth_slope) << lw.dump(2);
  EXPECT_EQ(lw["verdict"], "growing");
  EXPECT_EQ(dev["text"].get<std::string>().rfind("growing: +", 0), 0u);
  // The samples are the evidence: the device's readings rise between the first and the last.
  ASSERT_GE(lw["recent"].size(), 10u);
  EXPECT_GT(lw["recent"].back()["devices"][0]["used_mb"].get<int64_t>(),
            lw["recent"][0]["devices"][0]["used_mb"].get<int64_t>());
  EXPECT_EQ(lw["recent"][0]["clock"], "target");

  EXPECT_EQ(lw["interval_s"], 0.1);
  // `report` gives the same verdict (json, text and html).
  const CliResult rep = h_.Cli({"report", leaking, "--format", "text", "--lang", "en"});
  EXPECT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("growing: +"), std::string::npos) << rep.out;
  const std::string html_file = h_.Dir() + "/watch.html";
  const CliResult html = h_.Cli({"report", leaking, "--format", "html", "--lang", "en", "-o", html_file});
  EXPECT_EQ(html.exit_code, 0) << html.out << html.err;
  std::ifstream in(html_file);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("growing: +"), std::string::npos) << page.substr(0, 2000);
  EXPECT_NE(page.find("<polyline"), std::string::npos) << "the samples and the fitted line";
  ASSERT_EQ(h_.Cli({"stop", leaking, "--wait"}).exit_code, 0);
  const json stopped = Show(leaking);
  EXPECT_EQ(stopped.value("state", ""), "completed");
  const int64_t samples_at_stop = stopped["hbm_watch"]["samples"];
  EXPECT_EQ(Show(leaking)["hbm_watch"]["samples"], samples_at_stop) << "sampling ends with the service";
  const CliResult vl = h_.Cli({"verify", leaking});
  EXPECT_EQ(vl.exit_code, 0) << vl.out << vl.err;

  // The steady service: 100 samples, never flagged.
  const json ss = WaitForSamples(steady, 100, 400);
  ASSERT_TRUE(ss.contains("hbm_watch")) << ss.dump(2);
  const json sw = ss["hbm_watch"];
  ASSERT_GE(sw["samples"].get<int64_t>(), 100) << sw.dump(2);
  const json steady_truth = TruthOf(ss);
  ASSERT_TRUE(steady_truth.is_object());
  EXPECT_TRUE(steady_truth["leak"].is_null()) << "the steady service started before the leak was configured";
  ASSERT_EQ(sw["devices"].size(), 1u);
  EXPECT_EQ(sw["devices"][0]["device_id"], 0);
  EXPECT_EQ(sw["devices"][0]["verdict"], "steady") << sw.dump(2);
  EXPECT_TRUE(sw["devices"][0]["first_growing_sample"].is_null()) << "flagged at some sample: " << sw.dump(2);
  EXPECT_EQ(sw["verdict"], "steady");
  EXPECT_EQ(sw["recent"].size(), std::min<size_t>(sw["samples"].get<size_t>(), 120u)) << "the last samples kept";
  // A hundred samples and more replay to what the server served.
  ASSERT_EQ(h_.Cli({"stop", steady, "--wait"}).exit_code, 0);
  const CliResult vs = h_.Cli({"verify", steady});
  EXPECT_EQ(vs.exit_code, 0) << vs.out << vs.err;
}

// --watch-hbm's interval is checked where it is given: a number of seconds,
// 0 or 0.1..86400.
TEST_F(HbmWatchE2E, AnIntervalOutOfRangeIsRefusedNamingTheField) {
  ASSERT_TRUE(h_.Start().ok());
  model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  for (const char* bad : {"0.05", "-1", "86401"}) {
    CliResult r = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--devices", "0",
                          "--watch-hbm", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("watch_hbm_s"), std::string::npos) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("0.1..86400"), std::string::npos) << bad << ": " << r.err;
  }
  CliResult runs = h_.Cli({"runs", "--json", "--kind", "serve"});
  EXPECT_TRUE(runs.json()["runs"].empty()) << "nothing was submitted: " << runs.out;
}

// --watch-workload: a wave of chat requests before every sample; a service
// leaking a known MB per request shows that slope against the requests
// answered.
TEST_F(HbmWatchE2E, GrowthPerRequestUnderTheWorkload) {
  ASSERT_TRUE(h_.Start({"--set", R"(leak={"mb_per_request": 5})"}).ok());
  model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model_.empty());
  CliResult r = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--devices", "0",
                        "--watch-hbm", "0.2", "--watch-workload", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string run = r.json().value("run_id", "");
  runs_.push_back(run);
  const json s = WaitForSamples(run, 8, 180);
  ASSERT_TRUE(s.contains("hbm_watch")) << s.dump(2);
  const json w = s["hbm_watch"];
  ASSERT_GE(w["samples"].get<int64_t>(), 8) << w.dump(2);
  EXPECT_GE(w["requests"].get<int64_t>(), 7 * 8) << "8 requests per wave between the samples";
  const json truth = TruthOf(s);
  ASSERT_TRUE(truth.is_object() && truth["leak"].is_object());
  const double per_request = truth["leak"]["mb_per_request"].get<double>();
  EXPECT_EQ(per_request, 5);
  const json& dev = w["devices"][0];
  ASSERT_TRUE(dev["per_request"].is_object()) << w.dump(2);
  EXPECT_NEAR(dev["per_request"]["mb_per_request"].get<double>(), per_request, 0.1 * per_request) << w.dump(2);
  EXPECT_EQ(dev["verdict"], "growing") << "40 MB per interval of 0.2 s and a wave";
}

}  // namespace
}  // namespace npuprof::testing
