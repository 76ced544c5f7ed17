// memory.preflight in one command (workers/handlers/preflight_in_one.h), run
// in a local shell whose PATH holds only what a test target has: the tools'
// check, the wrap script's dir check and its write. The script is written
// only after the tools passed and the dir was accepted, never through a
// symbolic link or over what is not a regular file; the split of the output
// refuses what is out of its format.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/fake_tools_bin.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/preflight_in_one.h"
#include "workers/handlers/preflight_tools.h"
#include "workers/handlers/service_runtime_dir.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

const char* kGoodTools[][2] = {{"msprof", "echo 'Usage: msprof --output=DIR'\n"},
                               {"python3", "echo /opt/py/bin/python3\n"}};

// A bin dir with the shell tools the command uses, and the given fakes.
std::string Bin(const std::string& root, const std::vector<std::pair<std::string, std::string>>& fakes) {
  return npuprof::testing::FakeToolsBin(root, {"sh", "base64", "head", "id", "stat", "mkdir", "chmod"}, fakes);
}

std::string GoodBin(const std::string& root) {
  return Bin(root, {{kGoodTools[0][0], kGoodTools[0][1]}, {kGoodTools[1][0], kGoodTools[1][1]}});
}

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Ran {
  ssh::testing::LocalRun run;
  PreflightInOne split;
};

// The command for <root>/rt/run/msprof_wrap.sh (base <root>/rt).
Ran RunIt(const std::string& root, const std::string& bin, const std::string& text = "#!/bin/bash\necho 'it $1'\n") {
  const std::string base = root + "/rt";
  const auto argv = PreflightInOneArgv(service::RuntimeDirArgv(true, base, {"run"}, {"msprof_wrap.sh"}),
                                       base + "/run/msprof_wrap.sh", text);
  Ran r;
  r.run = RunLocalArgv(argv, "", bin);
  auto s = SplitPreflightInOne(r.run.out);
  EXPECT_TRUE(s.ok()) << s.status().ToString() << "\n" << r.run.out;
  if (s.ok()) r.split = *s;
  return r;
}

TEST(PreflightInOne, ToolsDirAndScriptInOneCommand) {
  TempDir t;
  const std::string text = "#!/bin/bash\nexec msprof --application=\"bash $1\" 'q'\n";
  const Ran r = RunIt(t.path, GoodBin(t.path), text);
  EXPECT_EQ(r.run.status, 0) << r.run.err;
  auto tools = ParsePreflightTools(r.split.tools_out);
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  EXPECT_EQ(tools->python, "/opt/py/bin/python3");
  ASSERT_TRUE(r.split.dir_checked);
  auto report = service::ParseRuntimeDirReport(r.split.dir_out);
  ASSERT_TRUE(report.ok()) << report.status().ToString() << "\n" << r.split.dir_out;
  EXPECT_TRUE(report->exists);
  EXPECT_EQ(report->Entry("msprof_wrap.sh").type, "absent");  // as it was before the write
  EXPECT_EQ(r.split.write, PreflightInOne::Write::kWritten);
  const std::string wrap = t.path + "/rt/run/msprof_wrap.sh";
  EXPECT_EQ(Slurp(wrap), text);  // every byte, quotes and $ included
  struct stat st {};
  ASSERT_EQ(stat(wrap.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((t.path + "/rt/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // Again (a re-delivered preflight): the same script written over its own.
  const Ran again = RunIt(t.path, GoodBin(t.path + "/2"), text);
  EXPECT_EQ(again.split.write, PreflightInOne::Write::kWritten);
  auto report2 = service::ParseRuntimeDirReport(again.split.dir_out);
  ASSERT_TRUE(report2.ok());
  EXPECT_EQ(report2->Entry("msprof_wrap.sh").type, "file");
  EXPECT_EQ(Slurp(wrap), text);
}

TEST(PreflightInOne, MissingToolsEndItBeforeTheDirIsTouched) {
  for (const auto& fakes : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"python3", "echo /usr/bin/python3\n"}},                 // no msprof
           {{"msprof", "echo Usage\n"}, {"python3", "exit 1\n"}}}) {  // no torch_npu
    TempDir t;
    const Ran r = RunIt(t.path, Bin(t.path, fakes));
    EXPECT_EQ(r.run.status, 0) << r.run.err;
    EXPECT_TRUE(ParsePreflightTools(r.split.tools_out).ok()) << r.split.tools_out;
    EXPECT_FALSE(r.split.dir_checked);
    EXPECT_EQ(r.split.write, PreflightInOne::Write::kNotTried);
    EXPECT_FALSE(fs::exists(t.path + "/rt"));
  }
}

TEST(PreflightInOne, NeverWritesThroughALinkOrOverWhatIsNotAFile) {
  {
    TempDir t;
    fs::create_directories(t.path + "/rt/run");
    fs::permissions(t.path + "/rt", fs::perms::owner_all, fs::perm_options::replace);
    fs::permissions(t.path + "/rt/run", fs::perms::owner_all, fs::perm_options::replace);
    npuprof::testing::WriteTree(t.path + "/elsewhere", "keep me");
    fs::create_symlink(t.path + "/elsewhere", t.path + "/rt/run/msprof_wrap.sh");
    const Ran r = RunIt(t.path, GoodBin(t.path));
    EXPECT_EQ(r.run.status, 0) << r.run.err;
    ASSERT_TRUE(r.split.dir_checked);
    EXPECT_EQ(r.split.write, PreflightInOne::Write::kNotTried);
    EXPECT_EQ(Slurp(t.path + "/elsewhere"), "keep me");
    auto report = service::ParseRuntimeDirReport(r.split.dir_out);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(service::UntrustedFile(*report, t.path + "/rt/run", "msprof_wrap.sh", "the msprof wrap script"));
  }
  {
    TempDir t;
    fs::create_directories(t.path + "/rt/run/msprof_wrap.sh");
    fs::permissions(t.path + "/rt", fs::perms::owner_all, fs::perm_options::replace);
    fs::permissions(t.path + "/rt/run", fs::perms::owner_all, fs::perm_options::replace);
    const Ran r = RunIt(t.path, GoodBin(t.path));
    ASSERT_TRUE(r.split.dir_checked);
    EXPECT_EQ(r.split.write, PreflightInOne::Write::kNotTried);
    EXPECT_TRUE(fs::is_directory(t.path + "/rt/run/msprof_wrap.sh"));
  }
}

TEST(PreflightInOne, ARefusedDirIsTheCommandsStatusAndNothingIsWritten) {
  TempDir t;
  fs::create_directories(t.path + "/rt/run");
  fs::permissions(t.path + "/rt", fs::perms::owner_all, fs::perm_options::replace);
  fs::permissions(t.path + "/rt/run", fs::perms::owner_all | fs::perms::others_write, fs::perm_options::replace);
  const Ran r = RunIt(t.path, GoodBin(t.path));
  EXPECT_EQ(r.run.status, 5);
  EXPECT_TRUE(r.split.dir_checked);
  EXPECT_TRUE(service::RuntimeDirRefusal(r.run.err).has_value()) << r.run.err;
  EXPECT_EQ(r.split.write, PreflightInOne::Write::kNotTried);
  EXPECT_FALSE(fs::exists(t.path + "/rt/run/msprof_wrap.sh"));
}

TEST(PreflightInOne, OutputOutOfItsFormatIsRefused) {
  for (const std::string bad : {
           "npuprof-dir-check\nnpuprof-dir-check\n",
           "npuprof-preflight 1\nnpuprof-wrap-written\n",
           "npuprof-dir-check\nnpuprof-wrap-written\nnpuprof-wrap-failed\n",
           "npuprof-dir-check\ndir ok\nnpuprof-wrap-failed\nmore\n",
       }) {
    auto r = SplitPreflightInOne(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << bad;
    }
  }
  auto ok = SplitPreflightInOne("a\nb\nnpuprof-dir-check\nuid 1 u\ndir ok\nnpuprof-wrap-failed\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->tools_out, "a\nb\n");
  EXPECT_EQ(ok->dir_out, "uid 1 u\ndir ok\n");
  EXPECT_EQ(ok->write, PreflightInOne::Write::kFailed);
}

}  // namespace
}  // namespace npuprof::workers
