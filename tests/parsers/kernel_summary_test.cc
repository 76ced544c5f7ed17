// The kernel summary of kernel_details.csv (parsers/kernel_summary.h).
#include <gtest/gtest.h>

#include <string>

#include "parsers/kernel_summary.h"

namespace npuprof::testing {
namespace {

const char* kCsv =
    "Step Id,Device_id,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim,"
    "Input Shapes\n"
    "1,0,aclnnMatmul_MatMulV3,MatMulV3,dynamic,AI_CORE,\"1736413971558972.912\t\",100.5,0,20,\"\"\"8,4;4,2\"\"\"\n"
    "1,0,aclnnMatmul_MatMulV3,MatMulV3,dynamic,AI_CORE,1736413971559000.000,99.5,0,20,\"\"\"8,4\"\"\"\n"
    "1,0,hcom_allReduce__123_0_1,hcom_allReduce_,N/A,HCCL,1736413971559100.0,40,0,0,N/A\n"
    "1,0,hcom_allReduce__123_1_1,hcom_allReduce_,N/A,HCCL,1736413971559200.0,60,0,0,N/A\n"
    "1,0,aclnnRmsNorm,RmsNorm,dynamic,AI_VECTOR_CORE,1736413971559300.0,N/A,0,24,\"\"\"8\"\"\"\n"
    "1,0,aclnnRmsNorm,RmsNorm,dynamic,AI_VECTOR_CORE,1736413971559400.0,10,0,24,\"\"\"8\"\"\"\n";

KernelSummary Build(const std::string& text, size_t chunk, size_t max_distinct = 100) {
  KernelSummaryBuilder b(max_distinct);
  for (size_t i = 0; i < text.size(); i += chunk) EXPECT_TRUE(b.Feed(std::string_view(text).substr(i, chunk)).ok());
  auto s = b.Finish();
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : KernelSummary{};
}

TEST(KernelSummary, GroupsByNameAndTypeAndByType) {
  for (size_t chunk : {1, 13, 1 << 20}) {
    const KernelSummary s = Build(kCsv, chunk);
    EXPECT_EQ(s.data_rows, 6u);
    EXPECT_EQ(s.counted_rows, 5u);
    EXPECT_EQ(s.skipped_rows, 1u);  // N/A duration
    EXPECT_DOUBLE_EQ(s.total_us, 310.0);
    EXPECT_EQ(s.distinct_kernels, 4u);
    ASSERT_EQ(s.top.size(), 4u);
    EXPECT_EQ(s.top[0].name, "aclnnMatmul_MatMulV3");
    EXPECT_EQ(s.top[0].count, 2u);
    EXPECT_DOUBLE_EQ(s.top[0].total_us, 200.0);
    EXPECT_DOUBLE_EQ(s.top[0].max_us, 100.5);
    EXPECT_EQ(s.top[0].core, "AI_CORE");
    EXPECT_EQ(s.top[1].name, "hcom_allReduce__123_1_1");  // 60 before 40
    ASSERT_EQ(s.by_type.size(), 3u);
    EXPECT_EQ(s.by_type[0].type, "MatMulV3");
    EXPECT_EQ(s.by_type[1].type, "hcom_allReduce_");  // both call sites in one row
    EXPECT_EQ(s.by_type[1].count, 2u);
    EXPECT_DOUBLE_EQ(s.by_type[1].total_us, 100.0);
  }
}

TEST(KernelSummary, JsonRoundsAndGivesShares) {
  const nlohmann::json j = KernelSummaryJson(Build(kCsv, 4096));
  EXPECT_EQ(j["top"][0]["share_pct"], 64.516);
  EXPECT_EQ(j["top"][0]["mean_us"], 100.0);
  EXPECT_EQ(j["by_type"][2]["type"], "RmsNorm");
  EXPECT_FALSE(j["by_type"][0].contains("name"));
  EXPECT_EQ(j["total_us"], 310.0);
}

TEST(KernelSummary, DistinctCapFoldsIntoOtherAndKeepsTotalsExact) {
  std::string csv = "Name,Type,Duration(us)\n";
  for (int i = 0; i < 50; ++i) csv += "k" + std::to_string(i) + ",T,1\n";
  const KernelSummary s = Build(csv, 7, 10);
  EXPECT_EQ(s.distinct_kernels, 11u);  // 10 kept + "(other kernels)"
  EXPECT_EQ(s.other_rows, 40u);
  EXPECT_DOUBLE_EQ(s.total_us, 50.0);
  EXPECT_EQ(s.top[0].name, kOtherKernelsName);
  EXPECT_DOUBLE_EQ(s.top[0].total_us, 40.0);
}

TEST(KernelSummary, KeepsTheRanksKernelWindowWhenTheFileHasStartTimes) {
  const KernelSummary s = Build(kCsv, 13);
  ASSERT_TRUE(s.first_start_us && s.last_end_us);
  EXPECT_NEAR(*s.first_start_us, 1736413971558972.912, 0.01);  // quoted, with its trailing TAB
  EXPECT_NEAR(*s.last_end_us, 1736413971559400.0 + 10, 0.01);  // the N/A row's start is not counted
  const nlohmann::json j = KernelSummaryJson(s);
  EXPECT_NEAR(j["first_start_us"].get<double>(), 1736413971558972.912, 0.01);
  // No start column, or no start that is a number: no window.
  const KernelSummary none = Build("Name,Type,Duration(us)\na,T,1\n", 64);
  EXPECT_FALSE(none.first_start_us);
  EXPECT_FALSE(KernelSummaryJson(none).contains("first_start_us"));
  const KernelSummary bad = Build("Name,Type,Start Time(us),Duration(us)\na,T,N/A,1\nb,T,-5,2\n", 64);
  EXPECT_FALSE(bad.first_start_us);
  EXPECT_DOUBLE_EQ(bad.total_us, 3.0);
}

TEST(KernelSummary, HostileInputIsRefusedOrBounded) {
  {  // the needed columns, named in the error
    KernelSummaryBuilder b;
    Status st = b.Feed("Name,Start Time(us)\nx,1\n");
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("Type, Duration(us)"), std::string::npos) << st.message();
    EXPECT_FALSE(b.Finish().ok());
  }
  {  // out-of-range duration: corruption, naming the row
    KernelSummaryBuilder b;
    EXPECT_TRUE(b.Feed("Name,Type,Duration(us)\na,T,1\n").ok());
    Status st = b.Feed("b,T,1e999\n");
    EXPECT_EQ(st.code(), Code::kCorruption);
    EXPECT_NE(st.message().find("data row 2"), std::string::npos) << st.message();
  }
  {  // empty file
    KernelSummaryBuilder b;
    EXPECT_FALSE(b.Finish().ok());
  }
  {  // invalid UTF-8 and huge names: cut, and valid in JSON
    std::string name = "\xFF\xFE" + std::string(5000, 'n');
    const KernelSummary s = Build("Name,Type,Duration(us)\n" + name + ",T,-3\n" + name + ",T,2\nshort\n", 5);
    EXPECT_EQ(s.skipped_rows, 2u);  // negative, too few cells
    ASSERT_EQ(s.top.size(), 1u);
    EXPECT_EQ(s.top[0].name.size(), kMaxKernelNameBytes);
    EXPECT_NO_THROW(KernelSummaryJson(s).dump());
  }
}

}  // namespace
}  // namespace npuprof::testing
