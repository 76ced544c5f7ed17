// torch-profile's capture controls and budget check end to end (`npuprof`
// CLI -> server -> local workers -> sshd -> simulated target): the capture
// flags reach the simulated vLLM's profiler config (its ground-truth record
// of what it was given) and analyse() its export type; a simulated vLLM
// whose ProfilerConfig lacks a field refuses the run before the launch; a
// simulated free disk under the estimate refuses it naming both numbers.
// The refusals are checked to have launched nothing: no service process,
// no instance record on the target, no service.launch task.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class CaptureE2E : public ::testing::Test {
 protected:
  void StartTarget(const std::vector<std::string>& sim_args) {
    Status st = h_.Start(sim_args, 2);
    ASSERT_TRUE(st.ok()) << st.message();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override { h_.Stop(); }

  // Runs with --wait; the manifest.
  json Collect(const std::string& tag, const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"submit", "torch-profile", "--machine", "sim1", "--model", model_,
                                  "--served-model-name", "qwen", "--tp", "2", "--tag", tag, "--mode",
                                  "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "4",
                                  "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                                  "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                                  "--profile-control-timeout", "30", "--request-timeout", "30"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("--wait");
    CliResult r = h_.Cli(a, 200);
    json m = r.json();
    EXPECT_TRUE(m.is_object()) << "stdout: " << r.out << "\nstderr: " << r.err;
    return m.is_object() ? m : json::object();
  }

  // The run's tasks of `kind`, from `npuprof show RUN`.
  int TasksOf(const std::string& run, const std::string& kind) {
    CliResult r = h_.Cli({"show", run}, 60);
    const json s = r.json();
    EXPECT_TRUE(s.is_object()) << r.out << r.err;
    int n = 0;
    for (const json& t : s.value("tasks", json::array())) n += t.value("kind", "") == kind;
    return n;
  }

  // Nothing of the service exists: no process, no instance on the target, no launch task.
  void ExpectNothingLaunched(const json& m) {
    EXPECT_TRUE(h_.LiveServicePids().empty()) << "a service process runs";
    EXPECT_TRUE(h_.SimTruthFiles().empty()) << "the simulated vLLM was started";
    EXPECT_TRUE(m["service_result"].is_null()) << m["service_result"].dump();
    EXPECT_TRUE(m["launch_record"].is_null()) << m["launch_record"].dump();
    EXPECT_EQ(TasksOf(m.value("run_id", ""), "service.launch"), 0);
    EXPECT_EQ(TasksOf(m.value("run_id", ""), "torch_profile.capture_check"), 1);
  }

  NpuprofHarness h_;
  std::string model_;
};

// The flags reach vLLM's profiler config and analyse() its export type. Each
// rank's raw data is made ~51 MB (200,000 rows x 256 bytes), over the
// estimate's 38.25 MiB per rank for this workload (18 steps less the one
// delayed = 17, x 4 layers x 64 KiB x 3 x 1.5 x 2 for with_stack,
// record_shapes and profile_memory), so the summary says the capture
// outgrew its estimate.
TEST_F(CaptureE2E, FlagsReachTheProfilerConfigAndAnalyse) {
  StartTarget({"--set", "scale.rows_per_rank=200000", "--set", "scale.raw_bytes_per_row=256"});
  const json m = Collect("cap", {"--profile-delay-iterations", "1", "--profile-max-iterations", "50",
                                 "--record-shapes", "true", "--profile-memory", "true", "--with-stack",
                                 "--analyse-export-type", "db"});
  ASSERT_EQ(m["status"], "ok") << m.dump(2);
  const auto truth = h_.SimTruthFiles();
  ASSERT_EQ(truth.size(), 1u);
  const json pc = truth[0].value("profiler_config", json(nullptr));
  ASSERT_TRUE(pc.is_object()) << truth[0].dump();
  EXPECT_EQ(pc["profiler"], "torch");
  EXPECT_EQ(pc["delay_iterations"], 1);
  EXPECT_EQ(pc["max_iterations"], 50);
  EXPECT_EQ(pc["torch_profiler_record_shapes"], true);
  EXPECT_EQ(pc["torch_profiler_with_memory"], true);
  EXPECT_EQ(pc["torch_profiler_with_stack"], true);
  EXPECT_FALSE(pc.contains("torch_profiler_data_simplification"));

  EXPECT_EQ(m["capture_flags"]["profile_max_iterations"], 50);
  EXPECT_EQ(m["capture_flags"]["analyse_export_type"], "db");
  ASSERT_TRUE(m["capture_check"].is_object()) << m.dump(2);
  EXPECT_TRUE(m["capture_check"]["ok"].get<bool>());
  EXPECT_EQ(m["capture_check"]["layers"], 4);
  EXPECT_EQ(m["capture_check"]["steps"], 17);
  EXPECT_TRUE(m["capture_check"]["disk_free_bytes"].is_number_integer());
  ASSERT_TRUE(m["capture_note"].is_string()) << m.dump(2);
  EXPECT_NE(m["capture_note"].get<std::string>().find("outgrew its estimate"), std::string::npos);

  // analyse() of every rank was given export_type "db" (the target's record of each call).
  ASSERT_EQ(m["remote_profile_dirs"].size(), 2u);
  for (const json& d : m["remote_profile_dirs"]) {
    std::ifstream in(d.value("path", "") + "/.sim_analyse_invocations");
    std::string line;
    int calls = 0;
    while (std::getline(in, line)) {
      const json rec = json::parse(line, nullptr, false);
      EXPECT_EQ(rec.value("export_type", ""), "db") << line;
      ++calls;
    }
    EXPECT_EQ(calls, 1) << d.dump();
  }
}

// An older vLLM: its ProfilerConfig has no delay_iterations/max_iterations.
TEST_F(CaptureE2E, AnOldVllmRefusesBeforeTheLaunch) {
  StartTarget({"--set", R"(vllm.profiler_fields=["profiler","torch_profiler_dir","torch_profiler_with_stack"])"});
  const json m = Collect("old", {"--profile-max-iterations", "20"});
  ASSERT_EQ(m["status"], "failed") << m.dump(2);
  const std::string error = m.value("error", "");
  EXPECT_NE(error.find("capture_unsupported"), std::string::npos) << error;
  EXPECT_NE(error.find("--profile-max-iterations"), std::string::npos) << error;
  EXPECT_NE(error.find("no max_iterations"), std::string::npos) << error;
  EXPECT_NE(error.find("nothing was launched"), std::string::npos) << error;
  ExpectNothingLaunched(m);
}

// 1 MiB free under the runtime dir against this workload's estimate
// (9 MiB raw x 20 = 180 MiB): refused, naming both numbers.
TEST_F(CaptureE2E, TooLittleFreeDiskRefusesNamingBothNumbers) {
  StartTarget({"--set", "host.disk_free_mb=1"});
  const json m = Collect("disk", {"--budget-check", "true"});
  ASSERT_EQ(m["status"], "failed") << m.dump(2);
  const std::string error = m.value("error", "");
  EXPECT_NE(error.find("capture_budget"), std::string::npos) << error;
  EXPECT_NE(error.find("capture estimate 180.0 MiB exceeds free disk 1.0 MiB under /"), std::string::npos)
      << error;
  EXPECT_EQ(m["capture_check"]["disk_free_bytes"], 1 << 20);
  ExpectNothingLaunched(m);
}

}  // namespace
}  // namespace npuprof::testing
