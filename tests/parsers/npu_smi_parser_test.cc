// Tests of parsers/npu_smi_parser: every real sample in tests/data/npu-smi
// against its hand-read .expected.json, plus hand-made edge cases.
#include "parsers/npu_smi_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "tests/support/build_paths.h"

namespace npuprof::parsers {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = fs::path(npuprof::build_paths::TestDataDir()) / "npu-smi";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> SampleFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kDataDir)) {
    if (e.path().extension() == ".txt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(NpuSmiParserSamples, EverySampleMatchesItsExpectedJson) {
  const auto files = SampleFiles();
  ASSERT_GE(files.size(), 12u) << "samples missing under " << kDataDir;
  for (const auto& txt : files) {
    SCOPED_TRACE(txt.filename().string());
    auto expected_path = txt;
    expected_path.replace_extension(".expected.json");
    ASSERT_TRUE(fs::exists(expected_path));
    const auto expected = nlohmann::json::parse(ReadFile(expected_path));
    auto snap = ParseNpuSmi(ReadFile(txt));
    ASSERT_TRUE(snap.ok()) << snap.status().message();
    const auto got = NpuSmiToJson(*snap);
    EXPECT_EQ(got, expected) << "got:\n" << got.dump(2);
  }
}

TEST(NpuSmiParserSamples, VersionsAndIdColumns) {
  auto a3 = ParseNpuSmi(ReadFile(kDataDir / "02_Ascend910-A3_8npu_procs.txt"));
  ASSERT_TRUE(a3.ok());
  EXPECT_EQ(a3->tool_version, "25.2.3");
  EXPECT_EQ(a3->driver_version, "25.2.3");
  ASSERT_EQ(a3->devices.size(), 16u);
  EXPECT_EQ(a3->devices[15].device_id, 15);  // Phy-ID runs globally
  EXPECT_EQ(a3->devices[1].npu, 0);
  EXPECT_EQ(a3->devices[1].chip, 1);

  auto old = ParseNpuSmi(ReadFile(kDataDir / "13_910A_8npu_noproc.txt"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->tool_version, "1.8.21");
  EXPECT_EQ(old->driver_version, "20.2.2.spc001");
  EXPECT_FALSE(old->devices[0].device_id.has_value());

  auto p310 = ParseNpuSmi(ReadFile(kDataDir / "11_310_5npu_noproc.txt"));
  ASSERT_TRUE(p310.ok());
  ASSERT_EQ(p310->devices.size(), 20u);
  EXPECT_EQ(p310->devices[19].npu, 2052);
  EXPECT_EQ(p310->devices[19].chip, 3);
  EXPECT_EQ(p310->devices[19].device_id, 19);
  EXPECT_EQ(p310->devices[0].name, "310");  // a numeric name is still the name
}

// Hand-made: A3-like layout, two chips per NPU, five-digit used values,
// full-width chip separator, power "-", no trailing newline.
constexpr const char* kTwoChips =
    "+------------------------------------------------------------------------------------------------+\n"
    "| npu-smi 25.2.3                   Version: 25.2.3                                               |\n"
    "+---------------------------+---------------+----------------------------------------------------+\n"
    "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
    "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
    "+===========================+===============+====================================================+\n"
    "| 3     Ascend910           | OK            | 232.5       52                0    / 0             |\n"
    "| 0     6                   | 0000:9D:00.0  | 17          0    / 0          41052/ 65536         |\n"
    "+------------------------------------------------------------------------------------------------+\n"
    "| 3     Ascend910           | Warning       | -           51                0    / 0             |\n"
    "| 1     7                   | 0000:9F:00.0  | 0           0    / 0          2888 / 65536         |\n"
    "+===========================+===============+====================================================+";

TEST(NpuSmiParser, TwoChipsPerNpuDoNotOverwriteEachOther) {
  auto snap = ParseNpuSmi(kTwoChips);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->devices.size(), 2u);
  EXPECT_EQ(snap->devices[0].npu, 3);
  EXPECT_EQ(snap->devices[0].chip, 0);
  EXPECT_EQ(snap->devices[0].device_memory_used_mb, 41052);  // "41052/ 65536"
  EXPECT_EQ(snap->devices[0].device_memory_total_mb, 65536);
  EXPECT_EQ(snap->devices[1].npu, 3);
  EXPECT_EQ(snap->devices[1].chip, 1);
  EXPECT_EQ(snap->devices[1].device_memory_used_mb, 2888);
  EXPECT_EQ(snap->devices[1].health, "Warning");
  EXPECT_EQ(snap->devices[1].device_id, 7);
  EXPECT_FALSE(snap->process_table_present);  // absent table, not "no processes"
  EXPECT_TRUE(snap->processes.empty());
  const auto j = NpuSmiToJson(*snap);
  EXPECT_EQ(j["process_table_present"], false);
  EXPECT_EQ(j["devices"][1]["memory_used_mb"], 0);
}

TEST(NpuSmiParser, TolerantToCrlfIndentAndSurroundingText) {
  std::string text = "job 1111 started\n";
  std::istringstream in(kTwoChips);
  for (std::string line; std::getline(in, line);) text += "  " + line + " \r\n";
  text += "Epoch 1 | loss 0.3 |\n";  // the program's own output follows the table
  auto snap = ParseNpuSmi(text);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->devices.size(), 2u);
}

TEST(NpuSmiParser, NotNpuSmiGivesInvalidArgument) {
  auto r = ParseNpuSmi("bash: npu-smi: command not found\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not npu-smi"), std::string::npos);
  EXPECT_FALSE(ParseNpuSmi("").ok());
}

TEST(NpuSmiParser, HeaderWithoutDevicesIsCorruption) {
  const std::string text =
      "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
      "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
      "+===========================+===============+====================================================+\n";
  auto r = ParseNpuSmi(text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorruption);
}

TEST(NpuSmiParser, CutOffBlockIsCorruption) {
  const std::string text =
      "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
      "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
      "+===========================+===============+====================================================+\n"
      "| 0     910B3               | OK            | 97.9        34                0    / 0             |\n";
  auto r = ParseNpuSmi(text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorruption);
}

TEST(NpuSmiParser, MissingHbmPairIsCorruptionNamingTheLine) {
  const std::string text =
      "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
      "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
      "+===========================+===============+====================================================+\n"
      "| 0     910B3               | OK            | 97.9        34                0    / 0             |\n"
      "| 0                         | 0000:C1:00.0  | 0           0    / 0          NA                   |\n";
  auto r = ParseNpuSmi(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 5"), std::string::npos) << r.status().message();
}

TEST(NpuSmiClassify, ProcessOrMemoryMakesBusy) {
  auto snap = ParseNpuSmi(ReadFile(kDataDir / "01_910B3_8npu_procs.txt"));
  ASSERT_TRUE(snap.ok());
  const auto av = ClassifyDevices(*snap);
  ASSERT_EQ(av.size(), 8u);
  EXPECT_TRUE(av[2].busy);
  EXPECT_EQ(av[2].pids, std::vector<int64_t>{1333928});
  EXPECT_NE(av[2].reason.find("1333928"), std::string::npos);
  for (int i : {0, 1, 3, 4, 5, 6, 7}) {
    EXPECT_FALSE(av[i].busy) << i;
    EXPECT_TRUE(av[i].reason.empty());
  }
  // A lower threshold turns the ~3.4 GB idle baseline into "another container".
  const auto strict = ClassifyDevices(*snap, 3000);
  EXPECT_TRUE(strict[0].busy);
  EXPECT_NE(strict[0].reason.find("no visible process"), std::string::npos);
}

TEST(NpuSmiClassify, HbmWithoutProcessIsBusy) {
  // 910B4 in a container with NPU ids 4..7: every device has a process.
  auto snap = ParseNpuSmi(ReadFile(kDataDir / "06_910B4_4npu_procs.txt"));
  ASSERT_TRUE(snap.ok());
  snap->processes.clear();  // as if the processes ran in another container
  const auto av = ClassifyDevices(*snap);
  ASSERT_EQ(av.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(av[i].logical_id, i);
    EXPECT_EQ(av[i].npu, 4 + i);
    EXPECT_TRUE(av[i].busy);
    EXPECT_NE(av[i].reason.find("HBM in use with no visible process (another container?)"), std::string::npos);
  }
}

TEST(NpuSmiClassify, MultiChipProcessesMatchTheirChip) {
  auto snap = ParseNpuSmi(ReadFile(kDataDir / "09_310P3_4npu_procs.txt"));
  ASSERT_TRUE(snap.ok());
  const auto av = ClassifyDevices(*snap);
  ASSERT_EQ(av.size(), 8u);
  EXPECT_EQ(av[0].pids, (std::vector<int64_t>{326429, 326430}));
  EXPECT_EQ(av[1].pids, std::vector<int64_t>{326430});
  EXPECT_TRUE(av[1].busy);
  for (int i = 2; i < 8; ++i) EXPECT_FALSE(av[i].busy) << i;
  EXPECT_EQ(av[7].npu, 32896);
  EXPECT_EQ(av[7].chip, 1);
}

TEST(NpuSmiParser, NameSuffixHealthAndPowerVariants) {
  const std::string text =
      "+--------------------------------------------------------------------------------------------------------+\n"
      "| npu-smi 24.1.rc3.5                               Version: 24.1.rc3.5                                   |\n"
      "+-------------------------------+-----------------+------------------------------------------------------+\n"
      "| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |\n"
      "| Chip                          | Bus-Id          | AICore(%)    Memory-Usage(MB)  HBM-Usage(MB)         |\n"
      "+===============================+=================+======================================================+\n"
      "| 12      910B4-1               | Alarm           | NA           40                0    / 0              |\n"
      "| 0                             | NA              | 0            0    / 0          61000/ 65536          |\n"
      "+===============================+=================+======================================================+\n"
      "+-------------------------------+-----------------+------------------------------------------------------+\n"
      "| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |\n"
      "+===============================+=================+======================================================+\n"
      "| No running processes found in NPU 12                                                                   |\n"
      "+===============================+=================+======================================================+\n";
  auto snap = ParseNpuSmi(text);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->devices.size(), 1u);
  const auto& d = snap->devices[0];
  EXPECT_EQ(d.npu, 12);
  EXPECT_EQ(d.name, "910B4-1");
  EXPECT_EQ(d.health, "Alarm");
  EXPECT_EQ(d.bus_id, "NA");
  EXPECT_EQ(d.hbm_used_mb, 61000);
  EXPECT_EQ(d.device_memory_total_mb, 65536);
  EXPECT_EQ(snap->tool_version, "24.1.rc3.5");
  EXPECT_TRUE(snap->process_table_present);
  EXPECT_TRUE(snap->processes.empty());
  const auto av = ClassifyDevices(*snap);
  EXPECT_TRUE(av[0].busy);  // 61000 MB used, no process visible
  EXPECT_TRUE(av[0].pids.empty());
}

TEST(NpuSmiClassify, A3ChipsAreSeparateDevices) {
  auto snap = ParseNpuSmi(ReadFile(kDataDir / "02_Ascend910-A3_8npu_procs.txt"));
  ASSERT_TRUE(snap.ok());
  const auto av = ClassifyDevices(*snap);
  ASSERT_EQ(av.size(), 16u);
  EXPECT_EQ(av[0].pids, (std::vector<int64_t>{3325989, 3330598, 3328327, 3333165}));
  EXPECT_EQ(av[1].pids, std::vector<int64_t>{3328327});  // NPU 0 chip 1
  EXPECT_EQ(av[1].used_mb, 52948);
  EXPECT_FALSE(av[4].busy);  // NPU 2 chip 0: 3128 MB, no process
  EXPECT_TRUE(av[13].busy);  // NPU 6 chip 1
}

TEST(NpuSmiSnapshotJson, KeyedByLogicalId) {
  auto snap = ParseNpuSmi(ReadFile(kDataDir / "19_310P3_2npu_procs.txt"));
  ASSERT_TRUE(snap.ok());
  const auto j = HbmSnapshotJson(*snap);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j["0"], (nlohmann::json{{"used_mb", 16302}, {"total_mb", 44280}, {"npu", 1}, {"chip", 0}}));
  EXPECT_EQ(j["3"], (nlohmann::json{{"used_mb", 35204}, {"total_mb", 43693}, {"npu", 2}, {"chip", 1}}));
  // Round trip through text keeps the contract.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}


// Found by fuzzing (tests/fuzz/npu_smi_fuzz.cc): a name or health cell in a
// GBK locale or from a broken driver is not UTF-8; NpuSmiToJson().dump()
// threw json type_error 316 and took the worker down. The snapshot keeps the
// bytes; the projection and the error messages are valid UTF-8.
TEST(NpuSmiParser, InvalidUtf8CellsKeepTheirBytesAndGiveValidJson) {
  // A real sample with bytes put into the first chip's name and the first
  // process's (empty) name cell.
  std::string text = ReadFile(kDataDir / "01_910B3_8npu_procs.txt");
  const size_t name = text.find("910B3   ");
  ASSERT_NE(name, std::string::npos);
  text.replace(name, 7, "910B3\xff\xfe");
  const size_t process = text.find("| 1333928       |          ");
  ASSERT_NE(process, std::string::npos);
  text.replace(process + 18, 7, "py\x80thon");
  auto snap = ParseNpuSmi(text);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->devices[0].name, "910B3\xff\xfe");
  ASSERT_FALSE(snap->processes.empty());
  EXPECT_EQ(snap->processes[0].name, "py\x80thon");
  std::string dumped;
  ASSERT_NO_THROW(dumped = NpuSmiToJson(*snap).dump());
  EXPECT_TRUE(IsValidUtf8(dumped));
  EXPECT_EQ(NpuSmiToJson(*snap)["devices"][0]["name"], "910B3\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(NpuSmiToJson(*snap)["processes"][0]["name"], "py\xef\xbf\xbdthon");

  ASSERT_NE(text.find("| 0     910B3"), std::string::npos);
  const std::string broken = text.substr(0, text.find("| 0     910B3")) + "| x\xff\xfe   910B3 | OK | 1 |\n";
  auto r = ParseNpuSmi(broken);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsValidUtf8(r.status().message())) << r.status().message();
}

}  // namespace
}  // namespace npuprof::parsers
