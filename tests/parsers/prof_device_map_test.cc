#include "parsers/prof_device_map.h"

#include <string>

#include <gtest/gtest.h>

#include "common/utf8.h"

namespace npuprof {
namespace {

const char* kP1 = "PROF_000001_20241118061102981_MORBFBJDEPNJEQPA";
const char* kP2 = "PROF_000001_20260324035119333_03978075KFFEDFAM";

// `find /rt/msprof_data` after `msprof --export=on`, following the tree of
// msprof_export.output-tree.sample.txt: two worker processes, two PROF dirs
// (devices 0,1 and 2,3), raw data under host/ and device_<id>/.
std::string FindOutput() {
  std::string p1 = std::string("/rt/msprof_data/") + kP1;
  std::string p2 = std::string("/rt/msprof_data/") + kP2;
  return "/rt/msprof_data\n" + p1 + "\n" + p1 + "/host\n" + p1 + "/host/data\n" + p1 +
         "/host/info.json\n" + p1 + "/device_0\n" + p1 + "/device_0/data\n" + p1 +
         "/device_0/data/npu_module_mem.data.0.slice_0\n" + p1 + "/device_1\n" + p1 +
         "/device_1/data/npu_mem.data.1.slice_0\n" + p1 + "/mindstudio_profiler_log\n" + p1 +
         "/mindstudio_profiler_log/log\n" + p1 + "/mindstudio_profiler_output\n" + p1 +
         "/mindstudio_profiler_output/msprof_20241118061314.json\n" + p1 +
         "/mindstudio_profiler_output/op_summary_20241118061317.csv\n" + p1 +
         "/mindstudio_profiler_output/npu_module_mem_20241118061317.csv\n" + p1 +
         "/mindstudio_profiler_output/npu_mem_20241118061317.csv\n" + p1 +
         "/mindstudio_profiler_output/README.txt\n" + p2 + "\n" + p2 + "/device_2/data/x\n" + p2 +
         "/device_3/data/y\n" + p2 + "/mindstudio_profiler_output/npu_module_mem_20260324035230.csv\n" +
         p2 + "/mindstudio_profiler_output/npu_mem_20260324035230.csv\n" +
         "/rt/msprof_data/stray.csv\n";
}

TEST(RelativePathsFromListing, StripsRoot) {
  auto paths = RelativePathsFromListing("/r/a\n/r\n\n  /r/b/c.csv \r\n/other/x\n", "/r/");
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "b/c.csv", "/other/x"}));
}

TEST(BuildProfDeviceMap, RealisticExportListing) {
  ProfDeviceMap map = BuildProfDeviceMap(RelativePathsFromListing(FindOutput(), "/rt/msprof_data"));
  ASSERT_EQ(map.prof_devices.size(), 2u);
  EXPECT_EQ(map.prof_devices.at(kP1), (std::vector<int>{0, 1}));
  EXPECT_EQ(map.prof_devices.at(kP2), (std::vector<int>{2, 3}));

  ASSERT_EQ(map.csvs.size(), 6u);
  const ProfCsvEntry& module1 = map.csvs[1];
  EXPECT_EQ(module1.path, std::string(kP1) + "/mindstudio_profiler_output/npu_module_mem_20241118061317.csv");
  EXPECT_EQ(module1.file_name, "npu_module_mem_20241118061317.csv");
  EXPECT_EQ(module1.local_name, "npu_module_mem_20241118061317.csv");
  EXPECT_EQ(module1.prof_dir, kP1);
  EXPECT_EQ(module1.scope, "prof");
  EXPECT_EQ(module1.device_ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(module1.report, "npu_module_mem");
  EXPECT_EQ(module1.export_timestamp, "20241118061317");
  EXPECT_EQ(module1.slice, -1);
  EXPECT_TRUE(module1.newest_export);
  EXPECT_EQ(map.csvs[2].report, "npu_mem");
  EXPECT_EQ(map.csvs[0].report, "op_summary");

  EXPECT_EQ(map.csvs[3].device_ids, (std::vector<int>{2, 3}));
  const ProfCsvEntry& stray = map.csvs[5];
  EXPECT_EQ(stray.scope, "unmapped");
  EXPECT_TRUE(stray.prof_dir.empty());
  EXPECT_TRUE(stray.device_ids.empty());

  nlohmann::json prof = ProfDevicesJson(map);
  EXPECT_EQ(prof, nlohmann::json::parse(std::string(R"({")") + kP1 + R"(":[0,1],")" + kP2 + R"(":[2,3]})"));

  nlohmann::json csv_map = CsvDeviceMapJson(map);
  EXPECT_EQ(csv_map.size(), 5u);  // the stray CSV is not under a PROF dir
  EXPECT_EQ(csv_map["npu_module_mem_20241118061317.csv"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(csv_map["npu_module_mem_20260324035230.csv"], nlohmann::json::array({2, 3}));
  EXPECT_FALSE(csv_map.contains("stray.csv"));

  nlohmann::json full = ProfDeviceMapJson(map);
  EXPECT_EQ(full["prof_dirs"], prof);
  EXPECT_EQ(full["__prof_device_map__"], csv_map);
  EXPECT_EQ(full["csvs"].size(), 6u);
  EXPECT_EQ(full["csvs"][5]["scope"], "unmapped");
}

TEST(BuildProfDeviceMap, SameNameInTwoProfDirsGetsUniqueLocalNames) {
  ProfDeviceMap map = BuildProfDeviceMap({
      std::string(kP1) + "/device_0/data/a",
      std::string(kP1) + "/mindstudio_profiler_output/npu_module_mem_20250101120000.csv",
      std::string(kP2) + "/device_4/data/a",
      std::string(kP2) + "/mindstudio_profiler_output/npu_module_mem_20250101120000.csv",
  });
  ASSERT_EQ(map.csvs.size(), 2u);
  EXPECT_EQ(map.csvs[0].local_name, "npu_module_mem_20250101120000.csv");
  EXPECT_EQ(map.csvs[1].local_name, "npu_module_mem_20250101120000_1.csv");
  nlohmann::json csv_map = CsvDeviceMapJson(map);
  EXPECT_EQ(csv_map["npu_module_mem_20250101120000.csv"], nlohmann::json::array({0}));
  EXPECT_EQ(csv_map["npu_module_mem_20250101120000_1.csv"], nlohmann::json::array({4}));
}

TEST(BuildProfDeviceMap, OldPerDeviceSummaryLayout) {
  ProfDeviceMap map = BuildProfDeviceMap({
      "./PROF_000001_20230101000000000_ABCDEFGHIJKLMNOP/device_0/summary/npu_module_mem_0_1_1.csv",
      "PROF_000001_20230101000000000_ABCDEFGHIJKLMNOP//device_1/summary/npu_mem_1_1.csv",
      "PROF_000001_20230101000000000_ABCDEFGHIJKLMNOP/host/summary/api_statistic_0_1.csv",
  });
  ASSERT_EQ(map.csvs.size(), 3u);
  EXPECT_EQ(map.csvs[0].scope, "device");
  EXPECT_EQ(map.csvs[0].device_ids, (std::vector<int>{0}));
  EXPECT_EQ(map.csvs[0].report, "npu_module_mem");
  EXPECT_TRUE(map.csvs[0].export_timestamp.empty());
  EXPECT_EQ(map.csvs[1].path, "PROF_000001_20230101000000000_ABCDEFGHIJKLMNOP/device_1/summary/npu_mem_1_1.csv");
  EXPECT_EQ(map.csvs[1].device_ids, (std::vector<int>{1}));
  EXPECT_EQ(map.csvs[1].report, "npu_mem");
  EXPECT_EQ(map.csvs[2].scope, "prof");
  EXPECT_EQ(map.csvs[2].device_ids, (std::vector<int>{0, 1}));
}

TEST(BuildProfDeviceMap, ReExportAndSlices) {
  const std::string out = std::string(kP1) + "/mindstudio_profiler_output/";
  ProfDeviceMap map = BuildProfDeviceMap({
      std::string(kP1) + "/device_0",
      out + "npu_mem_20241118061317.csv",
      out + "npu_mem_20241118070000.csv",
      out + "npu_module_mem_slice_0_20241118061317.csv",
      out + "npu_module_mem_slice_1_20241118061317.csv",
  });
  ASSERT_EQ(map.csvs.size(), 4u);
  EXPECT_FALSE(map.csvs[0].newest_export);
  EXPECT_TRUE(map.csvs[1].newest_export);
  EXPECT_EQ(map.csvs[2].report, "npu_module_mem");
  EXPECT_EQ(map.csvs[2].slice, 0);
  EXPECT_EQ(map.csvs[3].slice, 1);
  EXPECT_TRUE(map.csvs[2].newest_export);
  EXPECT_TRUE(map.csvs[3].newest_export);
  EXPECT_EQ(map.csvs[0].device_ids, (std::vector<int>{0}));
}

TEST(BuildProfDeviceMap, TorchNpuNestedProfDirAndNonProfNames) {
  ProfDeviceMap map = BuildProfDeviceMap({
      "dp0_pp0_tp0_dcp0_ep0_rank0_242_20260915224145200_ascend_pt/PROF_000001_20260915224145300_00000242ABCDEFGH/device_5/data/x",
      "dp0_pp0_tp0_dcp0_ep0_rank0_242_20260915224145200_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
      "PROF_abc/device_0/data/y",
      "PROF_1_2_/device_0/z",
  });
  ASSERT_EQ(map.prof_devices.size(), 1u);
  EXPECT_EQ(map.prof_devices.begin()->first,
            "dp0_pp0_tp0_dcp0_ep0_rank0_242_20260915224145200_ascend_pt/PROF_000001_20260915224145300_00000242ABCDEFGH");
  EXPECT_EQ(map.prof_devices.begin()->second, (std::vector<int>{5}));
  ASSERT_EQ(map.csvs.size(), 1u);
  EXPECT_EQ(map.csvs[0].scope, "unmapped");
  EXPECT_EQ(map.csvs[0].report, "kernel_details");
}

TEST(BuildProfDeviceMap, ProfDirWithoutDevicesAndEmptyInput) {
  ProfDeviceMap map = BuildProfDeviceMap({std::string(kP1) + "/mindstudio_profiler_output/npu_mem_20241118061317.csv"});
  EXPECT_EQ(map.prof_devices.at(kP1), std::vector<int>{});
  ASSERT_EQ(map.csvs.size(), 1u);
  EXPECT_EQ(map.csvs[0].scope, "prof");
  EXPECT_TRUE(map.csvs[0].device_ids.empty());
  EXPECT_EQ(CsvDeviceMapJson(map)["npu_mem_20241118061317.csv"], nlohmann::json::array());

  ProfDeviceMap none = BuildProfDeviceMap({});
  EXPECT_TRUE(none.csvs.empty());
  EXPECT_EQ(ProfDevicesJson(none), nlohmann::json::object());
}


// Found by fuzzing (tests/fuzz/prof_device_map_fuzz.cc): a file name on the
// target that is not UTF-8 made ProfDeviceMapJson().dump() throw (json
// type_error 316). The map keeps the bytes (they name the file to collect);
// the JSON projections are valid UTF-8.
TEST(BuildProfDeviceMap, InvalidUtf8NamesKeepTheirBytesAndGiveValidJson) {
  const std::string name = "npu_mem_\xff\xfe.csv";
  ProfDeviceMap map = BuildProfDeviceMap({std::string(kP1) + "/device_0/data/x",
                                          std::string(kP1) + "/mindstudio_profiler_output/" + name});
  ASSERT_EQ(map.csvs.size(), 1u);
  EXPECT_EQ(map.csvs[0].file_name, name);
  std::string dumped;
  ASSERT_NO_THROW(dumped = ProfDeviceMapJson(map).dump());
  EXPECT_TRUE(IsValidUtf8(dumped));
  EXPECT_EQ(CsvDeviceMapJson(map)["npu_mem_\xef\xbf\xbd\xef\xbf\xbd.csv"], (std::vector<int>{0}));
}

}  // namespace
}  // namespace npuprof
