// memory-profile --operator-memory end to end: `npuprof submit memory-profile
// --operator-memory` against the simulated target (a real loopback sshd),
// whose ground truth (state/truth/*.json, profile_sessions[].ranks[].
// operator_memory) names each rank's operators at the peak, their sizes and
// the fragmentation there. The report's top operator and its size equal the
// truth, fragmentation within 1 MB; a rank whose operator_memory.csv is
// broken is said so in its device's entry while everything else stands.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <chrono>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class OperatorMemoryE2E : public ::testing::Test {
 protected:
  void StartHarness(const std::vector<std::string>& sim_args = {}) {
    std::vector<std::string> args = {"--export-delay", "0.2"};
    args.insert(args.end(), sim_args.begin(), sim_args.end());
    Status st = h_.Start(args);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure() && !run_.empty()) std::cerr << "events of " << run_ << ":\n" << h_.Cli({"events", run_}).out;
    h_.Stop();
  }
  static int FreePort() { return 23000 + (::getpid() % 2000) * 3; }
  // A tp-2 --operator-memory profile on `port`, waited for; its `show` JSON.
  json Run(int port) {
    CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                          std::to_string(port), "--operator-memory", "--operator-memory-top", "3", "--wait"},
                         240);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    json m = r.json();
    if (m.is_object()) run_ = m.value("run_id", "");
    return m;
  }
  // device id -> the truth of its rank's operator memory.
  json TruthByDevice(int port) {
    json out = json::object();
    for (const auto& t : h_.SimTruthFiles()) {
      if (t.value("port", 0) != port) continue;
      for (const auto& session : t["profile_sessions"])
        for (const auto& rank : session["ranks"])
          if (rank.contains("operator_memory")) out[std::to_string(rank["device"].get<int>())] = rank["operator_memory"];
    }
    return out;
  }
  NpuprofHarness h_;
  std::string model_, run_;
};

TEST_F(OperatorMemoryE2E, TopOperatorAndFragmentationAtThePeakEqualTheTruth) {
  StartHarness();
  const int port = FreePort();
  const json m = Run(port);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok");
  const json truth = TruthByDevice(port);
  ASSERT_EQ(truth.size(), 2u) << "the simulator profiled both ranks' memory";

  CliResult rj = h_.Cli({"report", run_, "--format", "json"});
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  const json report = rj.json();
  ASSERT_EQ(report["devices"].size(), 2u);
  for (const auto& dev : report["devices"]) {
    const std::string id = std::to_string(dev["device_id"].get<int>());
    ASSERT_TRUE(truth.contains(id)) << id;
    const json& t = truth[id];
    const json& om = dev["operator_memory"];
    ASSERT_TRUE(om.is_object()) << dev.dump();
    EXPECT_EQ(om["status"], "ok") << om.dump();
    ASSERT_EQ(om["peak_operators"].size(), 3u) << om.dump();
    EXPECT_EQ(om["peak_operators"][0]["name"], t["top_operator"]);
    EXPECT_NEAR(om["peak_operators"][0]["size_mb"].get<double>(), t["top_size_mb"].get<double>(), 0.001);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(om["peak_operators"][i]["name"], t["peak_operators"][i]["name"]) << i;
    EXPECT_NEAR(om["fragmentation_mb"].get<double>(), t["fragmentation_mb"].get<double>(), 1.0);
    EXPECT_NEAR(om["peak_allocated_mb"].get<double>(), t["peak_allocated_mb"].get<double>(), 0.01);
    EXPECT_NEAR(om["peak_reserved_mb"].get<double>(), t["peak_reserved_mb"].get<double>(), 0.01);
    EXPECT_NEAR(om["peak_at_us"].get<double>(), t["peak_at_us"].get<double>(), 1.0);
    EXPECT_EQ(om["peak_operators"][0]["evidence"]["file"], "operator_memory.csv");
    EXPECT_GT(om["peak_operators"][0]["evidence"]["row"].get<int>(), 0);
    // The usual attribution still stands beside it.
    EXPECT_FALSE(dev["components"].empty());
  }
  // The text report (zh and en) names the top operator.
  const std::string top = truth.begin().value()["top_operator"];
  for (const char* lang : {"zh", "en"}) {
    CliResult rt = h_.Cli({"report", run_, "--format", "text", "--lang", lang});
    EXPECT_NE(rt.out.find(top), std::string::npos) << lang << ": " << rt.out;
  }
  // The digest is evidence like the rest: in the manifest's files and in
  // the export, byte for byte, with the limit analyse() ran under.
  const json manifest = h_.Cli({"manifest", run_}).json();
  ASSERT_TRUE(manifest["files"].contains("operator_memory_digest.json")) << manifest["files"].dump();
  const std::string out_dir = h_.Dir() + "/export-om";
  CliResult ex = h_.Cli({"export", run_, out_dir});
  ASSERT_EQ(ex.exit_code, 0) << ex.out << ex.err;
  std::ifstream in(out_dir + "/operator_memory_digest.json", std::ios::binary);
  std::stringstream digest;
  digest << in.rdbuf();
  const json d = json::parse(digest.str(), nullptr, false);
  ASSERT_TRUE(d.is_object()) << digest.str();
  EXPECT_EQ(d["ranks"].size(), 2u);
  EXPECT_GE(d["analyse_limit"]["limit"].get<int>(), 1) << d["analyse_limit"].dump();
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(OperatorMemoryE2E, ABrokenRanksCsvIsSaidForThatDeviceAndTheRestStands) {
  StartHarness({"--fault", R"(operator_memory_csv={"1": "not_utf8"})"});
  const int port = FreePort() + 1;
  const json m = Run(port);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok");
  const json truth = TruthByDevice(port);
  const json report = h_.Cli({"report", run_, "--format", "json"}).json();
  ASSERT_EQ(report["devices"].size(), 2u);
  int broken = 0, good = 0;
  for (const auto& dev : report["devices"]) {
    const std::string id = std::to_string(dev["device_id"].get<int>());
    const json& om = dev["operator_memory"];
    ASSERT_TRUE(truth.contains(id));
    if (truth[id]["fault"] == "not_utf8") {
      ++broken;
      EXPECT_EQ(om["status"], "partial") << om.dump();
      EXPECT_TRUE(om["peak_operators"].empty());
      ASSERT_FALSE(om["problems"].empty());
      EXPECT_NE(om["problems"][0].get<std::string>().find("not UTF-8"), std::string::npos) << om.dump();
      // memory_record.csv of that rank still gives the peak and fragmentation.
      EXPECT_NEAR(om["fragmentation_mb"].get<double>(), truth[id]["fragmentation_mb"].get<double>(), 1.0);
    } else {
      ++good;
      EXPECT_EQ(om["status"], "ok") << om.dump();
      EXPECT_EQ(om["peak_operators"][0]["name"], truth[id]["top_operator"]);
    }
    EXPECT_FALSE(dev["components"].empty());
  }
  EXPECT_EQ(broken, 1);
  EXPECT_EQ(good, 1);
}

}  // namespace
}  // namespace npuprof::testing
