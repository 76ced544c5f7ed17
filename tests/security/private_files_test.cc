// Private dirs and files: what is made, tightened, refused.
#include "common/private_files.h"

#include <gtest/gtest.h>

#include "tests/security/security_test_util.h"

namespace npuprof {
namespace {

using testing::ModeOf;
using testing::ReadText;
using testing::TempDir;
using testing::WriteText;

TEST(PrivateDir, MissingIsMade0700WithItsParents) {
  TempDir t;
  const std::string d = t.path() + "/a/b/data";
  auto r = EnsurePrivateDir(d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, PrivateDirOutcome::kCreated);
  EXPECT_EQ(ModeOf(d), 0700);
  auto again = EnsurePrivateDir(d);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, PrivateDirOutcome::kAlreadyPrivate);
}

TEST(PrivateDir, ReadableByOthersIsTightened) {
  TempDir t;
  const std::string d = t.path() + "/data";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ::chmod(d.c_str(), 0755);
  auto r = EnsurePrivateDir(d);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, PrivateDirOutcome::kTightened);
  EXPECT_EQ(ModeOf(d), 0700);
}

TEST(PrivateDir, WritableByOthersIsRefusedAndLeftAlone) {
  TempDir t;
  for (mode_t m : {0770, 0777, 0702}) {
    const std::string d = t.path() + "/data" + std::to_string(m);
    ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
    ::chmod(d.c_str(), m);
    auto r = EnsurePrivateDir(d);
    ASSERT_FALSE(r.ok()) << m;
    EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
    EXPECT_NE(r.status().message().find("writable by group or others"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("chmod 700 " + d), std::string::npos) << r.status().message();
    EXPECT_EQ(ModeOf(d), static_cast<int>(m));
  }
}

TEST(PrivateDir, AFileIsNotADir) {
  TempDir t;
  const std::string f = t.path() + "/file";
  WriteText(f, "x", 0600);
  auto r = EnsurePrivateDir(f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a directory"), std::string::npos);
}

TEST(SecretFile, OnlyTheOwnerMayHaveAccess) {
  TempDir t;
  const std::string f = t.path() + "/k";
  WriteText(f, "secret", 0600);
  auto ok = ReadSecretFile(f, 100);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "secret");
  for (mode_t m : {0644, 0640, 0604, 0660}) {
    ::chmod(f.c_str(), m);
    auto r = ReadSecretFile(f, 100);
    ASSERT_FALSE(r.ok()) << m;
    EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
    EXPECT_NE(r.status().message().find("chmod 600 " + f), std::string::npos) << r.status().message();
  }
  ::chmod(f.c_str(), 0400);
  EXPECT_TRUE(ReadSecretFile(f, 100).ok());
  EXPECT_EQ(ReadSecretFile(t.path() + "/missing", 100).status().code(), Code::kNotFound);
  EXPECT_FALSE(ReadSecretFile(t.path(), 100).ok());  // a directory
}

TEST(SecretFile, ReadsAreCapped) {
  TempDir t;
  const std::string f = t.path() + "/k";
  WriteText(f, std::string(101, 'x'), 0600);
  auto r = ReadSecretFile(f, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("larger than 100 bytes"), std::string::npos);
}

TEST(ProtectedFile, OthersMayReadButNotWrite) {
  TempDir t;
  const std::string f = t.path() + "/allowed";
  WriteText(f, "list", 0644);
  EXPECT_TRUE(ReadProtectedFile(f, 100).ok());
  ::chmod(f.c_str(), 0664);
  auto r = ReadProtectedFile(f, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chmod go-w"), std::string::npos);
  EXPECT_EQ(ReadProtectedFile(t.path() + "/missing", 100).status().code(), Code::kNotFound);
}

TEST(AtomicWrite, ReplacesWithExactlyTheModeAsked) {
  TempDir t;
  const std::string f = t.path() + "/f";
  ::umask(022);
  ASSERT_TRUE(WriteFileAtomically(f, "one", 0600).ok());
  EXPECT_EQ(ReadText(f), "one");
  EXPECT_EQ(ModeOf(f), 0600);
  ASSERT_TRUE(WriteFileAtomically(f, "two", 0644).ok());
  EXPECT_EQ(ReadText(f), "two");
  EXPECT_EQ(ModeOf(f), 0644);
  // No temp files are left behind.
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(t.path())) n += e.is_regular_file();
  EXPECT_EQ(n, 1u);
}

TEST(AtomicWrite, ReplacingASymlinkDoesNotWriteThroughIt) {
  TempDir t;
  const std::string target = t.path() + "/target";
  WriteText(target, "untouched", 0644);
  const std::string link = t.path() + "/link";
  std::filesystem::create_symlink(target, link);
  ASSERT_TRUE(WriteFileAtomically(link, "new", 0600).ok());
  EXPECT_EQ(ReadText(target), "untouched");
  EXPECT_FALSE(std::filesystem::is_symlink(link));
  EXPECT_EQ(ReadText(link), "new");
}

TEST(AtomicCreate, NeverReplacesAnExistingFile) {
  TempDir t;
  const std::string f = t.path() + "/k";
  bool created = false;
  ASSERT_TRUE(CreateFileAtomically(f, "first", 0600, &created).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(ModeOf(f), 0600);
  ASSERT_TRUE(CreateFileAtomically(f, "second", 0600, &created).ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(ReadText(f), "first");
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(t.path())) n += e.is_regular_file();
  EXPECT_EQ(n, 1u);
}

}  // namespace
}  // namespace npuprof
