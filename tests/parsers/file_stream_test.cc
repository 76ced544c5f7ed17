// Tests of parsers/file_stream: the stream memory.collect_csvs reads from a
// target (a listing interleaved with "@@NPUPROF_FILE <size> <path>" + bytes).
#include "parsers/file_stream.h"

#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"

namespace npuprof {
namespace {

TEST(SplitFileStream, ListingAndFilesInStreamOrder) {
  const std::string csv = "Device_id,event\n0,APP\n";
  const std::string stream = "./PROF_1_2_A/device_0\n@@NPUPROF_FILE " + std::to_string(csv.size()) +
                             " ./PROF_1_2_A/x.csv\n" + csv + "\n./PROF_1_2_A/device_1\n@@NPUPROF_FILE 3 ./y.csv\nabc";
  auto s = SplitFileStream(stream);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->listing, (std::vector<std::string>{"./PROF_1_2_A/device_0", "./PROF_1_2_A/x.csv",
                                                  "./PROF_1_2_A/device_1", "./y.csv"}));
  ASSERT_EQ(s->files.size(), 2u);
  EXPECT_EQ(s->files[0].path, "./PROF_1_2_A/x.csv");
  EXPECT_EQ(s->files[0].data, csv);
  EXPECT_EQ(s->files[1].data, "abc");
  // A file's bytes are bytes: a marker-looking line inside them is data.
  auto inner = SplitFileStream("@@NPUPROF_FILE 19 ./z.csv\n@@NPUPROF_FILE 1 a\n");
  ASSERT_TRUE(inner.ok());
  ASSERT_EQ(inner->files.size(), 1u);
  EXPECT_EQ(inner->files[0].data, "@@NPUPROF_FILE 1 a\n");
}

// Found by fuzzing (tests/fuzz/file_stream_fuzz.cc): the size went through
// strtoull, so "-1" read as 2^64 - 1 and "12abc" as 12, and a stream cut after
// its last announcement line was still "complete".
TEST(SplitFileStream, SizeMustBeADecimalByteCount) {
  for (const std::string size : {"-1", "+5", "12abc", "0x10", "", " 5", "18446744073709551616"}) {
    auto s = SplitFileStream("@@NPUPROF_FILE " + size + " ./a.csv\n" + std::string(64, 'x'));
    ASSERT_FALSE(s.ok()) << "size '" << size << "'";
    EXPECT_EQ(s.status().code(), Code::kCorruption);
  }
  auto s = SplitFileStream("listing\n@@NPUPROF_FILE 12abc ./a.csv\n");
  EXPECT_NE(s.status().message().find("at byte 8"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("'12abc'"), std::string::npos) << s.status().message();
}

TEST(SplitFileStream, TruncatedStreamAndMissingPathAreCorruption) {
  auto cut = SplitFileStream("@@NPUPROF_FILE 100 ./a.csv\nonly this");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
  EXPECT_NE(cut.status().message().find("./a.csv"), std::string::npos);
  EXPECT_FALSE(SplitFileStream("@@NPUPROF_FILE 3\nabc").ok());
  EXPECT_FALSE(SplitFileStream("@@NPUPROF_FILE 3 \nabc").ok());
  // The last line with no bytes left: an empty file fits, one byte does not.
  EXPECT_TRUE(SplitFileStream("@@NPUPROF_FILE 0 ./e.csv\n").ok());
  EXPECT_FALSE(SplitFileStream("@@NPUPROF_FILE 1 ./e.csv\n").ok());
  // Found by fuzzing: an announcement cut before its line end (its path may
  // be cut too) was taken as a whole empty file.
  auto no_eol = SplitFileStream("./x\n@@NPUPROF_FILE 0 ./x/ab");
  ASSERT_FALSE(no_eol.ok());
  EXPECT_NE(no_eol.status().message().find("no line end"), std::string::npos) << no_eol.status().message();
}

TEST(SplitFileStream, ErrorsQuotePathsAsValidUtf8) {
  auto s = SplitFileStream("@@NPUPROF_FILE 9 ./\xff\xfe.csv\nab");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(IsValidUtf8(s.status().message())) << s.status().message();
  auto ok = SplitFileStream("@@NPUPROF_FILE 2 ./\xff.csv\nab");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->files.at(0).path, "./\xff.csv");  // the bytes, for the blob name and lookups
}

}  // namespace
}  // namespace npuprof
