// The service's log tails in one remote command (workers/
// log_tails.h), run in a local shell over real files: the last max bytes of
// each file as bytes (invalid UTF-8, NULs), empty for a missing, empty or
// unreadable file, paths with spaces and quotes as given; and the parser
// refuses every output that is not exactly the format.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/log_tails.h"

namespace npuprof::workers {
namespace {

using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

TEST(LogTails, TheLastBytesOfEachFileAsBytesAndEmptyForWhatIsNotThere) {
  TempDir t;
  const std::string big = t.path + "/std err.log", small = t.path + "/it's out.log", none = t.path + "/none.log",
                    empty = t.path + "/empty.log";
  std::string body;
  for (int i = 0; i < 3000; ++i) body += "line " + std::to_string(i) + " \xff\xfe\n";
  body += std::string("nul\0byte\n", 9);
  npuprof::testing::WriteTree(big, body);
  npuprof::testing::WriteTree(small, "short\n");
  npuprof::testing::WriteTree(empty, "");
  auto r = RunLocalArgv(LogTailsArgv(1000, {big, small, none, empty, t.path}), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto tails = ParseLogTails(r.out, 5, 1000);
  ASSERT_TRUE(tails.ok()) << tails.status().ToString() << "\n" << r.out.substr(0, 300);
  ASSERT_EQ(tails->size(), 5u);
  EXPECT_EQ((*tails)[0], body.substr(body.size() - 1000));
  EXPECT_EQ((*tails)[1], "short\n");
  EXPECT_EQ((*tails)[2], "");  // missing
  EXPECT_EQ((*tails)[3], "");  // empty
  EXPECT_EQ((*tails)[4], "");  // a directory is no regular file
  EXPECT_LE(r.out.size(), LogTailsOutputCap(1000, 5));
}

TEST(LogTails, AnUnreadableFileIsAnEmptyTail) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads every file";
  TempDir t;
  const std::string f = t.path + "/secret.log";
  npuprof::testing::WriteTree(f, "hidden\n");
  std::filesystem::permissions(f, std::filesystem::perms::none);
  auto r = RunLocalArgv(LogTailsArgv(100, {f}), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto tails = ParseLogTails(r.out, 1, 100);
  ASSERT_TRUE(tails.ok()) << tails.status().ToString();
  EXPECT_EQ((*tails)[0], "");
}

TEST(LogTails, OutputThatIsNotExactlyTheFormatIsRefused) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "header"},
      {"npuprof-tails\n", "1 of 2|0 of 2"},
      {"npuprof-tails\n0 ok Zm9v\n", "1 of 2"},
      {"npuprof-tails\n1 ok Zm9v\n0 missing\n", "index 0"},
      {"npuprof-tails\n0 ok Zm9v\n1 gone\n", "neither"},
      {"npuprof-tails\n0 ok Zm9\n1 missing\n", "4-character"},
      {"npuprof-tails\n0 ok Zm9vYmFyYmF6\n1 missing\n", "over the"},
      {"npuprof-tails\n0 missing\n1 missing\nextra\n", "more lines"},
  };
  for (const auto& [out, why] : bad) {
    auto r = ParseLogTails(out, 2, 6);
    ASSERT_FALSE(r.ok()) << out;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << out;
    bool named = false;
    size_t from = 0;
    while (from <= why.size()) {
      const size_t bar = why.find('|', from);
      const std::string one = why.substr(from, bar == std::string::npos ? std::string::npos : bar - from);
      named |= r.status().message().find(one) != std::string::npos;
      if (bar == std::string::npos) break;
      from = bar + 1;
    }
    EXPECT_TRUE(named) << out << " -> " << r.status().message();
  }
  auto ok = ParseLogTails("npuprof-tails\n0 ok Zm9v\n1 missing\n", 2, 6);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0], "foo");
}

TEST(HeadTails, ASmallFileWholeALargeOneAsItsHeadAndTailAndNothingForWhatIsNotThere) {
  TempDir t;
  const std::string small = t.path + "/a b.log", large = t.path + "/large.log", none = t.path + "/none";
  npuprof::testing::WriteTree(small, std::string("tiny\xff\0\n", 7));
  std::string body;
  for (int i = 0; i < 500; ++i) body += "row " + std::to_string(i) + "\n";
  npuprof::testing::WriteTree(large, body);
  auto r = RunLocalArgv(HeadTailsArgv(101, {small, large, none}), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto got = ParseHeadTails(r.out, 3, 101);
  ASSERT_TRUE(got.ok()) << got.status().ToString() << "\n" << r.out.substr(0, 300);
  ASSERT_EQ(got->size(), 3u);
  EXPECT_TRUE((*got)[0].found);
  EXPECT_EQ((*got)[0].size, 7u);
  EXPECT_EQ((*got)[0].head, std::string("tiny\xff\0\n", 7));
  EXPECT_EQ((*got)[0].tail, "");
  EXPECT_TRUE((*got)[1].found);
  EXPECT_EQ((*got)[1].size, body.size());
  EXPECT_EQ((*got)[1].head, body.substr(0, 50));
  EXPECT_EQ((*got)[1].tail, body.substr(body.size() - 51));
  EXPECT_FALSE((*got)[2].found);
  EXPECT_LE(r.out.size(), HeadTailsOutputCap(101, 3));
}

TEST(HeadTails, OutputThatIsNotExactlyTheFormatIsRefused) {
  for (const std::string& bad : {
           std::string(""),
           std::string("npuprof-tails\n0 missing\n"),
           std::string("npuprof-headtails\n"),
           std::string("npuprof-headtails\n1 missing\n"),
           std::string("npuprof-headtails\n0 ok 3 Zm9v\n"),              // no tail field
           std::string("npuprof-headtails\n0 ok x Zm9v \n"),             // no size
           std::string("npuprof-headtails\n0 ok 3 Zm9 \n"),              // bad base64
           std::string("npuprof-headtails\n0 ok 3 Zm9v Zm9v\n"),         // a tail for a whole file
           std::string("npuprof-headtails\n0 ok 9 Zm9vYmFy Zm9v\n"),     // over the cap
           std::string("npuprof-headtails\n0 ok 3 Zm9v  extra\n"),
           std::string("npuprof-headtails\n0 missing\n0 missing\n"),
       }) {
    auto r = ParseHeadTails(bad, 1, 6);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << bad;
    }
  }
  auto ok = ParseHeadTails("npuprof-headtails\n0 ok 3 Zm9v \n", 1, 6);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].head, "foo");
}

}  // namespace
}  // namespace npuprof::workers
