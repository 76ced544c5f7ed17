// Files over the command channel: the parsers and error mapping (pure), and
// the scripts themselves run by local shells (dash as /bin/sh, and bash) —
// no SSH involved — including a PATH that lacks a tool.
#include "workers/ssh/file_over_exec_protocol.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/ssh/local_shell.h"

namespace npuprof::ssh::file_over_exec {
namespace {

namespace fs = std::filesystem;

TEST(FileOverExecProtocol, ParsesStatLine) {
  auto st = ParseStat("1234 81a4 1700000000\n");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, 1234u);
  EXPECT_EQ(st->mode, 0100644u);
  EXPECT_FALSE(st->is_dir);
  EXPECT_EQ(st->mtime, 1700000000);
  EXPECT_TRUE(ParseStat("4096 41ed 1\n")->is_dir);
  for (const char* bad : {"", "1 2", "x 81a4 1", "1 zz 1", "1 81a4 1 extra", "-1 81a4 1", "1 1ffffffff 1"}) {
    EXPECT_EQ(ParseStat(bad).status().code(), Code::kCorruption) << bad;
  }
}

TEST(FileOverExecProtocol, ParsesNulSeparatedListingWithAnyByteInNames) {
  using namespace std::string_literals;
  const std::string out = "f 5 b file\0d 4096 a dir\0l 9 new\nline\0f 0 \xff\xfe\0"s;
  auto e = ParseListing(out);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->size(), 4u);
  EXPECT_EQ((*e)[0].name, "a dir");
  EXPECT_TRUE((*e)[0].is_dir);
  EXPECT_EQ((*e)[1].name, "b file");
  EXPECT_EQ((*e)[1].size, 5u);
  EXPECT_EQ((*e)[2].name, "new\nline");
  EXPECT_FALSE((*e)[2].is_dir);  // a symlink is not a directory
  EXPECT_EQ((*e)[3].name, "\xff\xfe");
  EXPECT_TRUE(ParseListing("")->empty());
  for (const std::string& bad : {"f 5 cut"s, "f 5 a\0f 6"s, "f x a\0"s, "f 5 \0"s, "f 1 a/b\0"s, "fx 1 a\0"s,
                                 "d 1 ..\0"s}) {
    EXPECT_EQ(ParseListing(bad).status().code(), Code::kCorruption);
  }
}

TEST(FileOverExecProtocol, ExitStatusesMapToTheKindsSftpReports) {
  EXPECT_EQ(FailureOf(kExitNotFound, "").code, Code::kNotFound);
  EXPECT_EQ(FailureOf(kExitNotFound, "").kind, SshErrorKind::kRemoteError);
  EXPECT_EQ(FailureOf(kExitDenied, "").code, Code::kPermissionDenied);
  EXPECT_EQ(FailureOf(kExitWrongType, "").kind, SshErrorKind::kRemoteError);
  const ScriptFailure tool = FailureOf(127, "npuprof: the target has no find on PATH\n");
  EXPECT_EQ(tool.kind, SshErrorKind::kToolMissing);
  EXPECT_TRUE(IsPermanent(tool.kind));
  EXPECT_NE(tool.detail.find("no find on PATH"), std::string::npos) << tool.detail;
  EXPECT_NE(tool.detail.find("sftp"), std::string::npos) << tool.detail;
  const ScriptFailure other = FailureOf(1, "\nmv: cannot move: Disk full\nmore\n");
  EXPECT_EQ(other.code, Code::kIoError);
  EXPECT_EQ(other.detail, "exit 1: mv: cannot move: Disk full");
}

TEST(FileOverExecProtocol, TempNamesStayInTheTargetsDirectory) {
  EXPECT_EQ(TempPathFor("/a/b/launch.json", "ab12"), "/a/b/.launch.json.npuprof-ab12.tmp");
  EXPECT_EQ(TempPathFor("x", "ab12"), "./.x.npuprof-ab12.tmp");
  EXPECT_EQ(TempPathFor("/x", "n"), "/.x.npuprof-n.tmp");
  const std::string long_name(250, 'n');
  const std::string t = TempPathFor("/d/" + long_name, "ab12");
  EXPECT_LT(t.size() - 3, 255u);
  EXPECT_EQ(t.rfind("/d/.", 0), 0u);
  EXPECT_EQ(OperandPath("-rf"), "./-rf");
  EXPECT_EQ(OperandPath("/abs"), "/abs");
}

using Local = testing::LocalRun;

// argv with argv[0] ("sh") replaced by `shell`, run locally.
Local RunScript(std::vector<std::string> argv, const std::string& shell, const std::string& stdin_data = "",
                const std::string& path_env = "") {
  argv[0] = shell;
  return testing::RunLocalArgv(argv, stdin_data, path_env);
}

class FileScripts : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!fs::exists(GetParam())) GTEST_SKIP() << GetParam() << " not installed";
    char tmpl[] = "/tmp/npuprof-fx-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/d");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  Local Run(const std::vector<std::string>& argv, const std::string& in = "") {
    return RunScript(argv, GetParam(), in);
  }
  std::string dir_;
};

TEST_P(FileScripts, ReadStatListWriteRename) {
  const std::string f = dir_ + "/d/file one";
  std::string data;
  for (int i = 0; i < 256; ++i) data.push_back(static_cast<char>(i));
  Local w = Run(WriteArgv(f, TempPathFor(f, "00aa"), 0640), data);
  ASSERT_EQ(w.status, 0) << w.err;
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);

  EXPECT_EQ(Run(ReadArgv(f, 0, UINT64_MAX)).out, data);
  EXPECT_EQ(Run(ReadArgv(f, 0, 10)).out, data.substr(0, 10));
  EXPECT_EQ(Run(ReadArgv(f, 250, UINT64_MAX)).out, data.substr(250));
  EXPECT_EQ(Run(ReadArgv(f, 100, 3)).out, data.substr(100, 3));
  EXPECT_EQ(Run(ReadArgv(f, 1000, 3)).out, "");

  auto parsed = ParseStat(Run(StatArgv(f)).out);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->size, 256u);
  EXPECT_EQ(parsed->mode & 07777, 0640u);

  auto list = ParseListing(Run(ListArgv(dir_ + "/d")).out);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);  // no temp file left
  EXPECT_EQ((*list)[0].name, "file one");

  // Rename over an existing file.
  std::ofstream(dir_ + "/d/new", std::ios::binary) << "new";
  ASSERT_EQ(Run(RenameArgv(dir_ + "/d/new", f)).status, 0);
  EXPECT_EQ(Run(ReadArgv(f, 0, UINT64_MAX)).out, "new");
}

TEST_P(FileScripts, ErrorsComeAsTheAgreedExitStatuses) {
  EXPECT_EQ(Run(ReadArgv(dir_ + "/none", 0, 5)).status, kExitNotFound);
  EXPECT_EQ(Run(StatArgv(dir_ + "/none")).status, kExitNotFound);
  EXPECT_EQ(Run(ListArgv(dir_ + "/none")).status, kExitNotFound);
  EXPECT_EQ(Run(ReadArgv(dir_ + "/d", 0, 5)).status, kExitWrongType);
  std::ofstream(dir_ + "/plain") << "x";
  EXPECT_EQ(Run(ListArgv(dir_ + "/plain")).status, kExitWrongType);
  EXPECT_EQ(Run(WriteArgv(dir_ + "/none/x", TempPathFor(dir_ + "/none/x", "01"), 0644), "x").status,
            kExitNotFound);
  // A taken temp name (a planted symlink) is refused and left alone.
  const std::string tmp = TempPathFor(dir_ + "/t", "02");
  fs::create_symlink(dir_ + "/plain", tmp);
  EXPECT_EQ(Run(WriteArgv(dir_ + "/t", tmp, 0644), "evil").status, kExitTempExists);
  EXPECT_TRUE(fs::is_symlink(tmp));
  std::ifstream plain(dir_ + "/plain");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(plain), {}), "x");
  EXPECT_FALSE(fs::exists(dir_ + "/t"));
}

TEST_P(FileScripts, AMissingToolIs127NamingIt) {
  // A PATH with every tool but find.
  const std::string bin = dir_ + "/bin";
  fs::create_directories(bin);
  for (const char* t : {"cat", "head", "tail", "stat", "chmod", "mv", "rm"}) {
    for (const char* d : {"/usr/bin/", "/bin/"}) {
      if (fs::exists(std::string(d) + t)) {
        fs::create_symlink(std::string(d) + t, bin + "/" + t);
        break;
      }
    }
  }
  Local r = RunScript(ListArgv(dir_ + "/d"), GetParam(), "", bin);
  EXPECT_EQ(r.status, kExitToolMissing);
  EXPECT_NE(r.err.find("no find on PATH"), std::string::npos) << r.err;
  EXPECT_EQ(FailureOf(r.status, r.err).kind, SshErrorKind::kToolMissing);
  std::ofstream(dir_ + "/f") << "data";
  EXPECT_EQ(RunScript(ReadArgv(dir_ + "/f", 0, 2), GetParam(), "", bin).out, "da");
}

INSTANTIATE_TEST_SUITE_P(Shells, FileScripts, ::testing::Values("/bin/sh", "/bin/bash"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param) == "/bin/sh" ? std::string("Sh") : std::string("Bash");
                         });

}  // namespace
}  // namespace npuprof::ssh::file_over_exec
