// The HBM sample's output reader (parsers/hbm_sample_output.h) on a real
// npu-smi capture: the devices asked for by logical id, the target's clock
// stamps (and the worker's when `date` has no %N), refusals named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/hbm_sample_output.h"
#include "tests/support/build_paths.h"

namespace npuprof::parsers {
namespace {

std::string Capture() {
  std::ifstream f(std::filesystem::path(build_paths::TestDataDir()) / "npu-smi" / "06_910B4_4npu_procs.txt",
                  std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(HbmSampleOutput, ReadsTheDevicesAskedForAtTheTargetsTime) {
  const std::string err = "npuprof-t0 1700000000100000000\nsome npu-smi warning\nnpuprof-t1 1700000000300000000\n";
  auto r = ParseHbmSampleOutput(Capture(), err, {1, 3}, 5, 9);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->clock, "target");
  EXPECT_EQ(r->t_ms, 1700000000200);
  ASSERT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->devices[0].device_id, 1);
  EXPECT_EQ(r->devices[0].used_mb, 29095);
  EXPECT_EQ(r->devices[0].total_mb, 32768);
  EXPECT_EQ(r->devices[1].device_id, 3);
  EXPECT_EQ(r->devices[1].used_mb, 29096);
}

TEST(HbmSampleOutput, EveryDeviceWhenNoneAsked) {
  auto r = ParseHbmSampleOutput(Capture(), "", {}, 1000, 1200);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->devices.size(), 4u);
  EXPECT_EQ(r->clock, "worker") << "no stamps: the worker's midpoint";
  EXPECT_EQ(r->t_ms, 1100);
}

TEST(HbmSampleOutput, StampsThatAreNotNanosecondsFallBackToTheWorker) {
  for (const char* err : {"npuprof-t0 1700000000N\nnpuprof-t1 1700000001N\n",   // busybox date without %N
                          "npuprof-t0 1700000000300000000\nnpuprof-t1 1700000000100000000\n",  // t1 before t0
                          "npuprof-t0 \nnpuprof-t1 99999999999999999999999\n"}) {
    auto r = ParseHbmSampleOutput(Capture(), err, {0}, 1000, 1200);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->clock, "worker") << err;
  }
}

TEST(HbmSampleOutput, RefusesWhatIsNotASample) {
  auto not_smi = ParseHbmSampleOutput("bash: npu-smi: command not found\n", "", {0}, 0, 0);
  EXPECT_FALSE(not_smi.ok());
  auto missing = ParseHbmSampleOutput(Capture(), "", {0, 7}, 0, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("device 7"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace npuprof::parsers
