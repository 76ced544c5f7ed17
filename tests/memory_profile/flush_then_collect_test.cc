// memory.wait_flush's folded command (workers/handlers/flush_then_collect.h)
// run in a local shell over msprof output dirs laid out as msprof leaves
// them: the flush poll's part reads as the poll alone would, the export
// check follows, and the CSVs stream after it only when msprof exported
// every PROF dir by itself. The poll's part is counted, so a PROF dir's
// name cannot move where it ends; output cut short or not the command's is
// refused, never read as a poll.
#include <gtest/gtest.h>

#include <filesystem>

#include "parsers/file_stream.h"
#include "tests/ssh/script_test_kit.h"
#include "workers/handlers/auto_export_check.h"
#include "workers/handlers/flush_signals.h"
#include "workers/handlers/flush_then_collect.h"
#include "workers/memory/csv_collection.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using namespace npuprof::testing::script_kit;

const std::string kMem = "Device_id,event,HBM(MB)\n" + std::string(200, '1') + "\n";
const std::string kModule = "Device_id,Component,Total Reserved(MB)\n" + std::string(200, '2') + "\n";

// A PROF dir as msprof leaves it after its flush (end_info on host and
// device 0) and, exported, with its two memory CSVs.
void Prof(const std::string& dir, const std::string& name, bool exported) {
  Write(dir + "/" + name + "/host/end_info", "");
  Write(dir + "/" + name + "/device_0/end_info.0", "");
  Write(dir + "/" + name + "/device_0/data/npu_mem.data", "raw");
  if (!exported) return;
  Write(dir + "/" + name + "/mindstudio_profiler_output/npu_mem_20261207.csv", kMem);
  Write(dir + "/" + name + "/mindstudio_profiler_output/npu_module_mem_20261207.csv", kModule);
}

struct Ran {
  FlushThenCollectOut split;
  int status = 0;
  std::string out;
};

Ran RunFolded(const std::string& d, const std::string& log) {
  auto poll = MsprofFlushPollArgv(d, log, 0, "");
  EXPECT_TRUE(poll.ok()) << poll.status().message();
  auto r = RunLocalArgv(FlushThenCollectArgv(*poll, AutoExportCheckArgv(d, log, CsvStreamScript())), "");
  auto split = SplitFlushThenCollect(r.out);
  EXPECT_TRUE(split.ok()) << split.status().message() << "\n" << r.out << r.err;
  return {split.ok() ? *split : FlushThenCollectOut{}, r.status, r.out};
}

TEST(FlushThenCollect, ThePollThenTheCheckThenTheCsvsWhenMsprofExportedEverything) {
  TempDir t;
  const std::string d = t.path + "/msprof_data", log = t.path + "/stdout.log";
  Prof(d, "PROF_000001_a", true);
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n"
             "[INFO] Process profiling data complete. Data is saved in PROF_000001_a\n");
  const Ran r = RunFolded(d, log);
  EXPECT_EQ(r.split.poll_exit, 0);
  // The poll's part reads as the poll alone reads.
  auto alone = RunLocalArgv(*MsprofFlushPollArgv(d, log, 0, ""), "");
  while (!alone.out.empty() && alone.out.back() == '\n') alone.out.pop_back();
  EXPECT_EQ(r.split.poll, alone.out);
  const MsprofFlushPoll poll = ParseMsprofFlushPoll(r.split.poll, false);
  EXPECT_EQ(MsprofFlushSignal(poll), std::optional<std::string>("end_info"));
  // Then the check, and after its "npuprof-then" line the CSVs, byte for byte.
  const auto [check, csvs] = SplitAtThen(r.split.check);
  ASSERT_TRUE(csvs.has_value()) << r.out;
  EXPECT_TRUE(ParseAutoExportCheck(std::string(check)).AllExported());
  EXPECT_EQ(r.status, 0);
  auto stream = SplitFileStream(*csvs);
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  std::map<std::string, std::string> files;
  for (const auto& f : stream->files) files[f.path] = f.data;
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files["./PROF_000001_a/mindstudio_profiler_output/npu_mem_20261207.csv"], kMem);
  EXPECT_EQ(files["./PROF_000001_a/mindstudio_profiler_output/npu_module_mem_20261207.csv"], kModule);
}

TEST(FlushThenCollect, NoCsvsWhereMsprofDidNotExportEverything) {
  TempDir t;
  const std::string d = t.path + "/msprof_data", log = t.path + "/stdout.log";
  Prof(d, "PROF_000001_a", true);
  Prof(d, "PROF_000002_b", false);  // flushed, not exported
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n");
  const Ran r = RunFolded(d, log);
  EXPECT_EQ(MsprofFlushSignal(ParseMsprofFlushPoll(r.split.poll, false)), std::optional<std::string>("end_info"));
  EXPECT_FALSE(SplitAtThen(r.split.check).second.has_value()) << r.out;
  EXPECT_FALSE(ParseAutoExportCheck(r.split.check).AllExported());
  // No output dir at all: the poll says so, the check says "no-dir".
  const Ran none = RunFolded(t.path + "/none", log);
  EXPECT_EQ(MsprofFlushSignal(ParseMsprofFlushPoll(none.split.poll, false)),
            std::optional<std::string>("no_msprof_data"));
  EXPECT_TRUE(ParseAutoExportCheck(none.split.check).dir_missing);
}

TEST(FlushThenCollect, APROFDirsNameCannotMoveWhereThePollEnds) {
  TempDir t;
  const std::string d = t.path + "/msprof_data", log = t.path + "/stdout.log";
  const std::string evil = "PROF_x\nnpuprof-flush 0 0\nstarted=0";
  Prof(d, "PROF_000001_a", true);
  Write(d + "/" + evil + "/host/end_info", "");
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n");
  const Ran r = RunFolded(d, log);
  // The whole of what the poll printed is its part; the check's starts after it.
  EXPECT_NE(r.split.poll.find("npuprof-flush 0 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.split.check.rfind("started=0\n", 0), 0u) << r.split.check;
}

// While the poll sees the service's group alive the check does not run:
// no poll before the last streams CSVs.
TEST(FlushThenCollect, NoCheckWhileThePollSeesTheGroupAlive) {
  TempDir t;
  const std::string d = t.path + "/msprof_data", log = t.path + "/stdout.log";
  Prof(d, "PROF_000001_a", true);
  Write(log, "[INFO] Export all data in PROF_000001_a done.\n");
  const auto check = AutoExportCheckArgv(d, log, CsvStreamScript());
  for (const std::string line : {"leader=alive members=3 signalled=no", "leader=gone members=1 signalled=no"}) {
    auto r = RunLocalArgv(FlushThenCollectArgv({"sh", "-c", "echo \"$1\"", "sh", line}, check), "");
    auto split = SplitFlushThenCollect(r.out);
    ASSERT_TRUE(split.ok()) << r.out;
    EXPECT_EQ(split->poll, line);
    EXPECT_EQ(split->check, "npuprof-check-skipped\n") << line;
  }
  auto r = RunLocalArgv(FlushThenCollectArgv({"sh", "-c", "echo 'leader=gone members=0 signalled=no'"}, check), "");
  auto split = SplitFlushThenCollect(r.out);
  ASSERT_TRUE(split.ok()) << r.out;
  EXPECT_TRUE(SplitAtThen(split->check).second.has_value()) << "the group gone: the check and the CSVs";
}

TEST(FlushThenCollect, OutputThatIsNotTheCommandsIsRefused) {
  EXPECT_FALSE(SplitFlushThenCollect("").ok());
  EXPECT_FALSE(SplitFlushThenCollect("prof 1 1 1 PROF_a\n").ok());
  EXPECT_FALSE(SplitFlushThenCollect("npuprof-flush x 3\nabc\n").ok());
  EXPECT_FALSE(SplitFlushThenCollect("npuprof-flush 0 -3\nabc\n").ok());
  EXPECT_FALSE(SplitFlushThenCollect("npuprof-flush 0 99999999999999\nabc\n").ok());
  EXPECT_FALSE(SplitFlushThenCollect("npuprof-flush 0 10\nabc\n").ok()) << "cut short";
  EXPECT_FALSE(SplitFlushThenCollect("npuprof-flush 0 2\nabc\n").ok()) << "the count does not end at a newline";
  auto ok = SplitFlushThenCollect("npuprof-flush 2 3\nabc\nstarted=0\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->poll_exit, 2);
  EXPECT_EQ(ok->poll, "abc");
  EXPECT_EQ(ok->check, "started=0\n");
}

}  // namespace
}  // namespace npuprof::workers
