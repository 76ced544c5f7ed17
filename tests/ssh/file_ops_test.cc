// SshSession file operations against a real loopback sshd, once with its
// sftp subsystem and once without (files then go over the command channel):
// the same results and errors either way, any byte in a name, symlinks never
// followed where SFTP would not follow them, atomic writes that replace (not
// follow) a symlink at the target, a reconnect after a killed connection, and
// the refusal noticed once per connection.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/sshd_fixture.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Put(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// Names in `dir` other than the ones given (temp files left behind).
std::vector<std::string> Others(const std::string& dir, const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (std::find(known.begin(), known.end(), n) == known.end()) out.push_back(n);
  }
  return out;
}

// GetParam(): whether sshd offers SFTP.
class FileOpsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    sshd_.set_sftp_subsystem(GetParam());
    Status s = sshd_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    root_ = sshd_.dir() + "/files";
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "sshd log:\n" << sshd_.log() << "\n";
  }
  bool sftp() const { return GetParam(); }
  npuprof::testing::SshdFixture sshd_;
  std::string root_;
};

TEST_P(FileOpsTest, WriteStatReadListFiveMegabytes) {
  SshSession s(sshd_.target());
  const std::string data = RandomBytes(5 * 1024 * 1024 + 17, 42);
  const std::string path = root_ + "/big.bin";
  ASSERT_TRUE(s.WriteFile(path, data, 0600).ok());
  EXPECT_EQ(s.files_over_exec(), !sftp());
  EXPECT_TRUE(Slurp(path) == data);
  auto st = s.Stat(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, data.size());
  EXPECT_FALSE(st->is_dir);
  EXPECT_EQ(st->mode & 07777, 0600u);
  EXPECT_EQ(st->mode & S_IFMT, static_cast<uint32_t>(S_IFREG));
  EXPECT_GT(st->mtime, 1600000000);
  auto back = s.ReadFile(path, 0, data.size() + 10);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value() == data);
  // Byte ranges: inside, at the end, past the end, nothing.
  EXPECT_EQ(s.ReadFile(path, 1000, 100).value(), data.substr(1000, 100));
  EXPECT_EQ(s.ReadFile(path, 0, 7).value(), data.substr(0, 7));
  EXPECT_EQ(s.ReadFile(path, data.size() - 10).value(), data.substr(data.size() - 10));
  EXPECT_EQ(s.ReadFile(path, data.size() + 5, 10).value(), "");
  EXPECT_EQ(s.ReadFile(path, 3, 0).value(), "");

  fs::create_directories(root_ + "/sub/dir");
  ASSERT_TRUE(s.WriteFile(root_ + "/sub/a.txt", "hello", 0644).ok());
  auto list = s.ListDir(root_ + "/sub");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a.txt");
  EXPECT_EQ((*list)[0].size, 5u);
  EXPECT_FALSE((*list)[0].is_dir);
  EXPECT_EQ((*list)[1].name, "dir");
  EXPECT_TRUE((*list)[1].is_dir);
  EXPECT_TRUE(s.Stat(root_ + "/sub/dir")->is_dir);
  EXPECT_TRUE(s.ListDir(root_ + "/sub/dir")->empty());
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_P(FileOpsTest, MissingPathsAndWrongTypesAreRemoteErrors) {
  SshSession s(sshd_.target());
  const std::string nope = root_ + "/nope";
  for (const Status& st : {s.Stat(nope).status(), s.ReadFile(nope).status(), s.ListDir(nope).status(),
                           s.WriteFile(nope + "/x", "x", 0644)}) {
    EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
    EXPECT_EQ(ErrorKindOf(st), SshErrorKind::kRemoteError) << st.ToString();
  }
  Put(root_ + "/f", "x");
  auto list_file = s.ListDir(root_ + "/f");
  EXPECT_FALSE(list_file.ok());
  EXPECT_EQ(ErrorKindOf(list_file.status()), SshErrorKind::kRemoteError);
  // The session is fine afterwards.
  EXPECT_TRUE(s.WriteFile(root_ + "/x", "x", 0644).ok());
  EXPECT_EQ(s.ReadFile(root_ + "/x").value(), "x");
}

TEST_P(FileOpsTest, NamesWithAnyByteRoundTrip) {
  SshSession s(sshd_.target());
  const std::vector<std::string> names = {
      "a b", "new\nline", std::string("\xff\xfe gbk \xb2\xe2"), "-dash", "quote'\"$(x)`y`", "tab\there",
      "\xe4\xb8\xad\xe6\x96\x87", " lead", "trail ", "*", ".hidden"};
  for (size_t i = 0; i < names.size(); ++i) Put(root_ + "/" + names[i], "content " + std::to_string(i));
  auto list = s.ListDir(root_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> got;
  for (const auto& e : *list) got.push_back(e.name);
  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string p = root_ + "/" + names[i];
    auto r = s.ReadFile(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "content " + std::to_string(i));
    EXPECT_EQ(s.Stat(p)->size, r->size());
    ASSERT_TRUE(s.WriteFile(p, "rewritten", 0640).ok()) << i;
    EXPECT_EQ(Slurp(p), "rewritten");
  }
  // A relative path starting with '-' is a path, not an option (the login dir is $HOME).
  EXPECT_EQ(s.Stat("-no-such-option").status().code(), Code::kNotFound);
}

TEST_P(FileOpsTest, SymlinksAreFollowedOnlyWhereSftpFollowsThem) {
  SshSession s(sshd_.target());
  fs::create_directories(root_ + "/real_dir");
  Put(root_ + "/real_file", "target bytes");
  fs::create_directory_symlink(root_ + "/real_dir", root_ + "/link_dir");
  fs::create_symlink(root_ + "/real_file", root_ + "/link_file");
  fs::create_symlink(root_ + "/gone", root_ + "/dangling");
  // The listing shows links as links (lstat), as SFTP readdir does.
  auto list = s.ListDir(root_);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  for (const auto& e : *list) {
    if (e.name == "link_dir" || e.name == "link_file" || e.name == "dangling") {
      EXPECT_FALSE(e.is_dir) << e.name;
    }
    if (e.name == "real_dir") {
      EXPECT_TRUE(e.is_dir);
    }
  }
  EXPECT_EQ(list->size(), 5u);
  // Stat and read follow, as SFTP stat and open do; a dangling link is missing.
  EXPECT_TRUE(s.Stat(root_ + "/link_dir")->is_dir);
  EXPECT_EQ(s.Stat(root_ + "/link_file")->size, 12u);
  EXPECT_EQ(s.ReadFile(root_ + "/link_file").value(), "target bytes");
  EXPECT_EQ(s.Stat(root_ + "/dangling").status().code(), Code::kNotFound);
  // Listing a symlink to a directory lists the directory (as opendir does).
  Put(root_ + "/real_dir/inside", "i");
  auto inside = s.ListDir(root_ + "/link_dir");
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  ASSERT_EQ(inside->size(), 1u);
  EXPECT_EQ((*inside)[0].name, "inside");
}

TEST_P(FileOpsTest, WriteIsAtomicAndNeverFollowsAPlantedSymlink) {
  SshSession s(sshd_.target());
  const std::string victim = sshd_.dir() + "/victim";
  Put(victim, "do not touch");
  ::chmod(victim.c_str(), 0600);
  // A symlink planted at the target is replaced by the file, not written through.
  const std::string target = root_ + "/launch.json";
  fs::create_symlink(victim, target);
  ASSERT_TRUE(s.WriteFile(target, "{\"a\":1}\n", 0600).ok());
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(Slurp(target), "{\"a\":1}\n");
  EXPECT_EQ(Slurp(victim), "do not touch");
  // A dangling symlink too (it would create the file it points to).
  fs::create_symlink(root_ + "/created_through_link", root_ + "/dangling");
  ASSERT_TRUE(s.WriteFile(root_ + "/dangling", "d", 0644).ok());
  EXPECT_FALSE(fs::is_symlink(root_ + "/dangling"));
  EXPECT_FALSE(fs::exists(root_ + "/created_through_link"));
  // Modes are exactly as asked, whatever the umask; overwriting replaces.
  for (uint32_t mode : {0600u, 0755u, 0640u}) {
    ASSERT_TRUE(s.WriteFile(target, "mode " + std::to_string(mode), mode).ok());
    struct stat st {};
    ASSERT_EQ(::lstat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
    EXPECT_EQ(Slurp(target), "mode " + std::to_string(mode));
  }
  // A directory at the target is an error and stays as it was.
  fs::create_directories(root_ + "/adir/keep");
  EXPECT_FALSE(s.WriteFile(root_ + "/adir", "x", 0644).ok());
  EXPECT_TRUE(fs::is_directory(root_ + "/adir/keep"));
  // No temp file is left behind by any of this.
  EXPECT_EQ(Others(root_, {"launch.json", "dangling", "adir"}), std::vector<std::string>{});
}

TEST_P(FileOpsTest, ReconnectsAfterAKilledConnectionAndAsksForSftpOncePerConnection) {
  SshSession s(sshd_.target());
  const std::string p = root_ + "/f.txt";
  ASSERT_TRUE(s.WriteFile(p, "content", 0644).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(s.ReadFile(p).ok());
    ASSERT_TRUE(s.Stat(p).ok());
    ASSERT_TRUE(s.ListDir(root_).ok());
  }
  // sshd logs each subsystem it starts, and each request it refuses; a refusal
  // costs two requests (sftp_new's, then the one telling it from "no channel").
  const std::string asked = sftp() ? "subsystem 'sftp'" : "subsystem request for sftp";
  EXPECT_EQ(Count(sshd_.log(), asked), sftp() ? 1u : 2u);
  // After the connection dies the new connection asks again, once.
  auto kids = sshd_.ChildPids();
  ASSERT_EQ(kids.size(), 1u);
  ::kill(kids[0], SIGKILL);
  for (int i = 0; i < 300 && ::kill(kids[0], 0) == 0; ++i) std::this_thread::sleep_for(10ms);
  auto r = s.ReadFile(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "content");
  ASSERT_TRUE(s.Stat(p).ok());
  EXPECT_EQ(s.handshakes(), 2);
  EXPECT_EQ(Count(sshd_.log(), asked), sftp() ? 2u : 4u);
  EXPECT_EQ(s.files_over_exec(), !sftp());
  auto e = s.Exec("cat " + p, 10s);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->stdout_data, "content");
}

INSTANTIATE_TEST_SUITE_P(SftpAndExec, FileOpsTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("Sftp") : std::string("NoSftp");
                         });

}  // namespace
}  // namespace npuprof::ssh
