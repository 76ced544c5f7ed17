// SFTP through SshSession: read/list/stat/write, a 5 MB file, reconnect.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "tests/support/sshd_fixture.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;

class SftpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = sshd_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "sshd log:\n" << sshd_.log() << "\n";
  }
  npuprof::testing::SshdFixture sshd_;
};

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(42);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST_F(SftpTest, WriteStatReadListFiveMegabytes) {
  SshSession s(sshd_.target());
  const std::string data = RandomBytes(5 * 1024 * 1024 + 17);
  const std::string path = sshd_.dir() + "/big.bin";
  ASSERT_TRUE(s.WriteFile(path, data, 0600).ok());
  auto st = s.Stat(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, data.size());
  EXPECT_FALSE(st->is_dir);
  EXPECT_EQ(st->mode & 0777, 0600u);
  EXPECT_GT(st->mtime, 1600000000);
  auto back = s.ReadFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value() == data);
  auto part = s.ReadFile(path, 1000, 100);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part.value(), data.substr(1000, 100));
  auto tail = s.ReadFile(path, data.size() - 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail.value(), data.substr(data.size() - 10));

  std::filesystem::create_directories(sshd_.dir() + "/sub/dir");
  ASSERT_TRUE(s.WriteFile(sshd_.dir() + "/sub/a.txt", "hello", 0644).ok());
  auto list = s.ListDir(sshd_.dir() + "/sub");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a.txt");
  EXPECT_EQ((*list)[0].size, 5u);
  EXPECT_FALSE((*list)[0].is_dir);
  EXPECT_EQ((*list)[1].name, "dir");
  EXPECT_TRUE((*list)[1].is_dir);
  EXPECT_TRUE(s.Stat(sshd_.dir() + "/sub/dir")->is_dir);
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(SftpTest, MissingPathsAreNotFound) {
  SshSession s(sshd_.target());
  EXPECT_EQ(s.Stat(sshd_.dir() + "/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(s.ReadFile(sshd_.dir() + "/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(s.ListDir(sshd_.dir() + "/nope").status().code(), Code::kNotFound);
  EXPECT_FALSE(s.WriteFile(sshd_.dir() + "/nope/x", "x", 0644).ok());
  // Session still fine afterwards.
  EXPECT_TRUE(s.WriteFile(sshd_.dir() + "/x", "x", 0644).ok());
}

TEST_F(SftpTest, SftpReopensAfterConnectionKilled) {
  SshSession s(sshd_.target());
  const std::string path = sshd_.dir() + "/f.txt";
  ASSERT_TRUE(s.WriteFile(path, "content", 0644).ok());
  auto kids = sshd_.ChildPids();
  ASSERT_EQ(kids.size(), 1u);
  ::kill(kids[0], SIGKILL);
  for (int i = 0; i < 300 && ::kill(kids[0], 0) == 0; ++i) std::this_thread::sleep_for(10ms);
  auto r = s.ReadFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), "content");
  EXPECT_EQ(s.handshakes(), 2);
  auto e = s.Exec("cat " + path, 10s);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->stdout_data, "content");
}

}  // namespace
}  // namespace npuprof::ssh
