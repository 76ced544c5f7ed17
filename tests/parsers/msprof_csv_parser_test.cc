#include "parsers/msprof_csv_parser.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/utf8.h"
#include "tests/support/build_paths.h"

namespace npuprof {
namespace {

std::string ReadSample(const std::string& name) {
  std::ifstream in(std::string(npuprof::build_paths::TestDataDir()) + "/ascend-formats/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- kind detection ---------------------------------------------------------

TEST(DetectMsprofCsvKind, EverySample) {
  struct Case {
    const char* file;
    MsprofCsvKind kind;
  } cases[] = {
      {"npu_module_mem.msprof.header.csv", MsprofCsvKind::kNpuModuleMem},
      {"npu_module_mem.msprof.sample-from-doc-figure.csv", MsprofCsvKind::kNpuModuleMem},
      {"npu_module_mem.torch_npu.header.csv", MsprofCsvKind::kNpuModuleMem},
      {"npu_module_mem.torch_npu.legacy.header.csv", MsprofCsvKind::kNpuModuleMem},
      {"npu_mem.msprof.header.csv", MsprofCsvKind::kNpuMem},
      {"npu_mem.msprof.sample-from-doc-figure.csv", MsprofCsvKind::kNpuMem},
      {"memory_record.torch_npu.header.csv", MsprofCsvKind::kMemoryRecord},
      {"memory_record.torch_npu.sample-from-doc-figure.csv", MsprofCsvKind::kMemoryRecord},
      {"kernel_details.header.csv", MsprofCsvKind::kKernelDetails},
      {"kernel_details.sample.blockdim-arith-nodeviceid.csv", MsprofCsvKind::kKernelDetails},
      {"kernel_details.sample.blockdim-pipeutil-opstate.csv", MsprofCsvKind::kKernelDetails},
      {"trace_view.sample.json", MsprofCsvKind::kUnknown},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MsprofCsvKindName(DetectMsprofCsvKind(ReadSample(c.file))), std::string(MsprofCsvKindName(c.kind)))
        << c.file;
  }
  EXPECT_EQ(DetectMsprofCsvKind(""), MsprofCsvKind::kUnknown);
  // Old per-device npu_mem header without Device_id; BOM + CRLF.
  EXPECT_EQ(DetectMsprofCsvKind("\xEF\xBB\xBF" "event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\r\n"),
            MsprofCsvKind::kNpuMem);
}

// ---- npu_module_mem ------------------------------------------------------------

TEST(ParseNpuModuleMemCsv, MsprofDocFigureSample) {
  auto t = ParseNpuModuleMemCsv(ReadSample("npu_module_mem.msprof.sample-from-doc-figure.csv"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->unit_is_kb);
  EXPECT_TRUE(t->has_device_id_column);
  EXPECT_EQ(t->data_rows, 4u);
  ASSERT_EQ(t->components.size(), 1u);
  const ModuleMemComponent& slog = t->components[0];
  EXPECT_EQ(slog.component, "SLOG");
  EXPECT_EQ(slog.device_id, 0);
  EXPECT_EQ(slog.rows, 4u);
  EXPECT_TRUE(slog.has_value);
  EXPECT_DOUBLE_EQ(slog.max_reserved_mb, 0.0);
  EXPECT_EQ(slog.max_raw_value, "0");
  EXPECT_EQ(slog.max_data_row, 1u);  // all equal: the first row is the evidence
  EXPECT_EQ(slog.max_timestamp_raw, "170953965429548");
}

TEST(ParseNpuModuleMemCsv, HeaderOnlySamplesHaveNoComponents) {
  for (const char* f : {"npu_module_mem.msprof.header.csv", "npu_module_mem.torch_npu.header.csv",
                        "npu_module_mem.torch_npu.legacy.header.csv"}) {
    auto t = ParseNpuModuleMemCsv(ReadSample(f));
    ASSERT_TRUE(t.ok()) << f << ": " << t.status().ToString();
    EXPECT_TRUE(t->components.empty()) << f;
    EXPECT_EQ(t->data_rows, 0u);
  }
  EXPECT_TRUE(ParseNpuModuleMemCsv(ReadSample("npu_module_mem.msprof.header.csv"))->unit_is_kb);
  EXPECT_FALSE(ParseNpuModuleMemCsv(ReadSample("npu_module_mem.torch_npu.header.csv"))->unit_is_kb);
}

TEST(ParseNpuModuleMemCsv, KbRowsWithTrailingTabsTwoDevicesAndMinusOne) {
  // C++ exporter style: a TAB after each timestamp, rows sorted by module then time.
  const std::string csv =
      "Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n"
      "0,SLOG,1730343450651306.550\t,2048,NPU:0\n"
      "0,HCCL,1730343450651306.550\t,512000,NPU:0\n"
      "0,HCCL,1730343450671306.550\t,612044,NPU:0\n"
      "0,HCCL,1730343450691306.550\t,600000,NPU:0\n"
      "1,HCCL,1730343450651307.000\t,-1,NPU:1\n"
      "1,HCCL,1730343450671307.000\t,1024,NPU:1\n"
      "0,RUNTIME,1730343450651306.550\t,128307,NPU:0\n"
      "0,RUNTIME,1730343450651306.550\t,N/A,NPU:0\n";
  auto t = ParseNpuModuleMemCsv(csv);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->data_rows, 8u);
  EXPECT_EQ(t->skipped_rows, 1u);
  ASSERT_EQ(t->components.size(), 4u);

  const ModuleMemComponent* hccl0 = t->Find("HCCL", 0);
  ASSERT_NE(hccl0, nullptr);
  EXPECT_DOUBLE_EQ(hccl0->max_reserved_mb, 612044.0 / 1024.0);
  EXPECT_DOUBLE_EQ(hccl0->max_reserved_mb, 597.69921875);  // 597*1024 = 611328, +716/1024
  EXPECT_EQ(hccl0->max_raw_value, "612044");
  EXPECT_EQ(hccl0->max_data_row, 3u);
  EXPECT_EQ(hccl0->max_timestamp_raw, "1730343450671306.550");  // TAB stripped
  EXPECT_EQ(hccl0->rows, 3u);

  const ModuleMemComponent* hccl1 = t->Find("HCCL", 1);
  ASSERT_NE(hccl1, nullptr);
  EXPECT_DOUBLE_EQ(hccl1->max_reserved_mb, 1.0);
  EXPECT_EQ(hccl1->negative_rows, 1u);
  EXPECT_EQ(hccl1->max_data_row, 6u);

  const ModuleMemComponent* runtime = t->Find("RUNTIME");
  ASSERT_NE(runtime, nullptr);
  EXPECT_DOUBLE_EQ(runtime->max_reserved_mb, 128307.0 / 1024.0);
  EXPECT_DOUBLE_EQ(t->Find("SLOG", 0)->max_reserved_mb, 2.0);
  EXPECT_EQ(t->Find("HCCL", 7), nullptr);
  EXPECT_EQ(t->Find("DVPP"), nullptr);
}

TEST(ParseNpuModuleMemCsv, OnlyMinusOneRowsHaveNoValue) {
  auto t = ParseNpuModuleMemCsv("Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n"
                                "2,DEVMM,1.0,-1,NPU:2\n");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->components.size(), 1u);
  EXPECT_FALSE(t->components[0].has_value);
  EXPECT_EQ(t->components[0].negative_rows, 1u);
}

TEST(ParseNpuModuleMemCsv, TorchNpuMbUnits) {
  // The doc figure's row (timestamp cut off there; a plausible one used here).
  auto t = ParseNpuModuleMemCsv(ReadSample("npu_module_mem.torch_npu.header.csv") +
                                "6,SLOG,1730343450651306.550\t,158.140625,NPU:6\n"
                                "6,APP,1730343450651306.550\t,0.0,NPU:6\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->unit_is_kb);
  const ModuleMemComponent* slog = t->Find("SLOG", 6);
  ASSERT_NE(slog, nullptr);
  EXPECT_DOUBLE_EQ(slog->max_reserved_mb, 158.140625);  // MB taken as is
  EXPECT_EQ(slog->max_raw_value, "158.140625");
  EXPECT_DOUBLE_EQ(t->Find("APP", 6)->max_reserved_mb, 0.0);
}

TEST(ParseNpuModuleMemCsv, LegacyHeaderTakesDeviceFromNpuColumn) {
  auto t = ParseNpuModuleMemCsv(ReadSample("npu_module_mem.torch_npu.legacy.header.csv") +
                                "HCCL,1706525863596995.580,583.5,NPU:3\r\n"
                                "HCCL,1706525863616995.580,600.25,NPU:3\r\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->has_device_id_column);
  const ModuleMemComponent* hccl = t->Find("HCCL", 3);
  ASSERT_NE(hccl, nullptr);
  EXPECT_DOUBLE_EQ(hccl->max_reserved_mb, 600.25);
  EXPECT_EQ(hccl->max_data_row, 2u);
}

TEST(ParseNpuModuleMemCsv, HostRowsHaveNoDevice) {
  auto t = ParseNpuModuleMemCsv("Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n"
                                "host,APP,1.0,1024,\n");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->components.size(), 1u);
  EXPECT_FALSE(t->components[0].device_id.has_value());
}

TEST(ParseNpuModuleMemCsv, MissingColumnsAreNamed) {
  auto no_value = ParseNpuModuleMemCsv("Device_id,Component,Timestamp(us),Device\n0,HCCL,1,NPU:0\n");
  ASSERT_FALSE(no_value.ok());
  EXPECT_EQ(no_value.status().code(), Code::kInvalidArgument);
  EXPECT_NE(no_value.status().message().find("Total Reserved(KB) or Total Reserved(MB)"), std::string::npos)
      << no_value.status().message();
  auto no_component = ParseNpuModuleMemCsv("Device_id,Timestamp(us),Total Reserved(KB)\n");
  ASSERT_FALSE(no_component.ok());
  EXPECT_NE(no_component.status().message().find("\"Component\""), std::string::npos);
  EXPECT_FALSE(ParseNpuModuleMemCsv("").ok());
}

// ---- npu_mem -------------------------------------------------------------------

TEST(ParseNpuMemCsv, MsprofDocFigureSample) {
  auto t = ParseNpuMemCsv(ReadSample("npu_mem.msprof.sample-from-doc-figure.csv"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->has_device_id_column);
  ASSERT_EQ(t->series.size(), 1u);
  const NpuMemSeries& app = t->series[0];
  EXPECT_EQ(app.event, "APP");
  EXPECT_EQ(app.device_id, 0);
  ASSERT_EQ(app.samples.size(), 4u);
  EXPECT_DOUBLE_EQ(app.samples[0].hbm_mb, 24.0);           // 24576 KB
  EXPECT_DOUBLE_EQ(*app.samples[0].ddr_mb, 65.7578125);    // 67336 KB
  EXPECT_DOUBLE_EQ(*app.samples[0].memory_mb, 89.7578125); // 91912 KB
  EXPECT_EQ(app.samples[0].timestamp_raw, "1709539654242981.240");
  EXPECT_NEAR(app.samples[0].timestamp_us, 1709539654242981.240, 0.5);
  EXPECT_DOUBLE_EQ(app.max_hbm_mb, 24.0);
  EXPECT_EQ(app.max_data_row, 1u);
  EXPECT_EQ(app.max_raw_hbm_kb, "24576");
  EXPECT_DOUBLE_EQ(app.last_hbm_mb, 24.0);
  EXPECT_EQ(app.last_data_row, 4u);
  EXPECT_EQ(app.last_timestamp_raw, "1709539654302965.240");
}

TEST(ParseNpuMemCsv, HeaderOnlySample) {
  auto t = ParseNpuMemCsv(ReadSample("npu_mem.msprof.header.csv"));
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->series.empty());
}

TEST(ParseNpuMemCsv, DeviceAndAppSeriesMaxAndLast) {
  const std::string csv =
      "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n"
      "0,Device,0,3000000,3000000,100.000\t\n"
      "0,APP,0,1024000,1024000,100.000\t\n"
      "0,Device,0,29000000,29000000,120.000\t\n"
      "0,APP,0,28160000,28160000,120.000\t\n"
      "0,Device,0,28000000,28000000,140.000\t\n"
      "0,APP,0,27000000,27000000,140.000\t\n"
      "1,APP,0,2048,2048,100.000\t\n";
  auto t = ParseNpuMemCsv(csv);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->series.size(), 3u);
  const NpuMemSeries* dev = t->Find("Device", 0);
  ASSERT_NE(dev, nullptr);
  EXPECT_DOUBLE_EQ(dev->max_hbm_mb, 29000000.0 / 1024.0);
  EXPECT_EQ(dev->max_data_row, 3u);
  EXPECT_EQ(dev->max_timestamp_raw, "120.000");
  EXPECT_DOUBLE_EQ(dev->last_hbm_mb, 28000000.0 / 1024.0);
  EXPECT_EQ(dev->last_data_row, 5u);
  const NpuMemSeries* app0 = t->Find("APP", 0);
  ASSERT_NE(app0, nullptr);
  EXPECT_DOUBLE_EQ(app0->max_hbm_mb, 27500.0);  // 28160000 KB
  EXPECT_EQ(app0->samples.size(), 3u);
  EXPECT_DOUBLE_EQ(t->Find("APP", 1)->max_hbm_mb, 2.0);
}

TEST(ParseNpuMemCsv, LastIsByTimestampNotRowOrder) {
  auto t = ParseNpuMemCsv("event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n"
                          "APP,0,2048,2048,200\n"
                          "APP,0,1024,1024,100\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->has_device_id_column);
  const NpuMemSeries* app = t->Find("APP");
  ASSERT_NE(app, nullptr);
  EXPECT_FALSE(app->device_id.has_value());
  EXPECT_DOUBLE_EQ(app->last_hbm_mb, 2.0);
  EXPECT_EQ(app->last_data_row, 1u);
}

TEST(ParseNpuMemCsv, MissingColumnsAreNamed) {
  auto t = ParseNpuMemCsv("Device_id,event,ddr(KB),memory(KB)\n");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("\"hbm(KB)\", \"timestamp(us)\""), std::string::npos)
      << t.status().message();
}

// ---- kernel_details.csv -----------------------------------------------------------

TEST(CheckKernelDetailsCsv, RealSamples) {
  auto pipe = CheckKernelDetailsCsv(ReadSample("kernel_details.sample.blockdim-pipeutil-opstate.csv"));
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  EXPECT_EQ(pipe->columns, 46u);
  EXPECT_EQ(pipe->data_rows, 5u);
  EXPECT_EQ(pipe->ragged_rows, 0u);  // quoted shapes with commas and "" escapes
  EXPECT_TRUE(pipe->has_step_id);
  EXPECT_FALSE(pipe->has_device_id);
  EXPECT_EQ(pipe->block_column, "Block Dim");

  auto arith = CheckKernelDetailsCsv(ReadSample("kernel_details.sample.blockdim-arith-nodeviceid.csv"));
  ASSERT_TRUE(arith.ok()) << arith.status().ToString();
  EXPECT_EQ(arith->columns, 33u);
  EXPECT_EQ(arith->data_rows, 5u);
  EXPECT_EQ(arith->ragged_rows, 0u);

  auto header = CheckKernelDetailsCsv(ReadSample("kernel_details.header.csv"));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->data_rows, 0u);
}

TEST(CheckKernelDetailsCsv, Level0HeaderWithBlockNum) {
  auto k = CheckKernelDetailsCsv(
      "Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Num\n"
      "0,MatMul1,MatMul,AI_CORE,\"1736413971558972.912\t\",185.5,1.0,16\n"
      "0,Cast2,Cast,AI_VECTOR_CORE,1736413971559972.912,3.1,0.5\n");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_TRUE(k->has_device_id);
  EXPECT_FALSE(k->has_step_id);
  EXPECT_EQ(k->block_column, "Block Num");
  EXPECT_EQ(k->data_rows, 2u);
  EXPECT_EQ(k->ragged_rows, 1u);
}

TEST(CheckKernelDetailsCsv, MissingColumnsAreNamed) {
  auto k = CheckKernelDetailsCsv("Name,Type,Start Time(us)\nA,B,1\n");
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("\"Accelerator Core\", \"Duration(us)\""), std::string::npos)
      << k.status().message();
  EXPECT_FALSE(CheckKernelDetailsCsv("").ok());
}

// ---- trace_view.json ---------------------------------------------------------------

TEST(CheckTraceViewJson, RealSampleIsBareArray) {
  auto t = CheckTraceViewJson(ReadSample("trace_view.sample.json"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->bare_array);
  EXPECT_EQ(t->event_count, 51u);
  EXPECT_EQ(t->non_object_events, 0u);
}

TEST(CheckTraceViewJson, ObjectWithTraceEvents) {
  auto t = CheckTraceViewJson(
      R"({"displayTimeUnit":"ns","meta":[1,2,3],"traceEvents":[{"ph":"X","args":{"a":[1,2]}},{"ph":"M"}]})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->bare_array);
  EXPECT_EQ(t->event_count, 2u);
}

TEST(CheckTraceViewJson, CountsNonObjectElements) {
  auto t = CheckTraceViewJson(R"([{"ph":"X"}, 1, [2], "s"])");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->event_count, 4u);
  EXPECT_EQ(t->non_object_events, 3u);
  auto empty = CheckTraceViewJson("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->event_count, 0u);
}

TEST(CheckTraceViewJson, RejectsTruncatedAndWrongShape) {
  std::string sample = ReadSample("trace_view.sample.json");
  auto truncated = CheckTraceViewJson(sample.substr(0, sample.size() / 2));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), Code::kCorruption);
  EXPECT_NE(truncated.status().message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(CheckTraceViewJson(R"({"foo":[1]})").ok());
  EXPECT_FALSE(CheckTraceViewJson(R"({"traceEvents":{}})").ok());
  EXPECT_FALSE(CheckTraceViewJson("42").ok());
  EXPECT_FALSE(CheckTraceViewJson("").ok());
}


// ---- remote bytes (found by fuzzing: tests/fuzz/msprof_csv_fuzz.cc) ----------------

// from_chars reads "inf", "nan" and "infinity" as numbers: an npu_module_mem
// row with "nan" became a component maximum of NaN, stored as JSON null, and
// `show`/`export` of the run later crashed reading it as a number. Such cells
// (and numbers beyond +/-2^63, like 1e999) refuse the file, naming the row and
// the column; a cell that is no number at all still only skips its row.
TEST(ParseNpuModuleMemCsv, NonFiniteValuesAreRefusedNamingRowAndColumn) {
  const std::string header = "Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n";
  for (const std::string bad : {"inf", "-inf", "nan", "NaN", "infinity", "1e999", "-1e999", "1e-400", "1e30"}) {
    auto t = ParseNpuModuleMemCsv(header + "0,HCCL,1,2048,NPU:0\n0,RUNTIME,2," + bad + ",NPU:0\n");
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), Code::kCorruption) << bad;
    EXPECT_NE(t.status().message().find("data row 2"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("Total Reserved(KB)"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("'" + bad + "'"), std::string::npos) << t.status().message();
  }
  auto skipped = ParseNpuModuleMemCsv(header + "0,HCCL,1,N/A,NPU:0\n0,HCCL,2,1e3,NPU:0\n");
  ASSERT_TRUE(skipped.ok()) << skipped.status().message();
  EXPECT_EQ(skipped->skipped_rows, 1u);
  EXPECT_DOUBLE_EQ(skipped->components.at(0).max_reserved_mb, 1000.0 / 1024.0);
}

TEST(ParseNpuMemCsv, NonFiniteValuesAreRefusedInEveryNumberColumn) {
  const std::string header = "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)\n";
  const std::string good = "0,APP,1,2,3,4\n";
  struct Case {
    std::string row;
    const char* column;
  } cases[] = {
      {"0,APP,1,nan,3,4\n", "hbm(KB)"},
      {"0,APP,1,2,3,inf\n", "timestamp(us)"},
      {"0,APP,1e999,2,3,4\n", "ddr(KB)"},
      {"0,APP,1,2,-infinity,4\n", "memory(KB)"},
  };
  for (const Case& c : cases) {
    auto t = ParseNpuMemCsv(header + good + c.row);
    ASSERT_FALSE(t.ok()) << c.row;
    EXPECT_EQ(t.status().code(), Code::kCorruption);
    EXPECT_NE(t.status().message().find("data row 2"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.column), std::string::npos) << t.status().message();
  }
}

TEST(ParseNpuModuleMemCsv, ErrorsQuoteTheHeaderAsValidUtf8) {
  auto t = ParseNpuModuleMemCsv("Comp\xff\xfeonent,Total\n0,1\n");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(IsValidUtf8(t.status().message())) << t.status().message();
  auto bad_cell = ParseNpuModuleMemCsv("Component,Total Reserved(MB)\nx,inf\xff\n");
  ASSERT_TRUE(bad_cell.ok());  // "inf\xff" is no number: the row is skipped
  EXPECT_EQ(bad_cell->skipped_rows, 1u);
  auto v = CheckTraceViewJson("[\"\xff\xfe");
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(IsValidUtf8(v.status().message())) << v.status().message();
}

}  // namespace
}  // namespace npuprof
