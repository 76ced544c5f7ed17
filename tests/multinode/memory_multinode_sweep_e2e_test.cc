// A memory-profile sweep over a two-node deployment, end to end from the
// npuprof command against two simulated hosts (NpuprofHarness::AddNode):
// `--grid env.HCCL_BUFFSIZE=100,400` with `--node head --node worker --tp 1
// --dp 2`. Every point is a full two-node memory-profile: each node ran one
// vLLM per point with the point's HCCL_BUFFSIZE, every device of every point
// is measured on its own node (its HCCL component equal to that node's truth
// for that point), the sweep's report compares the points position by
// position naming each position's machine, and nothing is left running on
// either node. And `advise` on a two-node memory-profile whose HCCL buffers
// are too large: the remedy's sweep spans the same two nodes, and
// `advise --verify` runs it and judges its point against the prediction.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Component(const json& dev, const std::string& key) {
  for (const auto& c : dev["components"])
    if (c["key"] == key) return c;
  return nullptr;
}

TEST(MemoryMultiNodeSweepE2E, AnHcclBuffsizeSweepOverTwoNodesMeasuresEveryNodeOfEveryPoint) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--export-delay", "0.3"}).ok());
  for (const char* n : {"head", "worker"})
    ASSERT_TRUE(h.AddNode(n, {"--devices", "2", "--export-delay", "0.3"}).ok()) << n;
  const std::string model = h.MakeModel({"--layers", "2"});
  ASSERT_FALSE(model.empty());
  CliResult r = h.Cli({"submit", "sweep", "--kind", "memory-profile", "--node", "head", "--node", "worker", "--model",
                       model, "--tp", "1", "--dp", "2", "--grid", "env.HCCL_BUFFSIZE=100,400", "--run-id", "msw",
                       "--wait"},
                      600);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 4000);

  // The truth of every vLLM each node ran, by its HCCL_BUFFSIZE.
  std::map<std::string, std::map<int, json>> truth;  // machine -> buffsize -> truth
  for (const char* n : {"head", "worker"}) {
    const auto files = h.SimTruthFiles(n);
    ASSERT_EQ(files.size(), 2u) << n << ": one vLLM per point";
    for (const auto& t : files) truth[n][t.value("hccl_buffsize_mb", -1)] = t;
  }
  const std::vector<std::pair<std::string, int>> points = {{"msw-p0", 100}, {"msw-p1", 400}};
  for (const auto& [run, size] : points) {
    SCOPED_TRACE(run);
    const json m = h.Cli({"manifest", run}).json();
    ASSERT_TRUE(m.is_object());
    EXPECT_EQ(m["status"], "ok") << m.dump().substr(0, 2000);
    EXPECT_EQ(m["env"]["HCCL_BUFFSIZE"], std::to_string(size));
    const json& devices = m["report"]["devices"];
    ASSERT_EQ(devices.size(), 2u) << devices.dump().substr(0, 1000);
    std::map<std::string, int> per_machine;
    for (const auto& dev : devices) {
      const std::string machine = dev.value("machine", "");
      ++per_machine[machine];
      ASSERT_TRUE(truth.count(machine) && truth[machine].count(size)) << machine << " " << size;
      const json& comps = truth[machine][size]["per_device"][std::to_string(dev.value("device_id", -1))]["components_mb"];
      ASSERT_TRUE(comps.is_object()) << machine << " " << dev["device_id"];
      const json hccl = Component(dev, "hccl");
      ASSERT_TRUE(hccl.is_object() && hccl["value_mb"].is_number()) << dev.dump().substr(0, 500);
      EXPECT_NEAR(hccl["value_mb"].get<double>(), comps["hccl"].get<double>(), 1.0) << machine;
      const json kv = Component(dev, "kv_cache");
      EXPECT_NEAR(kv["value_mb"].get<double>(), comps["kv_cache"].get<double>(), 1.0) << machine;
    }
    EXPECT_EQ(per_machine, (std::map<std::string, int>{{"head", 1}, {"worker", 1}}));
  }
  // The larger buffers take more HCCL memory on every node: 2 x 300 MB more.
  for (const char* n : {"head", "worker"}) {
    const double small = truth[n][100]["per_device"]["0"]["components_mb"]["hccl"].get<double>();
    const double large = truth[n][400]["per_device"]["0"]["components_mb"]["hccl"].get<double>();
    EXPECT_NEAR(large - small, 600.0, 1.0) << n;
  }
  // The sweep's report compares the two points.
  CliResult rep = h.Cli({"report", "msw", "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err << rep.out.substr(0, 2000);
  // The points compared by position, each position naming its machine in
  // every point; the HCCL delta is that node's truth delta.
  const json cmp = rep.json();
  ASSERT_EQ(cmp["devices"].size(), 2u) << rep.out.substr(0, 2000);
  const std::vector<std::string> node_of = {"head", "worker"};
  for (size_t p = 0; p < 2; ++p) {
    const json& pos = cmp["devices"][p];
    EXPECT_EQ(pos["machines"], json::array({node_of[p], node_of[p]})) << pos.dump().substr(0, 500);
    const json hccl = Component(pos, "hccl");
    ASSERT_TRUE(hccl.is_object()) << pos.dump().substr(0, 500);
    const auto& t = truth[node_of[p]];
    const std::string dev = std::to_string(pos["device_ids"][0].get<int>());
    EXPECT_NEAR(hccl["delta_mb"][1].get<double>(),
                t.at(400)["per_device"][dev]["components_mb"]["hccl"].get<double>() -
                    t.at(100)["per_device"][dev]["components_mb"]["hccl"].get<double>(),
                1.0);
  }
  CliResult text = h.Cli({"report", "msw", "--format", "text", "--lang", "en"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("A=worker:"), std::string::npos) << text.out.substr(0, 3000);
  const auto left = h.TargetProcessesAfter(30);
  EXPECT_TRUE(left.empty()) << left.size() << " processes left on the simulated hosts";
  CliResult verify = h.Cli({"verify", "msw"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST(MemoryMultiNodeSweepE2E, AdviseOnATwoNodeRunSweepsTheRemedyOverTheSameNodes) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--export-delay", "0.3"}).ok());
  for (const char* n : {"head", "worker"})
    ASSERT_TRUE(h.AddNode(n, {"--devices", "2", "--export-delay", "0.3"}).ok()) << n;
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  CliResult r = h.Cli({"submit", "memory-profile", "--node", "head", "--node", "worker:1", "--model", model, "--tp",
                       "1", "--dp", "2", "--env", "HCCL_BUFFSIZE=1000", "--max-tokens", "8", "--run-id", "mh",
                       "--wait"},
                      300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 4000);
  const auto head_truth = h.SimTruthFiles("head");
  ASSERT_EQ(head_truth.size(), 1u);
  const double hccl_truth = head_truth[0]["per_device"]["0"]["components_mb"]["hccl"].get<double>();

  CliResult a = h.Cli({"advise", "mh"});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const json adv = a.json();
  json f;
  for (const auto& x : adv["findings"])
    if (x["rule"] == "hccl_buffers_large") f = x;
  ASSERT_TRUE(f.is_object()) << a.out;
  EXPECT_NEAR(f["cause_detail"]["hccl_mb"].get<double>(), hccl_truth, 1e-3) << f.dump(2);
  const json& sug = f["suggestion"];
  const std::string command = sug["command"];
  EXPECT_NE(command.find("--node head:0 --node worker:1"), std::string::npos) << command;
  EXPECT_EQ(command.find("--machine"), std::string::npos) << command;

  const std::string sweep = sug["verify_run_id"];
  CliResult v = h.Cli({"advise", "mh", "--verify", "--wait"}, 400);
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  // The point ran on both nodes with the remedy's HCCL_BUFFSIZE; its report
  // has a device on each, each equal to its node's truth for that service.
  const json point = h.Cli({"manifest", sweep + "-p0"}).json();
  ASSERT_TRUE(point.is_object());
  EXPECT_EQ(point["status"], "ok");
  std::map<std::string, json> point_truth;
  for (const char* n : {"head", "worker"}) {
    for (const auto& t : h.SimTruthFiles(n))
      if (t.value("hccl_buffsize_mb", -1) == 200) point_truth[n] = t;
    ASSERT_TRUE(point_truth.count(n)) << n << ": no vLLM with HCCL_BUFFSIZE=200";
  }
  ASSERT_EQ(point["report"]["devices"].size(), 2u);
  for (const auto& dev : point["report"]["devices"]) {
    const std::string machine = dev.value("machine", "");
    ASSERT_TRUE(point_truth.count(machine)) << machine;
    const std::string id = std::to_string(dev.value("device_id", -1));
    EXPECT_NEAR(Component(dev, "hccl")["value_mb"].get<double>(),
                point_truth[machine]["per_device"][id]["components_mb"]["hccl"].get<double>(), 1.0)
        << machine;
  }
  EXPECT_EQ(point["report"]["devices"][1]["machine"], "worker");
  EXPECT_EQ(point["report"]["devices"][1]["device_id"], 1) << "the worker's NPU as the run asked";
  EXPECT_NEAR(sug["predicted"]["hccl_mb"].get<double>(),
              point_truth["head"]["per_device"]["0"]["components_mb"]["hccl"].get<double>(), 1e-3);
  const json verified = v.json();
  json vf;
  for (const auto& x : verified["findings"])
    if (x["rule"] == "hccl_buffers_large") vf = x["verification"];
  EXPECT_EQ(vf["status"], "ok") << v.out;
  EXPECT_EQ(vf["matched"], true) << vf.dump(2);
  const auto left = h.TargetProcessesAfter(30);
  EXPECT_TRUE(left.empty()) << left.size() << " processes left on the simulated hosts";
}

}  // namespace
}  // namespace npuprof::testing
