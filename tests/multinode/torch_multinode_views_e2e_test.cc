// The views of a multi-node torch-profile run end to end from the npuprof
// command: two simulated hosts, the worker's clock 3.2 s ahead of the real
// one (and of this machine's), tp 2 × dp 2 (each node one DP rank of two
// NPUs, all-reduces between them).
//
//   * report --format json|text|html: the cross-rank view lists every rank
//     of both nodes with its machine and device, device time equal to the
//     simulator's truth, the communication share, the median and the slowest
//     rank;
//   * trace: one process per node, each rank's kernel window moved onto
//     npuprof's clock by its node's recorded offset (the worker's within
//     20 ms of the truth; each node's within its recorded uncertainty);
//     each window where it truly was, to within its node's bound (at least
//     20 ms); every pair of window edges of the two nodes that truly lie
//     farther apart than that is in true order; the offsets in the trace's
//     metadata;
//   * export: every rank of both nodes under one profile root, unique names,
//     ranks.json mapping each to its machine and clock offset, analyse()'s
//     log copied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/multinode/multinode_helpers.h"
#include "tests/support/npuprof_harness.h"
#include "tests/views/trace_validator.h"

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string BaseName(const std::string& p) { return fs::path(p).filename().string(); }

// A rank's truth: its node, its device, its kernel window on real time (µs)
// and the device time its kernel_details.csv sums to.
struct TrueRank {
  std::string machine;
  int device = -1;
  double start_us = 0, end_us = 0;  // real time
  double device_time_us = 0;
};

// rank dir name -> truth, from every node's simulator truth; `offset_s` is
// the clock offset each node was set up with.
std::map<std::string, TrueRank> TruthOfRanks(NpuprofHarness& h, const std::map<std::string, double>& offset_s) {
  std::map<std::string, TrueRank> out;
  for (const auto& [machine, off] : offset_s)
    for (const auto& t : h.SimTruthFiles(machine))
      for (const auto& session : t.value("profile_sessions", json::array()))
        for (const auto& r : session.value("ranks", json::array())) {
          if (!r["kernels_first_start_us"].is_number()) continue;
          TrueRank tr;
          tr.machine = machine;
          tr.device = r.value("device", -1);
          tr.start_us = r["kernels_first_start_us"].get<double>() - off * 1e6;
          tr.end_us = r["kernels_last_end_us"].get<double>() - off * 1e6;
          for (const auto& k : r.value("kernels", json::array())) tr.device_time_us += k.value("total_us", 0.0);
          out[BaseName(r.value("dir", ""))] = tr;
        }
  return out;
}

class TorchMultiNodeViewsE2E : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(h_.Start().ok()); }
  NpuprofHarness h_;
};

TEST_F(TorchMultiNodeViewsE2E, CrossRankViewOneClockInTheTraceAndOneProfileRootOnExport) {
  constexpr double kAhead = 3.2;
  // Long enough requests (10 ms per token) that each rank's window lasts well
  // over the tolerance, so the nodes' windows truly overlap by far more than it.
  ASSERT_TRUE(h_.AddNode("head", {"--devices", "2", "--token-delay", "0.01"}).ok());
  ASSERT_TRUE(h_.AddNode("worker", {"--devices", "2", "--token-delay", "0.01", "--clock-offset-s", "3.2"}).ok());
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "torch-profile", "--node", "head", "--node", "worker", "--model", model,
                        "--served-model-name", "m", "--tp", "2", "--dp", "2", "--tag", "mnviews", "--mode",
                        "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "16",
                        "--benchmark-total-requests", "8", "--benchmark-concurrency", "2", "--prompt-tokens", "64",
                        "--wait"},
                       300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  const std::string run = m.value("run_id", "");
  ASSERT_EQ(m["rank_count"], 4) << m.dump();
  const auto truth = TruthOfRanks(h_, {{"head", 0.0}, {"worker", kAhead}});
  ASSERT_EQ(truth.size(), 4u) << "the simulator's truth holds every rank's kernel window";

  // ---- the cross-rank view: every rank of both nodes, against the truth.
  CliResult rep = h_.Cli({"report", run, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json cross = rep.json()["cross_rank"];
  ASSERT_EQ(cross["ranks"].size(), 4u) << cross.dump();
  std::set<std::string> machines;
  double slowest_us = 0;
  for (const auto& row : cross["ranks"]) {
    const std::string dir = row["rank_dir"].get<std::string>();
    ASSERT_TRUE(truth.count(dir)) << dir;
    const TrueRank& t = truth.at(dir);
    machines.insert(row["machine"].get<std::string>());
    EXPECT_EQ(row["machine"], t.machine) << dir;
    EXPECT_EQ(row["device_id"], t.device) << dir;
    EXPECT_NEAR(row["device_time_us"].get<double>(), t.device_time_us, 1.0) << dir;
    EXPECT_GT(row["comm_share_pct"].get<double>(), 0.0) << "tp 2: all-reduces on every rank";
    EXPECT_LT(row["comm_share_pct"].get<double>(), 100.0);
    EXPECT_TRUE(row["top_kernel"].is_object());
    slowest_us = std::max(slowest_us, t.device_time_us);
  }
  EXPECT_EQ(machines, (std::set<std::string>{"head", "worker"}));
  ASSERT_TRUE(cross["slowest"].is_object());
  EXPECT_NEAR(cross["slowest"]["device_time_us"].get<double>(), slowest_us, 1.0);
  EXPECT_TRUE(cross["median_device_time_us"].is_number());
  CliResult text = h_.Cli({"report", run, "--format", "text", "--lang", "en"});
  EXPECT_NE(text.out.find("cross-rank view"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("slowest rank: " + cross["slowest"]["machine"].get<std::string>()), std::string::npos)
      << text.out;
  const std::string html_file = h_.Dir() + "/out/mn.html";
  CliResult html = h_.Cli({"report", run, "--format", "html", "--lang", "en", "-o", html_file});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const std::string page = ReadAll(html_file);
  EXPECT_NE(page.find("id=\"cross-rank\""), std::string::npos);
  EXPECT_NE(page.find("<tr class=\"slowest\">"), std::string::npos);
  for (const auto& row : cross["ranks"]) EXPECT_NE(page.find(row["rank_dir"].get<std::string>()), std::string::npos);

  // ---- the trace: both nodes on one clock.
  const std::string trace_file = h_.Dir() + "/out/mn.trace.json";
  CliResult tr = h_.Cli({"trace", run, "-o", trace_file});
  ASSERT_EQ(tr.exit_code, 0) << tr.err;
  EXPECT_EQ(tr.json()["nodes"], 2);
  const std::string trace_text = ReadAll(trace_file);
  TraceCheck c = ValidateChromeTrace(trace_text);
  for (const auto& p : c.problems) ADD_FAILURE() << p;
  const json doc = json::parse(trace_text);
  const double origin_us = doc["otherData"]["origin_us"].get<double>();
  const json& offs = doc["otherData"]["clock_offsets"];
  ASSERT_EQ(offs.size(), 2u) << doc["otherData"].dump();
  EXPECT_EQ(offs[1]["machine"], "worker");
  std::cerr << "measured clock offsets (the worker's truth: +" << kAhead * 1000 << " ms): " << offs.dump() << "\n";
  EXPECT_NEAR(offs[1]["offset_ms"].get<double>(), kAhead * 1000, 20.0) << offs.dump();
  EXPECT_TRUE(offs[1]["uncertainty_ms"].is_number());
  EXPECT_EQ(offs[1]["measured"], "start");
  // How far each node's times may be off: the measure's own bound (half its
  // round trip; a loaded machine's `date` runs late in it), at least 20 ms.
  std::map<std::string, double> tol_us;
  for (const auto& o : offs) {
    const std::string mc = o["machine"].get<std::string>();
    const double truth_ms = mc == "worker" ? kAhead * 1000 : 0.0;
    const double unc_ms = o["uncertainty_ms"].get<double>();
    EXPECT_LE(std::abs(o["offset_ms"].get<double>() - truth_ms), unc_ms + 1.0) << o.dump();
    tol_us[mc] = std::max(20.0, unc_ms + 1.0) * 1000.0;
  }
  EXPECT_NE(c.process_names[2000].find("node 0 head"), std::string::npos);
  EXPECT_NE(c.process_names[2001].find("node 1 worker (clock +3"), std::string::npos) << c.process_names[2001];
  // Each window edge on npuprof's clock, with its true time.
  struct Edge {
    std::string machine, what;
    double trace_us, true_us;
  };
  std::vector<Edge> edges;
  for (const auto& e : c.events) {
    if (e["ph"] != "X" || (e["pid"] != 2000 && e["pid"] != 2001)) continue;
    const std::string dir = e["args"]["rank_dir"].get<std::string>();
    ASSERT_TRUE(truth.count(dir)) << dir;
    const TrueRank& t = truth.at(dir);
    EXPECT_EQ(e["pid"].get<int>(), t.machine == "head" ? 2000 : 2001) << dir;
    const double start = origin_us + e["ts"].get<double>(), end = start + e["dur"].get<double>();
    EXPECT_NEAR(start, t.start_us, tol_us[t.machine]) << dir << " starts when it truly did, to within its clock's bound";
    EXPECT_NEAR(end, t.end_us, tol_us[t.machine]) << dir;
    edges.push_back({t.machine, dir + " start", start, t.start_us});
    edges.push_back({t.machine, dir + " end", end, t.end_us});
  }
  ASSERT_EQ(edges.size(), 8u);
  // Every pair of edges of different nodes that truly lie farther apart
  // than both clocks' bounds (plus 10 ms) is in the same order in the trace
  // (uncorrected, the worker's would all come 3.2 s late: after every edge
  // of the head's).
  size_t compared = 0;
  for (const auto& a : edges)
    for (const auto& b : edges) {
      if (a.machine == b.machine || b.true_us - a.true_us <= tol_us[a.machine] + tol_us[b.machine] + 10e3) continue;
      ++compared;
      EXPECT_LT(a.trace_us, b.trace_us) << a.machine << " " << a.what << " truly before " << b.machine << " "
                                        << b.what;
    }
  EXPECT_GE(compared, 4u) << "the nodes' windows overlap: head start < worker end and worker start < head end";

  // ---- export: one profile root for the deployment.
  const std::string out = h_.Dir() + "/out/export";
  CliResult ex = h_.Cli({"export", run, out});
  ASSERT_EQ(ex.exit_code, 0) << ex.err << ex.out;
  EXPECT_TRUE(fs::exists(out + "/manifest.json"));
  const json plan = json::parse(ReadAll(out + "/ranks.json"));
  ASSERT_EQ(plan["ranks"].size(), 4u) << plan.dump();
  std::set<std::string> names;
  for (const auto& row : plan["ranks"]) {
    const std::string name = row["rank_dir"].get<std::string>();
    names.insert(name);
    const std::string dir = out + "/profile_root/" + name;
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
    EXPECT_TRUE(fs::exists(dir + "/analyse.log")) << dir;
    const json rec = json::parse(ReadAll(dir + "/npuprof_rank.json"));
    EXPECT_EQ(rec["path"], row["remote_path"]);
    EXPECT_TRUE(rec["kernel_summary"].is_object());
    ASSERT_TRUE(truth.count(row["original_name"].get<std::string>()));
    EXPECT_EQ(row["machine"], truth.at(row["original_name"].get<std::string>()).machine);
    // The offset the trace used for that node.
    for (const auto& o : offs) {
      if (o["machine"] == row["machine"]) {
        EXPECT_EQ(row["clock_offset_ms"], o["offset_ms"]) << row.dump();
      }
    }
    EXPECT_NE(ReadAll(dir + "/analyse.log").find("Start parsing profiling data"), std::string::npos);
  }
  EXPECT_EQ(names.size(), 4u);
  ExpectNothingLeft(h_);
}

}  // namespace
}  // namespace npuprof::testing
