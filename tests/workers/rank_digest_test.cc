// The rank digest (workers/profiling/rank_digest.h): the decoder refuses
// garbage, too much, invalid UTF-8, a wrong type or range with an error
// naming the field, and never throws; the program itself, run with the
// local python3 through its argv, starts analyse() (a stand-in torch_npu),
// waits for it and reports the outputs in the same call, re-attaches
// without running it twice, and says "not finished" when the wait budget
// passes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/kernel_summary.h"
#include "tests/support/temp_dir.h"
#include "workers/profiling/rank_digest.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::profiling {
namespace {

using nlohmann::json;
using npuprof::testing::TempDir;
using npuprof::testing::WriteTree;

json Minimal() {
  return json{{"v", 1}, {"launch", "started"}, {"polls", 3}, {"waited_ms", 40}, {"finished", false}, {"alive", true}};
}

json WithOutputs() {
  json j = Minimal();
  j["finished"] = true;
  j["alive"] = false;
  j["exit_code"] = 0;
  j["log"] = {{"size", 5}, {"head", "ab\u00ffc\n"}};
  j["kernel_details"] = {{"exists", true},  {"size", 100},        {"valid", true}, {"columns", 5},
                         {"bytes_read", 100}, {"data_rows_checked", 1},
                         {"summary",
                          {{"data_rows", 1},
                           {"counted_rows", 1},
                           {"skipped_rows", 0},
                           {"other_rows", 0},
                           {"distinct_kernels", 1},
                           {"total_us", 2.5},
                           {"top", {{{"name", "k"}, {"type", "T"}, {"core", "C"}, {"count", 1}, {"total_us", 2.5},
                                     {"mean_us", 2.5}, {"max_us", 2.5}, {"share_pct", 100.0}}}},
                           {"by_type", {{{"type", "T"}, {"core", "C"}, {"count", 1}, {"total_us", 2.5},
                                         {"mean_us", 2.5}, {"max_us", 2.5}, {"share_pct", 100.0}}}}}}};
  j["trace_view"] = {{"exists", true}, {"size", 2}, {"valid", true}, {"event_count", 0}};
  j["device_id"] = 3;
  return j;
}

TEST(RankDigest, DecodesAWaitAndAFinishedRank) {
  auto w = ParseRankDigest(Minimal().dump() + "\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_FALSE(w->finished);
  EXPECT_TRUE(w->alive);
  EXPECT_FALSE(w->has_outputs);
  EXPECT_EQ(w->launch, "started");

  auto d = ParseRankDigest(WithOutputs().dump());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->has_outputs);
  EXPECT_EQ(d->exit_code, 0);
  EXPECT_EQ(d->device_id, 3);
  EXPECT_EQ(*d->log, std::string("ab\xFF" "c\n"));  // latin-1 code points back to bytes
  EXPECT_EQ(d->kernel_details.columns, 5u);
  ASSERT_TRUE(d->kernel_summary);
  EXPECT_EQ((*d->kernel_summary)["top"][0]["name"], "k");
  EXPECT_EQ(d->trace_view.event_count, 0u);
}

TEST(RankDigest, TheLogsHeadAndTailKeepTheOmittedCount) {
  json j = WithOutputs();
  j["log"] = {{"size", 100}, {"head", "HEAD"}, {"tail", "TAIL"}};
  auto d = ParseRankDigest(j.dump());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(*d->log, "HEAD" + ssh::OmittedMarker(92) + "TAIL");
}

TEST(RankDigest, GarbageIsAnErrorNamingWhatIsWrong) {
  auto expect_error = [](const std::string& out, const std::string& part) {
    auto d = ParseRankDigest(out);
    ASSERT_FALSE(d.ok()) << out.substr(0, 200);
    EXPECT_NE(d.status().message().find(part), std::string::npos) << d.status().message();
  };
  expect_error("", "printed nothing");
  expect_error("Traceback (most recent call last):\n", "not valid JSON");
  expect_error("[1,2]", "must be an object");
  expect_error("{\"v\":1,\"x\":\"\xFF\"}", "not valid UTF-8");
  expect_error(std::string(kMaxRankDigestBytes + 1, ' '), "more than");
  expect_error(std::string(100, '[') + std::string(100, ']'), "nested deeper");
  expect_error("{\"v\":2}", "digest.v");
  expect_error("{\"v\":1,\"finished\":\"yes\",\"alive\":false}", "digest.finished must be true or false");
  expect_error("{\"v\":1,\"finished\":true,\"alive\":false}", "digest.exit_code is missing");
  expect_error("{\"v\":1,\"finished\":true,\"alive\":false,\"exit_code\":99999999999999}", "digest.exit_code");
  json j = WithOutputs();
  j["kernel_details"]["summary"]["top"][0]["total_us"] = -1;
  expect_error(j.dump(), "digest.kernel_details.summary.top[0].total_us");
  j = WithOutputs();
  j["kernel_details"]["summary"]["counted_rows"] = "1";
  expect_error(j.dump(), "digest.kernel_details.summary.counted_rows must be a whole number");
  j = WithOutputs();
  j["kernel_details"]["summary"]["top"] = json::array();
  for (int i = 0; i < 31; ++i) j["kernel_details"]["summary"]["top"].push_back(j["kernel_details"]["summary"]["by_type"][0]);
  expect_error(j.dump(), "more than 30");
  j = WithOutputs();
  j["kernel_details"]["summary"]["top"][0]["name"] = std::string(2000, 'n');
  expect_error(j.dump(), "top[0].name has 2000 bytes");
  j = WithOutputs();
  j["kernel_details"]["summary"]["first_start_us"] = 5;
  expect_error(j.dump(), "only one of first_start_us");
  j = WithOutputs();
  j["log"]["head"] = "\u20ac";
  expect_error(j.dump(), "digest.log.head holds a character above U+00FF");
  j = WithOutputs();
  j.erase("trace_view");
  expect_error(j.dump(), "digest.trace_view is missing");
  j = WithOutputs();
  j["trace_view"]["size"] = -4;
  expect_error(j.dump(), "digest.trace_view.size");
}

TEST(RankDigest, TheArgvCarriesTheEmbeddedProgramAndTheLaunchScript) {
  const auto argv = RankDigestArgv("/d x", "/d x/.m", std::chrono::milliseconds(2500), false, true);
  ASSERT_EQ(argv.size(), 9u);
  EXPECT_EQ(argv[0], "python3");
  EXPECT_EQ(argv[2], std::string(RankDigestSource()));
  EXPECT_NE(argv[2].find("def digest("), std::string::npos);
  EXPECT_EQ(argv[4], "/d x");
  EXPECT_EQ(argv[6], "2500");
  EXPECT_EQ(argv[7], "0");
  EXPECT_EQ(argv[8], DetachedAnalyseScript());
  EXPECT_EQ(RankDigestArgv("/d", "/d/.m", std::chrono::milliseconds(-5), true, false)[6], "0");
  EXPECT_EQ(RankDigestArgv("/d", "/d/.m", std::chrono::milliseconds(0), true, false)[8], "");
}

// A stand-in torch_npu whose analyse() counts its runs, sleeps as long as
// $SLEEP_FILE says and writes the outputs of a rank.
constexpr const char* kFakeAnalyse = R"PY(import os, time
def analyse(path):
    with open(os.path.join(path, "runs"), "a") as f:
        f.write("x")
    d = os.environ.get("SLEEP_FILE")
    if d and os.path.exists(d):
        time.sleep(float(open(d).read()))
    out = os.path.join(path, "ASCEND_PROFILER_OUTPUT")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "kernel_details.csv"), "w") as f:
        f.write("Name,Type,Accelerator Core,Start Time(us),Duration(us)\n")
        for i in range(1000):
            f.write("k%d,T%d,AI_CORE,%d,%s\n" % (i % 7, i % 3, 1000 + i, 1.25 + i % 5))
    with open(os.path.join(out, "trace_view.json"), "w") as f:
        f.write('[{"ph":"M"},{"ph":"X"},{"ph":"X"}]')
    print("analysed", path)
)PY";

class RankDigestProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path.empty());
    WriteTree(tmp_.path + "/py/torch_npu/__init__.py", "");
    WriteTree(tmp_.path + "/py/torch_npu/profiler/__init__.py", "");
    WriteTree(tmp_.path + "/py/torch_npu/profiler/profiler.py", kFakeAnalyse);
    dir_ = tmp_.path + "/rank 0_ascend_pt";
    std::filesystem::create_directories(dir_ + "/PROF_000001_x/device_5");
    marker_ = AnalyseMarker(dir_, "t1.analyse");
  }
  ~RankDigestProgram() override {
    // A detached analyse() still sleeping is ended (its pid file names it).
    std::ifstream pid(marker_ + ".pid");
    long p = 0;
    if (pid >> p && p > 0) {
      const std::string id = std::to_string(p);
      std::system(("pkill -P " + id + " 2>/dev/null; kill " + id + " 2>/dev/null").c_str());
    }
  }
  Result<RankDigest> Run(std::chrono::milliseconds budget, bool final, bool launch) {
    const std::string cmd = "PYTHONPATH=" + ssh::ShellQuote(tmp_.path + "/py") + " SLEEP_FILE=" +
                            ssh::ShellQuote(tmp_.path + "/sleep") + " " +
                            ssh::BuildCommand(RankDigestArgv(dir_, marker_, budget, final, launch));
    FILE* f = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
    return ParseRankDigest(out);
  }
  std::string Runs() {
    std::ifstream in(dir_ + "/runs");
    std::string s;
    in >> s;
    return s;
  }
  TempDir tmp_;
  std::string dir_, marker_;
};

TEST_F(RankDigestProgram, StartsWaitsAndDigestsInOneCallThenReattaches) {
  auto d = Run(std::chrono::seconds(60), false, true);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->launch, "started");
  EXPECT_TRUE(d->finished);
  EXPECT_EQ(d->exit_code, 0);
  ASSERT_TRUE(d->has_outputs);
  EXPECT_EQ(d->device_id, 5);
  ASSERT_TRUE(d->log);
  EXPECT_NE(d->log->find("analysed"), std::string::npos);
  EXPECT_TRUE(d->kernel_details.exists);
  EXPECT_EQ(d->kernel_details.valid, true);
  EXPECT_EQ(d->kernel_details.data_rows, 1000u);
  EXPECT_EQ(d->trace_view.event_count, 3u);
  ASSERT_TRUE(d->kernel_summary);
  // The same summary as the C++ reference of the same file.
  std::ifstream in(dir_ + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  KernelSummaryBuilder b;
  ASSERT_TRUE(b.Feed(ss.str()).ok());
  EXPECT_EQ(*d->kernel_summary, KernelSummaryJson(*b.Finish()));
  EXPECT_EQ(d->kernel_details.bytes_read, ss.str().size());

  auto again = Run(std::chrono::seconds(60), false, true);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->launch, "done");
  EXPECT_TRUE(again->finished);
  EXPECT_EQ(Runs(), "x") << "analyse() ran once";
}

TEST_F(RankDigestProgram, ABudgetThatPassesSaysNotFinishedThenAFinalCallReadsTheOutputs) {
  WriteTree(tmp_.path + "/sleep", "30");
  auto d = Run(std::chrono::milliseconds(300), false, true);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->launch, "started");
  EXPECT_FALSE(d->finished);
  EXPECT_TRUE(d->alive);
  EXPECT_FALSE(d->has_outputs);
  EXPECT_GE(d->polls, 2);

  auto attach = Run(std::chrono::milliseconds(100), false, true);
  ASSERT_TRUE(attach.ok()) << attach.status().message();
  EXPECT_EQ(attach->launch, "running");

  auto final = Run(std::chrono::milliseconds(0), true, false);
  ASSERT_TRUE(final.ok()) << final.status().message();
  EXPECT_FALSE(final->finished);
  EXPECT_TRUE(final->alive);
  ASSERT_TRUE(final->has_outputs);
  EXPECT_FALSE(final->kernel_details.exists);
  EXPECT_EQ(Runs(), "x");
}

TEST_F(RankDigestProgram, AVanishedProcessIsReportedWithItsOutputs) {
  WriteTree(marker_ + ".pid", "999999999\n");
  auto d = Run(std::chrono::seconds(30), false, false);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_FALSE(d->finished);
  EXPECT_FALSE(d->alive);
  EXPECT_TRUE(d->has_outputs);
  EXPECT_EQ(d->polls, 1);
}

TEST_F(RankDigestProgram, ALaunchThatFailsReportsItsExitAndStderr) {
  dir_ = tmp_.path + "/missing";
  marker_ = dir_ + "/.m";
  auto d = Run(std::chrono::seconds(5), false, true);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(d->launch_exit);
  EXPECT_EQ(*d->launch_exit, 4);
  EXPECT_NE(d->launch_stderr.find("no such directory"), std::string::npos) << d->launch_stderr;
}

}  // namespace
}  // namespace npuprof::profiling
