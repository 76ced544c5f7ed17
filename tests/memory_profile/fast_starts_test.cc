// The interpreter starts on memory-profile's path made cheaper (issue 38,
// docs/PERFORMANCE.md run 56), run locally (no SSH):
// * the inference's program, which reads the target's clock, runs with -S
//   and still reads the clock the host's sitecustomize gives `-c` programs
//   (the simulator's shifted clock, a real host's patched one);
// * the preflight's Python check runs beside `msprof --help`, not after it,
//   and its output keeps the format (the help's line before the Python's).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>

#include "tests/ssh/local_shell.h"
#include "tests/support/fake_tools_bin.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/preflight_tools.h"
#include "workers/profiling/target_http.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

TEST(FastStarts, TheClockReadingProgramSkipsSiteButImportsTheHostsSitecustomize) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  // A host whose clock is 1000 s ahead for `-c` programs (as the simulator's
  // sitecustomize shifts it), and which records whether site ran.
  npuprof::testing::WriteTree(t.path + "/py/sitecustomize.py",
                              "import sys, time\n"
                              "if sys.argv[:1] == ['-c']:\n"
                              "    real = time.time_ns\n"
                              "    time.time_ns = lambda: real() + 1000 * 10**9\n");
  profiling::TargetHttpPlan plan;
  plan.port = 9;  // nobody listens: the request is an error, the clock is still read
  plan.clock = true;
  plan.timeout = std::chrono::seconds(5);
  plan.requests.push_back({.path = "/v1/completions", .body = "{}"});
  auto argv = profiling::TargetHttpArgv(plan);
  ASSERT_TRUE(argv.has_value());
  ASSERT_GE(argv->size(), 3u);
  EXPECT_EQ((*argv)[1], "-S");  // no site-packages' .pth files on the path
  std::vector<std::string> run = {"env", "PYTHONPATH=" + t.path + "/py"};
  run.insert(run.end(), argv->begin(), argv->end());
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const auto r = RunLocalArgv(run, "");
  auto d = profiling::ParseTargetHttpOutput(r.out, r.status, r.err, plan);
  ASSERT_TRUE(d.ok()) << d.status().ToString() << "\n" << r.out << r.err;
  ASSERT_TRUE(d->has_value());
  ASSERT_TRUE((*d)->before_ns.has_value());
  EXPECT_GE(*(*d)->before_ns, now_ns + 900'000'000'000) << "the host's sitecustomize was not imported";
  EXPECT_LE(*(*d)->before_ns, now_ns + 1100'000'000'000);
}

// A bin dir with the tools the tool check and the fakes use.
std::string Bin(const std::string& root, const std::vector<std::pair<std::string, std::string>>& fakes) {
  return npuprof::testing::FakeToolsBin(root, {"sh", "base64", "head", "sleep"}, fakes);
}

TEST(FastStarts, ThePreflightsPythonCheckRunsBesideMsprofsHelp) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  const std::string mark = t.path + "/python-started";
  // msprof's help answers only once the Python check has started (it waits
  // up to 30 s for its mark): run one after the other, the help would say
  // "alone" instead.
  const std::string bin =
      Bin(t.path, {{"msprof", "i=0\nwhile [ ! -e '" + mark + "' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
                              "if [ -e '" + mark + "' ]; then echo 'Usage: msprof --output=DIR (beside)'; "
                              "else echo 'Usage: msprof --output=DIR (alone)'; fi\n"},
                   {"python3", ": > '" + mark + "'\necho /opt/py/bin/python3\n"}});
  const auto r = RunLocalArgv(PreflightToolsArgv(), "", bin);
  ASSERT_EQ(r.status, 0) << r.err;
  auto p = ParsePreflightTools(r.out);
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << r.out;
  EXPECT_TRUE(p->msprof_found);
  EXPECT_NE(p->help_text.find("(beside)"), std::string::npos) << p->help_text;
  EXPECT_EQ(p->python, "/opt/py/bin/python3");
}

TEST(FastStarts, ThePreflightWithoutAPythonStillSaysSoAfterTheHelp) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  const std::string bin = Bin(t.path, {{"msprof", "echo 'Usage: msprof'\nexit 0\n"}, {"python3", "exit 1\n"}});
  const auto r = RunLocalArgv(PreflightToolsArgv(), "", bin);
  ASSERT_EQ(r.status, 0) << r.err;
  auto p = ParsePreflightTools(r.out);
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << r.out;
  EXPECT_NE(p->help_text.find("Usage: msprof"), std::string::npos);
  EXPECT_TRUE(p->python.empty());
}

}  // namespace
}  // namespace npuprof::workers
