// The runtime dir check's one look (workers/handlers/service_runtime_dir.cc:
// one `id`, one `stat` for every path of the walk; issue 38): what it
// reports is what the path-by-path walk reports, for every kind of entry,
// in check and create mode. The path-by-path walk is played by a PATH whose
// `stat` refuses more than one path (the look then falls back to it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/service_runtime_dir.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;
using ssh::testing::LocalRun;
using ssh::testing::RunLocalArgv;

// A PATH with this machine's tools, its `stat` taking one path at a time.
struct OnePathStat {
  npuprof::testing::TempDir t;
  OnePathStat() {
    for (const char* tool : {"sh", "id", "mkdir", "env"}) {
      const std::string from = "/usr/bin/" + std::string(tool);
      fs::create_symlink(fs::exists(from) ? from : "/bin/" + std::string(tool), t.path + "/" + tool);
    }
    const std::string stat_bin = fs::exists("/usr/bin/stat") ? "/usr/bin/stat" : "/bin/stat";
    std::ofstream(t.path + "/stat") << "#!/bin/sh\n[ $# -gt 4 ] && exit 1\nexec " << stat_bin << " \"$@\"\n";
    chmod((t.path + "/stat").c_str(), 0755);
  }
};

TEST(RuntimeDirLook, ReportsWhatThePathByPathWalkReportsForEveryKindOfEntry) {
  npuprof::testing::TempDir t;
  const std::string base = t.path + "/base";
  const std::string rt = base + "/r1/service-1";
  fs::create_directories(rt + "/.started");
  for (const std::string& p : {base, base + "/r1", rt}) fs::permissions(p, fs::perms::owner_all);
  std::ofstream(rt + "/launch.json") << "{}";
  std::ofstream(rt + "/empty");
  fs::create_symlink(t.path + "/elsewhere", rt + "/pid");
  ASSERT_EQ(mkfifo((rt + "/fifo").c_str(), 0600), 0);
  if (getuid() == 0) {
    ASSERT_EQ(lchown((rt + "/launch.json").c_str(), 65534, 65534), 0);
  }
  const std::vector<std::string> entries = {"launch.json", "empty", ".started", "pid", "fifo", "absent"};
  OnePathStat one;
  for (const bool create : {false, true}) {
    const auto argv = RuntimeDirArgv(create, base, {"r1", "service-1"}, entries);
    const LocalRun fast = RunLocalArgv(argv, "");
    const LocalRun slow = RunLocalArgv(argv, "", one.t.path);
    ASSERT_EQ(fast.status, 0) << fast.err;
    ASSERT_EQ(slow.status, 0) << slow.err;
    EXPECT_EQ(fast.out, slow.out);
    auto rep = ParseRuntimeDirReport(fast.out);
    ASSERT_TRUE(rep.ok()) << fast.out;
    EXPECT_EQ(rep->uid, static_cast<int64_t>(geteuid()));
    EXPECT_EQ(rep->Entry("launch.json").type, "file");
    EXPECT_EQ(rep->Entry("launch.json").uid, getuid() == 0 ? 65534 : static_cast<int64_t>(getuid()));
    EXPECT_EQ(rep->Entry("empty").type, "file");
    EXPECT_EQ(rep->Entry(".started").type, "dir");
    EXPECT_EQ(rep->Entry("pid").type, "symlink");
    EXPECT_EQ(rep->Entry("fifo").type, "other");
    EXPECT_EQ(rep->Entry("absent").type, "absent");
  }
  // The user's name, as `id -un` gives it.
  const LocalRun name = RunLocalArgv({"id", "-un"}, "");
  const LocalRun fast = RunLocalArgv(RuntimeDirArgv(false, base, {"r1"}, {}), "");
  EXPECT_EQ(fast.out.substr(0, fast.out.find('\n')), "uid " + std::to_string(geteuid()) + " " +
                                                          name.out.substr(0, name.out.find('\n')));
}

TEST(RuntimeDirLook, ACreatedDirIsCheckedOnItsOwnAndARefusalNamesTheFirstBadDir) {
  npuprof::testing::TempDir t;
  const std::string base = t.path + "/base";
  fs::create_directories(base + "/r1");
  fs::permissions(base, fs::perms::owner_all);
  fs::permissions(base + "/r1", fs::perms::owner_all);
  OnePathStat one;
  // r1 exists (the look saw it), service-1 is made by the walk.
  const auto argv = RuntimeDirArgv(true, base, {"r1", "service-1"}, {"pid"});
  const LocalRun made = RunLocalArgv(argv, "");
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_NE(made.out.find("dir ok\nentry absent - pid\n"), std::string::npos) << made.out;
  EXPECT_EQ(fs::status(base + "/r1/service-1").permissions() & fs::perms::all, fs::perms::owner_all);
  // Both r1 and service-1 open to others: the first one is named, nothing below it made.
  fs::remove(base + "/r1/service-1");
  fs::permissions(base + "/r1", fs::perms::all);
  for (const std::string& path : {std::string(), one.t.path}) {
    const LocalRun r = RunLocalArgv(RuntimeDirArgv(true, base, {"r1", "service-1"}, {}), "", path);
    EXPECT_EQ(r.status, 5) << r.out;
    EXPECT_NE(r.err.find(base + "/r1 is writable by group or others (mode 777)"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(base + "/r1/service-1"));
  }
}

}  // namespace
}  // namespace npuprof::workers::service
