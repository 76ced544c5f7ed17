// A profile root's listing and the means in one command (workers/
// profile_root_listing.h), run in a local shell over a real tree: entries as
// the file operations list them (names as bytes, symlinks not followed), the
// sizes of the *_ascend_pt dirs by name, the means the file NPUPROF_MEMINFO
// names; "root absent" for nothing there, a non-zero exit for a file in the
// root's place; and the parser refuses every output that is not exactly the
// format.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "statemachine/torch_profile_analyse_limit.h"
#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/profile_root_listing.h"

namespace npuprof::workers {
namespace {

using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

// base64 as `base64 -w 0` prints it (the test's own encoder).
std::string B64(const std::string& s) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<uint8_t>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<uint8_t>(s[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

TEST(ProfileRootListing, EntriesSizesAndMeansOfARealTree) {
  TempDir t;
  const std::string root = t.path + "/prof root";
  const std::string odd = std::string("rank \xff 'q'_ascend_pt");
  npuprof::testing::WriteTree(root + "/a_1_ascend_pt/PROF_1/data.bin", std::string(200 * 1024, 'x'));
  npuprof::testing::WriteTree(root + "/" + odd + "/f", "y");
  npuprof::testing::WriteTree(root + "/notes.txt", "n");
  npuprof::testing::WriteTree(root + "/.hidden", "h");
  npuprof::testing::WriteTree(t.path + "/elsewhere_ascend_pt/f", "z");
  std::filesystem::create_directory_symlink(t.path + "/elsewhere_ascend_pt", root + "/link_ascend_pt");
  npuprof::testing::WriteTree(t.path + "/meminfo", "MemTotal: 100 kB\nMemAvailable:   123456 kB\n");
  const std::string run = "NPUPROF_MEMINFO='" + t.path + "/meminfo' exec \"$0\" \"$@\"";
  auto r = RunLocalArgv([&] {
    std::vector<std::string> argv = {"sh", "-c", run};
    for (const auto& a : ProfileRootListingArgv(root)) argv.push_back(a);
    return argv;
  }(), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto got = ParseProfileRootListing(r.out);
  ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << r.out;
  ASSERT_TRUE(got->exists);
  std::vector<std::string> names;
  for (const auto& e : got->entries) names.push_back(std::string(e.is_dir ? "d:" : "o:") + e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"o:.hidden", "d:a_1_ascend_pt", "o:link_ascend_pt", "o:notes.txt",
                                             "d:" + odd}));
  EXPECT_EQ(got->dir_kb.size(), 2u) << "a symlink to a dir is not sized: it is not listed as one";
  ASSERT_TRUE(got->dir_kb.count("a_1_ascend_pt"));
  EXPECT_GE(std::stoll(got->dir_kb.at("a_1_ascend_pt")), 200);
  EXPECT_EQ(got->mem_available_kb, "123456");
  EXPECT_FALSE(got->cores.empty());
  EXPECT_FALSE(got->disk_free_kb.empty());
  const auto means = sm::ParseAnalyseMeans(got->MeansText({"a_1_ascend_pt", odd, "not_there_ascend_pt"}), 3);
  ASSERT_EQ(means.rank_bytes.size(), 3u);
  ASSERT_TRUE(means.rank_bytes[0].has_value());
  EXPECT_GE(*means.rank_bytes[0], 200 * 1024);
  EXPECT_TRUE(means.rank_bytes[1].has_value());
  EXPECT_FALSE(means.rank_bytes[2].has_value()) << "a name the command did not size is unread";
  EXPECT_EQ(means.mem_available_bytes, int64_t{123456} * 1024);
}

TEST(ProfileRootListing, NothingThereIsAbsentAndAFileInItsPlaceExitsForTheFileOperations) {
  TempDir t;
  auto none = RunLocalArgv(ProfileRootListingArgv(t.path + "/none"), "");
  ASSERT_EQ(none.status, 0) << none.err;
  auto got = ParseProfileRootListing(none.out);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->exists);
  npuprof::testing::WriteTree(t.path + "/file", "x");
  EXPECT_NE(RunLocalArgv(ProfileRootListingArgv(t.path + "/file"), "").status, 0);
  std::filesystem::create_directory(t.path + "/empty");
  auto empty = RunLocalArgv(ProfileRootListingArgv(t.path + "/empty"), "");
  ASSERT_EQ(empty.status, 0) << empty.err;
  got = ParseProfileRootListing(empty.out);
  ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << empty.out;
  EXPECT_TRUE(got->exists);
  EXPECT_TRUE(got->entries.empty());
}

TEST(ProfileRootListing, OutputThatIsNotExactlyTheFormatIsRefused) {
  const std::string rec = B64(std::string("d 4096 r0_ascend_pt\0", 20));
  const std::string ok = "root dir\nlisting " + rec + "\ncores 4\nmem_available_kb 10\ndisk_free_kb 20\ndir_kb " +
                         B64("r0_ascend_pt") + " 12\nend\n";
  ASSERT_TRUE(ParseProfileRootListing(ok).ok()) << ParseProfileRootListing(ok).status().ToString();
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = ok;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  const std::vector<std::string> bad = {
      "",
      "root absent\nend\n",
      "root absent",
      ok.substr(0, ok.size() - 1),                     // the last line cut short
      with("end\n", ""),                               // no end
      with("root dir", "root file"),
      with("listing " + rec, "listing !!"),            // not base64
      with("listing " + rec, "listing " + B64("d 1 x")),  // a record without its NUL
      with("cores 4", "cores four"),
      with("cores 4", "cores 4 5"),
      with("mem_available_kb 10", "mem 10"),
      with("disk_free_kb 20", "disk_free_kb -20"),
      with(" 12\nend", " 1x\nend"),
      with("dir_kb " + B64("r0_ascend_pt"), "dir_kb " + B64("other_ascend_pt")),  // not listed
      with("dir_kb " + B64("r0_ascend_pt"), "dir_kb " + B64("a/b")),
      with("\nend\n", "\ndir_kb " + B64("r0_ascend_pt") + " 12\nend\n"),  // twice
      with("cores 4", "cores 99999999999999999999"),
      "root dir\n\xff\xfe\nend\n",
  };
  for (const std::string& b : bad) EXPECT_FALSE(ParseProfileRootListing(b).ok()) << b;
}

}  // namespace
}  // namespace npuprof::workers
