// The multi-node bench's CPU model (bench/cpu_cgroups.h): the parsing, the
// refusal where cgroup v1 is missing, the stale groups removed, the quota
// written; and, where /sys/fs/cgroup/cpu is writable (root, cgroup v1), a
// child process really moved into a capped group and back out at the end.
#include "bench/cpu_cgroups.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace npuprof::bench {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cpu-cgroups-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(CpuCgroupsParse, CpuStatReadsTheThrottlingCounters) {
  auto st = ParseCpuStat("nr_periods 120\nnr_throttled 7\nthrottled_time 350000000\nnr_bursts 0\nburst_time 0\n");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->nr_periods, 120);
  EXPECT_EQ(st->nr_throttled, 7);
  EXPECT_EQ(st->throttled_ns, 350000000);
}

TEST(CpuCgroupsParse, CpuStatRefusesAMissingOrBadCounter) {
  EXPECT_FALSE(ParseCpuStat("nr_periods 1\nnr_throttled 0\n").ok());
  EXPECT_FALSE(ParseCpuStat("").ok());
  auto bad = ParseCpuStat("nr_periods 1\nnr_throttled x\nthrottled_time 0\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nr_throttled"), std::string::npos);
}

TEST(CpuCgroupsParse, CpusIsAPositiveNumberOfCoresAndAnErrorNamesTheField) {
  auto v = ParseCpus("0.75", "--host-cpu");
  ASSERT_TRUE(v.ok());
  EXPECT_DOUBLE_EQ(*v, 0.75);
  for (const char* bad : {"0", "-1", "abc", "", "0.5x", "1000", "nan"}) {
    auto r = ParseCpus(bad, "--host-cpu");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--host-cpu"), std::string::npos) << r.status().message();
  }
}

TEST(CpuCgroups, RefusedWithThePathWhereNoCgroupV1IsMounted) {
  TempDir root;
  auto g = CpuCgroups::Create(true, 20000, root.path.string());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find(root.path.string() + "/cpu"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("run without it"), std::string::npos) << g.status().message();
}

// A stand-in hierarchy (plain directories with the files the check looks for):
// the quota and period are written, and a gone bench's group is removed.
TEST(CpuCgroups, WritesTheQuotaAndRemovesAGoneBenchsGroups) {
  TempDir root;
  for (const char* h : {"cpu", "cpuacct"}) fs::create_directories(root.path / h);
  std::ofstream(root.path / "cpu" / "cpu.cfs_quota_us") << "-1";
  std::ofstream(root.path / "cpu" / "cgroup.procs") << "";
  std::ofstream(root.path / "cpuacct" / "cpuacct.usage") << "0";
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  const fs::path stale = root.path / "cpu" / ("npuprof-bench-" + std::to_string(gone));
  fs::create_directories(stale);
  {
    auto g = CpuCgroups::Create(true, 20000, root.path.string());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_FALSE(fs::exists(stale));
    ASSERT_TRUE((*g)->AddGroup("n0", 0.75).ok());
    EXPECT_EQ(ReadAll((*g)->CpuDir("n0") + "/cpu.cfs_quota_us"), "15000");
    EXPECT_EQ(ReadAll((*g)->CpuDir("n0") + "/cpu.cfs_period_us"), "20000");
    ASSERT_TRUE((*g)->AddGroup("acct", 0).ok());
    EXPECT_EQ(ReadAll((*g)->CpuDir("acct") + "/cpu.cfs_quota_us"), "-1");
  }
}

// The real thing, where this process may write cgroup v1 (root); skipped elsewhere.
TEST(CpuCgroups, MovesAProcessTreeIntoACappedGroupAndOutAtTheEnd) {
  if (::access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) != 0 || ::access("/sys/fs/cgroup/cpu", W_OK) != 0 ||
      ::access("/sys/fs/cgroup/cpuacct/cpuacct.usage", F_OK) != 0)
    GTEST_SKIP() << "no writable cgroup v1 cpu/cpuacct here";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // a parent with a grandchild, both waiting to be killed
    if (::fork() == 0) {
      ::close(ready[0]);
      (void)!::write(ready[1], "g", 1);
      ::pause();
      ::_exit(0);
    }
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);  // the grandchild exists
  ::close(ready[0]);
  std::vector<pid_t> tree = ProcessTree(child);
  ASSERT_EQ(tree.size(), 2u);
  std::string dir;
  {
    auto g = CpuCgroups::Create(true);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE((*g)->AddGroup("host", 0.5).ok());
    dir = (*g)->CpuDir("host");
    EXPECT_EQ(ReadAll(dir + "/cpu.cfs_quota_us"), "10000\n");
    ASSERT_TRUE((*g)->Move("host", child).ok());
    const std::string group = "npuprof-bench-" + std::to_string(::getpid()) + "/host";
    for (pid_t p : tree) {
      const std::string cg = ReadAll("/proc/" + std::to_string(p) + "/cgroup");
      EXPECT_NE(cg.find("cpu:/" + group), std::string::npos) << cg;
      EXPECT_NE(cg.find("cpuacct:/" + group), std::string::npos) << cg;
    }
    auto u = (*g)->Usage("host");
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_GE(u->cpu_ns, 0);
  }
  EXPECT_FALSE(fs::exists(dir));
  for (pid_t p : tree) {
    const std::string cg = ReadAll("/proc/" + std::to_string(p) + "/cgroup");
    EXPECT_EQ(cg.find("npuprof-bench-"), std::string::npos) << cg;
  }
  for (pid_t p : tree) ::kill(p, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

// Accounting only: the processes go into the cpuacct hierarchy and nowhere
// in the cpu hierarchy (where a group would change how they are scheduled).
TEST(CpuCgroups, AccountingOnlyLeavesTheCpuHierarchyAlone) {
  if (::access("/sys/fs/cgroup/cpuacct/cpuacct.usage", F_OK) != 0 || ::access("/sys/fs/cgroup/cpuacct", W_OK) != 0)
    GTEST_SKIP() << "no writable cgroup v1 cpuacct here";
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  {
    auto g = CpuCgroups::Create(false);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE((*g)->AddGroup("host", 0.5).ok());
    EXPECT_FALSE(fs::exists("/sys/fs/cgroup/cpu/npuprof-bench-" + std::to_string(::getpid())));
    ASSERT_TRUE((*g)->Move("host", child).ok());
    const std::string cg = ReadAll("/proc/" + std::to_string(child) + "/cgroup");
    EXPECT_NE(cg.find("cpuacct:/npuprof-bench-"), std::string::npos) << cg;
    EXPECT_EQ(cg.find(":cpu:/npuprof-bench-"), std::string::npos) << cg;
    auto u = (*g)->Usage("host");
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_EQ(u->throttled_ns, 0);
  }
  EXPECT_FALSE(fs::exists("/sys/fs/cgroup/cpuacct/npuprof-bench-" + std::to_string(::getpid())));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace npuprof::bench
