// `npuprof inspect vllm-log | msprof-csv | safetensors` on the real samples in
// tests/data (no server needed).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "tests/support/npuprof_harness.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Inspect(const std::string& args, int* rc) {
  const std::string cmd = NpuprofBinary() + " inspect " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p));
  return json::parse(out, nullptr, false);
}

const std::string kData = npuprof::build_paths::TestDataDir();

TEST(InspectCli, VllmLogSample) {
  int rc = -1;
  json j = Inspect("vllm-log " + kData + "/vllm-logs/09_ascend_tp4_per_rank_memory_summary.log", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(j.is_object());
  EXPECT_NEAR(j["weights_gib"].get<double>(), 14.27, 1e-6);
  EXPECT_TRUE(j["ranks"].contains("Worker_TP1 pid=104959"));
  EXPECT_TRUE(j["evidence"]["weights_gib"]["line"].is_number());
}

TEST(InspectCli, MsprofCsvSamples) {
  int rc = -1;
  json mm = Inspect("msprof-csv " + kData + "/ascend-formats/npu_module_mem.msprof.sample-from-doc-figure.csv", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(mm["kind"], "npu_module_mem");
  EXPECT_EQ(mm["unit"], "KB");
  EXPECT_EQ(mm["components"][0]["component"], "SLOG");
  EXPECT_TRUE(mm["components"][0]["evidence"]["row"].is_number());
  json nm = Inspect("msprof-csv " + kData + "/ascend-formats/npu_mem.msprof.sample-from-doc-figure.csv", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(nm["kind"], "npu_mem");
  EXPECT_NEAR(nm["series"][0]["max_hbm_mb"].get<double>(), 24.0, 1e-6);  // 24576 KB
  Inspect("msprof-csv " + kData + "/ascend-formats/kernel_details.header.csv", &rc);
  EXPECT_EQ(rc, 1);  // not a memory CSV
}

}  // namespace
}  // namespace npuprof::testing
