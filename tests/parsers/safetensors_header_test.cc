#include "parsers/safetensors_header.h"

#include <string>

#include <gtest/gtest.h>

#include "common/utf8.h"

namespace npuprof {
namespace {

std::string LengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// 8-byte little-endian length + JSON, as a safetensors file starts.
std::string FilePrefix(const std::string& json) { return LengthPrefix(json.size()) + json; }

TEST(SafetensorsDtypeBytes, SpecTable) {
  const std::pair<const char*, uint64_t> table[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"BOOL", 1}};
  for (auto [dtype, bytes] : table) {
    ASSERT_TRUE(SafetensorsDtypeBytes(dtype).has_value()) << dtype;
    EXPECT_EQ(*SafetensorsDtypeBytes(dtype), bytes) << dtype;
  }
  EXPECT_FALSE(SafetensorsDtypeBytes("bf16").has_value());
  EXPECT_FALSE(SafetensorsDtypeBytes("F4").has_value());
}

TEST(SafetensorsHeaderLength, DecodesLittleEndian) {
  auto n = SafetensorsHeaderLength(LengthPrefix(0x0102));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0x0102u);
  // Extra bytes after the first eight are ignored.
  auto m = SafetensorsHeaderLength(LengthPrefix(300) + "{\"a\":1}");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, 300u);
}

TEST(SafetensorsHeaderLength, RejectsShortInput) {
  auto n = SafetensorsHeaderLength(std::string("\x10\x00\x00", 3));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kCorruption);
  EXPECT_NE(n.status().message().find("got 3"), std::string::npos) << n.status().message();
}

TEST(SafetensorsHeaderLength, RejectsAbsurdLength) {
  EXPECT_TRUE(SafetensorsHeaderLength(LengthPrefix(kMaxSafetensorsHeaderBytes)).ok());
  auto over = SafetensorsHeaderLength(LengthPrefix(kMaxSafetensorsHeaderBytes + 1));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("exceeds"), std::string::npos);
  // A text file read as safetensors: "<html>\n\n" as a u64 is huge.
  EXPECT_FALSE(SafetensorsHeaderLength("<html>\n\n").ok());
  EXPECT_FALSE(SafetensorsHeaderLength(LengthPrefix(UINT64_MAX)).ok());
}

TEST(SafetensorsHeaderLength, RejectsTooSmall) {
  EXPECT_FALSE(SafetensorsHeaderLength(LengthPrefix(0)).ok());
  EXPECT_FALSE(SafetensorsHeaderLength(LengthPrefix(1)).ok());
  EXPECT_TRUE(SafetensorsHeaderLength(LengthPrefix(2)).ok());
}

TEST(SafetensorsHeaderLength, RejectsLengthBeyondFileSize) {
  EXPECT_TRUE(SafetensorsHeaderLength(LengthPrefix(100), 108).ok());
  auto n = SafetensorsHeaderLength(LengthPrefix(100), 107);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("99 bytes"), std::string::npos) << n.status().message();
  EXPECT_FALSE(SafetensorsHeaderLength(LengthPrefix(100), 4).ok());
}

TEST(ParseSafetensorsHeader, TensorsMetadataAndTotals) {
  const std::string json =
      R"({"__metadata__":{"format":"pt","n":3},)"
      R"("model.norm.weight":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
      R"("model.embed_tokens.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("scalar":{"dtype":"I64","shape":[],"data_offsets":[32,40]}})";
  auto h = ParseSafetensorsHeader(json);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->tensors[0].name, "model.embed_tokens.weight");  // sorted by offset
  EXPECT_EQ(h->tensors[0].bytes, 24u);
  EXPECT_EQ(h->tensors[0].num_elements, 6u);
  EXPECT_EQ(h->tensors[0].expected_bytes, 24u);
  EXPECT_FALSE(h->tensors[0].size_mismatch);
  EXPECT_EQ(h->tensors[1].name, "model.norm.weight");
  EXPECT_EQ(h->tensors[1].bytes, 8u);
  EXPECT_EQ(h->tensors[2].name, "scalar");
  EXPECT_EQ(h->tensors[2].num_elements, 1u);
  EXPECT_EQ(h->tensors[2].bytes, 8u);
  EXPECT_EQ(h->total_bytes, 40u);
  EXPECT_EQ(h->data_end, 40u);
  EXPECT_TRUE(h->offsets_contiguous);
  EXPECT_TRUE(h->mismatches.empty());
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(h->metadata.at("n"), "3");
}

TEST(ParseSafetensorsHeader, TrailingSpacePaddingAllowed) {
  auto h = ParseSafetensorsHeader(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}     )");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->total_bytes, 3u);
}

TEST(ParseSafetensorsHeader, OffsetsMismatchIsReportedNotFatal) {
  auto h = ParseSafetensorsHeader(
      R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]},)"
      R"("x":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[16,20]}})");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_TRUE(h->tensors[0].size_mismatch);
  EXPECT_EQ(h->tensors[0].expected_bytes, 12u);
  EXPECT_EQ(h->tensors[0].bytes, 10u);
  EXPECT_FALSE(h->tensors[1].size_mismatch);
  ASSERT_EQ(h->mismatches.size(), 1u);
  EXPECT_NE(h->mismatches[0].find("'w'"), std::string::npos);
  EXPECT_NE(h->mismatches[0].find("needs 12"), std::string::npos) << h->mismatches[0];
  EXPECT_FALSE(h->offsets_contiguous);  // gap between 10 and 16
}

TEST(ParseSafetensorsHeader, UnknownDtypeSkipsSizeCheck) {
  auto h = ParseSafetensorsHeader(R"({"w":{"dtype":"F8_E8M0","shape":[7],"data_offsets":[0,3]}})");
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->tensors[0].dtype_known);
  EXPECT_FALSE(h->tensors[0].size_mismatch);
  EXPECT_EQ(h->tensors[0].bytes, 3u);
}

TEST(ParseSafetensorsHeader, RejectsBadJson) {
  auto h = ParseSafetensorsHeader(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]})");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kCorruption);
  EXPECT_NE(h.status().message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(ParseSafetensorsHeader("[1,2]").ok());
  EXPECT_FALSE(ParseSafetensorsHeader("").ok());
}

TEST(ParseSafetensorsHeader, RejectsMalformedEntries) {
  struct Case {
    const char* json;
    const char* expect_in_message;
  } cases[] = {
      {R"({"w":{"shape":[2],"data_offsets":[0,4]}})", "'dtype'"},
      {R"({"w":{"dtype":"BF16","data_offsets":[0,4]}})", "'shape'"},
      {R"({"w":{"dtype":"BF16","shape":[-2],"data_offsets":[0,4]}})", "negative"},
      {R"({"w":{"dtype":"BF16","shape":[2]}})", "data_offsets"},
      {R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0]}})", "data_offsets"},
      {R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[8,4]}})", "begin 8 > end 4"},
      {R"({"w":[1,2]})", "not a JSON object"},
      {R"({"__metadata__":[1]})", "__metadata__"},
  };
  for (const Case& c : cases) {
    auto h = ParseSafetensorsHeader(c.json);
    ASSERT_FALSE(h.ok()) << c.json;
    EXPECT_NE(h.status().message().find(c.expect_in_message), std::string::npos)
        << c.json << " -> " << h.status().message();
  }
}

TEST(ParseSafetensorsPrefix, WholeFlowAndTruncation) {
  const std::string json = R"({"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})";
  auto ok = ParseSafetensorsPrefix(FilePrefix(json) + std::string(8, '\x7f'));  // + tensor data
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->total_bytes, 8u);

  std::string truncated = FilePrefix(json);
  truncated.resize(truncated.size() - 5);
  auto bad = ParseSafetensorsPrefix(truncated);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("truncated"), std::string::npos) << bad.status().message();
}


// Found by fuzzing (tests/fuzz/safetensors_fuzz.cc): nlohmann reports a number
// beyond a double as out_of_range, not parse_error, so it escaped the parser
// as an exception.
TEST(ParseSafetensorsHeader, NumberBeyondADoubleIsCorruptionNotAnException) {
  for (const char* json : {R"({"w":{"dtype":"F16","shape":[1e999],"data_offsets":[0,2]}})",
                           R"({"__metadata__":{"x":-1e999}})"}) {
    Result<SafetensorsHeader> h = Status::Internal("not run");
    ASSERT_NO_THROW(h = ParseSafetensorsHeader(json)) << json;
    ASSERT_FALSE(h.ok()) << json;
    EXPECT_EQ(h.status().code(), Code::kCorruption);
    EXPECT_NE(h.status().message().find("not valid JSON"), std::string::npos) << h.status().message();
  }
}

// Seen while writing the fuzz target (its inputs are too short to reach it):
// a metadata value nested 100,000 deep parsed fine and then overflowed the
// stack in dump(). Nesting beyond kMaxSafetensorsJsonDepth is refused.
TEST(ParseSafetensorsHeader, DeepNestingIsRefused) {
  const size_t depth = 100000;
  const std::string deep = R"({"__metadata__":{"x":)" + std::string(depth, '[') + std::string(depth, ']') + "}}";
  auto h = ParseSafetensorsHeader(deep);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kCorruption);
  EXPECT_NE(h.status().message().find("deeper than 64"), std::string::npos) << h.status().message();
  const std::string shallow = R"({"__metadata__":{"x":[[["a"]]]}})";
  auto ok = ParseSafetensorsHeader(shallow);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->metadata.at("x"), R"([[["a"]]])");
}

// A promise of the fuzz target (totals add up without wrapping) the parser
// did not keep: overlapping data_offsets can add up past 2^64, and
// total_bytes wrapped to a small number.
TEST(ParseSafetensorsHeader, SizesThatWrapAreRefused) {
  const std::string max = "18446744073709551615";
  auto h = ParseSafetensorsHeader(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,)" + max +
                                  R"(]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,)" + max + "]}}");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kCorruption);
  EXPECT_NE(h.status().message().find("2^64"), std::string::npos) << h.status().message();
}

TEST(ParseSafetensorsHeader, ErrorMessagesAreValidUtf8AndShort) {
  const std::string long_bad = "{\"w\":\"" + std::string(100000, 'x') + "\xff\"}";
  auto h = ParseSafetensorsHeader(long_bad);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(IsValidUtf8(h.status().message()));
  EXPECT_LT(h.status().message().size(), 1000u);
}

}  // namespace
}  // namespace npuprof
