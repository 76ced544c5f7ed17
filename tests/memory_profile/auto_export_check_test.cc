// memory.export's check for msprof's own export (workers/handlers/
// auto_export_check.h) run in a local shell over msprof output dirs laid out
// as msprof leaves them: a PROF dir counts as exported only with its "Export
// all data in <PROF> done" console line and both memory CSVs over 100 bytes;
// PROF dirs without device data are not captures; an export an earlier
// attempt started is reported, so that it is waited for rather than skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/script_test_kit.h"
#include "workers/handlers/auto_export_check.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using namespace npuprof::testing::script_kit;

const std::string kRows(200, 'x');  // a CSV with rows (over 100 bytes)

// A PROF dir with device data; exported: the two memory CSVs written.
void Prof(const std::string& dir, const std::string& name, bool exported) {
  Write(dir + "/" + name + "/device_0/data/npu_mem.data", "raw");
  if (!exported) return;
  Write(dir + "/" + name + "/mindstudio_profiler_output/npu_mem_20241118.csv", kRows);
  Write(dir + "/" + name + "/mindstudio_profiler_output/npu_module_mem_20241118.csv", kRows);
}

AutoExportCheck Check(const std::string& dir, const std::string& log) {
  auto r = RunLocalArgv(AutoExportCheckArgv(dir, log), "");
  EXPECT_EQ(r.status, 0) << r.err;
  return ParseAutoExportCheck(r.out);
}

TEST(AutoExportCheck, EveryPROFDirWithItsDoneLineAndBothCsvsIsExported) {
  TempDir t;
  const std::string d = t.path + "/msprof", log = t.path + "/stdout.log";
  Prof(d, "PROF_000001_a", true);
  Prof(d, "PROF_000002 b", true);  // a name with a space
  Write(d + "/PROF_000003_host_only/host/end_info", "");  // no device data: not a capture
  Write(log, "[INFO] Start export data in PROF_000001_a.\n[INFO] Export all data in PROF_000001_a done.\n"
             "[INFO] Export all data in PROF_000002 b done.\n[INFO] Profiling finished.\n");
  const AutoExportCheck c = Check(d, log);
  EXPECT_EQ(c.unparsed, 0);
  EXPECT_FALSE(c.export_started);
  ASSERT_EQ(c.profs.size(), 2u);
  EXPECT_TRUE(c.AllExported()) << c.Describe();
  EXPECT_NE(c.Describe().find("2 PROF dir(s) exported by msprof"), std::string::npos) << c.Describe();
}

TEST(AutoExportCheck, AMissingDoneLineOrCsvOrAStartedExportMeansExport) {
  TempDir t;
  const std::string d = t.path + "/msprof", log = t.path + "/stdout.log";
  Prof(d, "PROF_000001_a", true);
  Prof(d, "PROF_000002_b", true);
  // msprof was killed during its own export: the second PROF dir has no done line.
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n[INFO] Start export data in PROF_000002_b.\n");
  AutoExportCheck c = Check(d, log);
  EXPECT_FALSE(c.AllExported());
  EXPECT_NE(c.Describe().find("PROF_000002_b: no 'Export all data in PROF_000002_b done' line"), std::string::npos)
      << c.Describe();

  // A header-only CSV (100 bytes or fewer) is no export either.
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n[INFO] Export all data in PROF_000002_b done.\n");
  Write(d + "/PROF_000002_b/mindstudio_profiler_output/npu_module_mem_20241118.csv", "Device_id,Component\n");
  c = Check(d, log);
  EXPECT_FALSE(c.AllExported());
  EXPECT_NE(c.Describe().find("PROF_000002_b: no npu_module_mem CSV"), std::string::npos) << c.Describe();

  // An earlier attempt started msprof --export: it is waited for.
  Write(d + "/PROF_000002_b/mindstudio_profiler_output/npu_module_mem_20241118.csv", kRows);
  EXPECT_TRUE(Check(d, log).AllExported());
  Write(d + ".export.pid", "123\n");
  c = Check(d, log);
  EXPECT_TRUE(c.export_started);
}

TEST(AutoExportCheck, NoCaptureOrNoLogIsNotExported) {
  TempDir t;
  const std::string d = t.path + "/msprof";
  fs::create_directories(d);
  AutoExportCheck c = Check(d, t.path + "/stdout.log");
  EXPECT_TRUE(c.profs.empty());
  EXPECT_FALSE(c.AllExported());
  EXPECT_EQ(c.Describe(), "no PROF dir with device data");
  Prof(d, "PROF_000001_a", true);
  c = Check(d, t.path + "/missing.log");
  ASSERT_EQ(c.profs.size(), 1u);
  EXPECT_FALSE(c.AllExported()) << "the CSVs alone do not prove msprof finished them";
}

TEST(AutoExportCheck, AMissingOutputDirIsSaidAloneAndNothingElse) {
  TempDir t;
  const AutoExportCheck c = Check(t.path + "/msprof", t.path + "/stdout.log");
  EXPECT_TRUE(c.dir_missing);
  EXPECT_EQ(c.unparsed, 0);
  EXPECT_FALSE(c.AllExported());
  fs::create_directories(t.path + "/msprof");
  EXPECT_FALSE(Check(t.path + "/msprof", t.path + "/stdout.log").dir_missing) << "an empty dir exists";
  // "no-dir" among other lines is not the check's: not missing, not exported.
  for (const std::string bad : {"started=0\nno-dir\n", "no-dir\nstarted=0\n", "no-dir\nno-dir\n",
                                "no-dir\nprof 1 1 1 PROF_a\n"}) {
    const AutoExportCheck b = ParseAutoExportCheck(bad);
    EXPECT_FALSE(b.dir_missing) << bad;
    EXPECT_FALSE(b.AllExported()) << bad;
  }
}

// With a script to run after it (memory.export's CSV collection), the
// command runs it only where the check itself finds every PROF dir exported
// and no export started; its output follows the "npuprof-then" line.
TEST(AutoExportCheck, TheScriptAfterItRunsOnlyWhenEverythingWasExported) {
  TempDir t;
  const std::string d = t.path + "/msprof", log = t.path + "/stdout.log";
  const std::string then = "echo \"then in $1\"; exit 4";
  const auto run = [&] { return RunLocalArgv(AutoExportCheckArgv(d, log, then), ""); };
  Prof(d, "PROF_000001_a", true);
  Prof(d, "PROF_000002_b", true);
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n");
  auto r = run();
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(SplitAtThen(r.out).second.has_value()) << r.out;
  EXPECT_FALSE(ParseAutoExportCheck(r.out).AllExported());

  Write(log, "[INFO] Export all data in PROF_000001_a done.\n[INFO] Export all data in PROF_000002_b done.\n");
  r = run();
  EXPECT_EQ(r.status, 4) << "the script's status is the command's";
  const auto [check, after] = SplitAtThen(r.out);
  ASSERT_TRUE(after.has_value()) << r.out;
  EXPECT_EQ(*after, "then in " + d + "\n");
  const AutoExportCheck c = ParseAutoExportCheck(std::string(check));
  EXPECT_EQ(c.unparsed, 0) << check;
  EXPECT_TRUE(c.AllExported());

  Write(d + ".export.pid", "1");  // an earlier attempt started an export: it is waited for, not read over
  r = run();
  EXPECT_FALSE(SplitAtThen(r.out).second.has_value()) << r.out;
  fs::remove(d + ".export.pid");
  r = RunLocalArgv(AutoExportCheckArgv(d, log), "");  // no script: the check alone
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(SplitAtThen(r.out).second.has_value());
  EXPECT_TRUE(ParseAutoExportCheck(r.out).AllExported());
  r = RunLocalArgv(AutoExportCheckArgv(t.path + "/none", log, then), "");
  EXPECT_FALSE(SplitAtThen(r.out).second.has_value());
  EXPECT_TRUE(ParseAutoExportCheck(r.out).dir_missing);
}

TEST(AutoExportCheck, OutputThatIsNotTheChecksIsNeverExported) {
  EXPECT_FALSE(ParseAutoExportCheck("").AllExported());
  EXPECT_FALSE(ParseAutoExportCheck("prof 1 1 1 PROF_a\n").AllExported()) << "no started= line";
  EXPECT_FALSE(ParseAutoExportCheck("started=0\nprof 1 1 1 PROF_a\nnoise\n").AllExported());
  EXPECT_FALSE(ParseAutoExportCheck("started=0\nprof 2 1 1 PROF_a\n").AllExported());
  EXPECT_FALSE(ParseAutoExportCheck("started=0\nprof 1 -1 1 PROF_a\n").AllExported());
  EXPECT_FALSE(ParseAutoExportCheck("started=0\nprof 1 1 99999999999 PROF_a\n").AllExported());
  EXPECT_FALSE(ParseAutoExportCheck("started=0\nprof 1 1 1\n").AllExported()) << "no name";
  const std::string bytes("started=0\nprof 1 1 1 PROF_\xff\xfe\n", 29);
  const AutoExportCheck c = ParseAutoExportCheck(bytes);
  ASSERT_EQ(c.profs.size(), 1u);
  EXPECT_TRUE(c.AllExported());
  EXPECT_EQ(c.profs[0].name, "PROF_\xff\xfe");
}

}  // namespace
}  // namespace npuprof::workers
