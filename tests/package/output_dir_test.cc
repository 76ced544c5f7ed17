// The output directory of `export RUN DIR` and `-o FILE` (cli/output_dir.h):
// created when missing, and when something is in the way the error says
// what it is (a dangling symbolic link used to give only "File exists").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/output_dir.h"
#include "tests/support/temp_dir.h"

namespace npuprof::cli {
namespace {

using npuprof::testing::TempDir;

TEST(OutputDir, IsCreatedWithItsParentsAndAnExistingOneIsFine) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  const std::string dir = t.path + "/a/b/c";
  EXPECT_TRUE(EnsureOutputDir(dir).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(EnsureOutputDir(dir).ok());
  std::filesystem::create_directory_symlink(dir, t.path + "/to-c");
  EXPECT_TRUE(EnsureOutputDir(t.path + "/to-c").ok()) << "a link to a directory is that directory";
}

TEST(OutputDir, ADanglingSymlinkIsNamedWithItsTarget) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  const std::string link = t.path + "/out";
  ASSERT_EQ(::symlink("/nonexistent/npuprof-out", link.c_str()), 0);
  const Status s = EnsureOutputDir(link);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cannot create " + link + ": " + link +
                             " is a symbolic link to /nonexistent/npuprof-out, which does not exist: remove the link, "
                             "create /nonexistent/npuprof-out, or give another directory");
  EXPECT_EQ(s.message().find("File exists"), std::string::npos);
  // Below it too.
  const Status below = EnsureOutputDir(link + "/sub");
  ASSERT_FALSE(below.ok());
  EXPECT_NE(below.message().find(link + " is a symbolic link to /nonexistent/npuprof-out, which does not exist"),
            std::string::npos)
      << below.message();
}

TEST(OutputDir, AFileOrALinkToAFileInTheWayIsNamed) {
  TempDir t;
  ASSERT_FALSE(t.path.empty());
  const std::string file = t.path + "/plain";
  std::ofstream(file) << "x";
  Status s = EnsureOutputDir(file + "/sub");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(file + " is a file, not a directory: remove it or give another directory"),
            std::string::npos)
      << s.message();
  const std::string link = t.path + "/to-file";
  std::filesystem::create_symlink(file, link);
  s = EnsureOutputDir(link);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(link + " is a symbolic link to " + file + ", which is a file, not a directory"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace npuprof::cli
