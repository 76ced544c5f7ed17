// The incremental CSV reader: the same records whatever the chunking.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parsers/csv_records.h"

namespace npuprof::testing {
namespace {

using Records = std::vector<std::vector<std::string>>;

Records Read(const std::string& text, size_t chunk) {
  Records out;
  CsvRecordReader r([&](const std::vector<std::string>& cells, size_t) {
    out.push_back(cells);
    return true;
  });
  for (size_t i = 0; i < text.size(); i += chunk) r.Feed(std::string_view(text).substr(i, chunk));
  r.Finish();
  return out;
}

TEST(CsvRecords, EveryChunkingGivesTheSameRecords) {
  const std::string text =
      "\xEF\xBB\xBFName,Type,Shapes\r\n"
      "\"a,b\",MatMul,\"\"\"8,4;2\"\"\"\r\n"
      "\n"
      "  x  ,\"q\"\"\" ,\"two\nlines\"\n"
      "last,row,\"1736413971558972.912\t\"";
  const Records want = {{"Name", "Type", "Shapes"},
                        {"a,b", "MatMul", "\"8,4;2\""},
                        {"x", "q\"", "two\nlines"},
                        {"last", "row", "1736413971558972.912"}};
  for (size_t chunk : {1, 2, 3, 5, 7, 64, 4096}) EXPECT_EQ(Read(text, chunk), want) << "chunk " << chunk;
}

TEST(CsvRecords, ABomSplitAcrossChunksAndTextThatOnlyLooksLikeOne) {
  EXPECT_EQ(Read("\xEF\xBB\xBF" "a,b\n", 1), (Records{{"a", "b"}}));
  EXPECT_EQ(Read("\xEF" "a,b\n", 1), (Records{{"\xEF" "a", "b"}}));  // bytes are bytes
  EXPECT_EQ(Read("\xEF\xBB", 1), (Records{{"\xEF\xBB"}}));
  EXPECT_TRUE(Read("", 1).empty());
}

TEST(CsvRecords, LongCellsAreCutAndCounted) {
  std::vector<std::string> got;
  CsvRecordReader r(
      [&](const std::vector<std::string>& cells, size_t) {
        got = cells;
        return true;
      },
      8, 2);
  r.Feed(std::string(100, 'x') + ",short,dropped\n");
  r.Finish();
  EXPECT_EQ(got, (std::vector<std::string>{std::string(8, 'x'), "short"}));
  EXPECT_EQ(r.cut_cells(), 1u);
}

TEST(CsvRecords, StopsWhenTheCallbackSaysSo) {
  size_t seen = 0;
  CsvRecordReader r([&](const std::vector<std::string>&, size_t) { return ++seen < 2; });
  r.Feed("a\nb\nc\nd\n");
  r.Finish();
  EXPECT_EQ(seen, 2u);
  EXPECT_TRUE(r.stopped());
}

TEST(CsvRecords, ColumnsAreFoundIgnoringAsciiCaseOnly) {
  const std::vector<std::string> header = {"Name", "Duration(us)", "timestamp(us)", "\xC3\x84x"};
  EXPECT_EQ(CsvColumn(header, "name"), 0u);
  EXPECT_EQ(CsvColumn(header, "DURATION(US)"), 1u);
  EXPECT_EQ(CsvColumn(header, "Timestamp(us)"), 2u);
  EXPECT_EQ(CsvColumn(header, "\xC3\x84x"), 3u);
  EXPECT_FALSE(CsvColumn(header, "\xC3\xA4x")) << "bytes past ASCII compare exactly";
  EXPECT_FALSE(CsvColumn(header, "Duration"));
  EXPECT_FALSE(CsvColumn({}, "Name"));
}

}  // namespace
}  // namespace npuprof::testing
