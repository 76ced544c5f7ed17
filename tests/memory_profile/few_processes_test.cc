// memory-profile's scripts after the stop with a fixed number of processes
// (issue 38): the export check's one grep and one find, and the CSV stream's
// one stat for a batch of sizes, report what the per-file tools reported.
// Run locally against msprof output dirs as msprof leaves them; a target
// without `stat` is played by a PATH of its own (the stream then takes each
// size with wc, as before).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/ssh/script_test_kit.h"
#include "workers/handlers/auto_export_check.h"
#include "workers/memory/csv_collection.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using ssh::testing::LocalRun;
using namespace npuprof::testing::script_kit;

// A PATH with the tools the stream uses, without stat.
struct NoStat {
  npuprof::testing::TempDir t;
  NoStat() {
    for (const char* tool : {"sh", "find", "wc", "tr", "cat", "env"}) {
      const std::string from = "/usr/bin/" + std::string(tool);
      fs::create_symlink(fs::exists(from) ? from : "/bin/" + std::string(tool), t.path + "/" + tool);
    }
  }
};

TEST(FewProcesses, TheCsvStreamWithOneStatIsTheStreamWithAWcPerFile) {
  npuprof::testing::TempDir t;
  const std::string d = t.path + "/msprof";
  const std::string rows(300, 'r');
  Write(d + "/PROF_1/device_0/data/x", "raw");
  Write(d + "/PROF_1/mindstudio_profiler_output/npu_mem_1.csv", "a,b\n" + rows);
  Write(d + "/PROF_1/mindstudio_profiler_output/npu_module_mem_1.csv", "c\n" + rows + rows);
  Write(d + "/PROF_1/mindstudio_profiler_output/a name with spaces.csv", rows);
  Write(d + "/PROF_1/mindstudio_profiler_output/small.csv", "header\n");  // 100 bytes or less: left out
  const std::vector<std::string> argv = {"sh", "-c", CsvStreamScript(), "sh", d};
  const LocalRun fast = RunLocalArgv(argv, "");
  NoStat no_stat;
  const LocalRun slow = RunLocalArgv(argv, "", no_stat.t.path);
  ASSERT_EQ(fast.status, 0) << fast.err;
  ASSERT_EQ(slow.status, 0) << slow.err;
  EXPECT_EQ(fast.out, slow.out);
  EXPECT_NE(fast.out.find("@@NPUPROF_FILE 304 ./PROF_1/mindstudio_profiler_output/npu_mem_1.csv\na,b\n"),
            std::string::npos)
      << fast.out;
  EXPECT_NE(fast.out.find("@@NPUPROF_FILE 300 ./PROF_1/mindstudio_profiler_output/a name with spaces.csv\n"),
            std::string::npos);
  EXPECT_EQ(fast.out.find("small.csv"), std::string::npos);
  EXPECT_EQ(fast.out.rfind("./PROF_1/device_0\n", 0), 0u) << fast.out;  // the device dirs first
}

TEST(FewProcesses, TheExportCheckMatchesEachProfDirsOwnDoneLineAndCsvs) {
  npuprof::testing::TempDir t;
  const std::string d = t.path + "/msprof", log = t.path + "/stdout.log";
  const std::string rows(200, 'x');
  for (const char* p : {"PROF_1", "PROF_10", "PROF_[x]*"}) {  // prefixes and glob characters in names
    Write(d + "/" + p + "/device_0/data/x", "raw");
    Write(d + "/" + p + "/mindstudio_profiler_output/npu_mem_1.csv", rows);
  }
  Write(d + "/PROF_1/mindstudio_profiler_output/npu_module_mem_1.csv", rows);
  Write(d + "/PROF_1/mindstudio_profiler_output/npu_module_mem_2.csv", rows);
  Write(d + "/PROF_10/mindstudio_profiler_output/npu_module_mem_1.csv", "short");
  Write(d + "/PROF_[x]*/mindstudio_profiler_output/npu_module_mem_1.csv", rows);
  Write(log, "[INFO] Export all data in PROF_10 done.\n[INFO] Export all data in PROF_[x]* done.\n");
  const LocalRun r = RunLocalArgv(AutoExportCheckArgv(d, log), "");
  ASSERT_EQ(r.status, 0) << r.err;
  const AutoExportCheck c = ParseAutoExportCheck(r.out);
  ASSERT_EQ(c.unparsed, 0) << r.out;
  ASSERT_EQ(c.profs.size(), 3u) << r.out;
  for (const AutoExportProf& p : c.profs) {
    if (p.name == "PROF_1") {  // both CSVs, no done line ("PROF_10"'s is not its)
      EXPECT_FALSE(p.done_line);
      EXPECT_EQ(p.npu_mem, 1);
      EXPECT_EQ(p.module_mem, 2);
    } else if (p.name == "PROF_10") {  // its done line, its module CSV too small
      EXPECT_TRUE(p.done_line);
      EXPECT_EQ(p.npu_mem, 1);
      EXPECT_EQ(p.module_mem, 0);
    } else {
      EXPECT_EQ(p.name, "PROF_[x]*");
      EXPECT_TRUE(p.done_line);
      EXPECT_EQ(p.npu_mem, 1);
      EXPECT_EQ(p.module_mem, 1);
      EXPECT_TRUE(p.exported());
    }
  }
  EXPECT_FALSE(c.AllExported());
}

}  // namespace
}  // namespace npuprof::workers
