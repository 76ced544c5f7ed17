// The flush waits' poll commands (workers/handlers/flush_signals.h) run in a
// local shell over directories laid out as torch_npu and msprof leave them,
// and the verdicts read from their output: a rank is finalised only with its
// profiler_info and steady sizes; msprof's flush is over only when its
// process group is gone, and "complete" only with every end_info marker.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/ssh/script_test_kit.h"
#include "workers/handlers/flush_signals.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using namespace npuprof::testing::script_kit;

TorchFlushPoll PollTorch(const std::string& root) {
  auto r = RunLocalArgv(TorchFlushPollArgv(root), "");
  EXPECT_EQ(r.status, 0) << r.err;
  return ParseTorchFlushPoll(r.out);
}

TEST(TorchFlushSignals, FinalisedOnlyWithProfilerInfoAndSteadySizes) {
  TempDir t;
  const std::string root = t.path + "/vllm_profile";
  Write(root + "/host_1_a_ascend_pt/FRAMEWORK/torch.op_range", "ops\n");
  Write(root + "/host 2_b_ascend_pt/PROF_1/device_1/data/slice_0", "12345");  // a name with a space
  Write(root + "/not_a_rank_dir/x", "ignored");
  TorchFlushPoll p0 = PollTorch(root);
  ASSERT_TRUE(p0.root_exists);
  ASSERT_EQ(p0.dirs.size(), 2u);
  EXPECT_EQ(p0.unparsed, 0);
  EXPECT_FALSE(TorchFlushSignal(p0, p0, false).has_value());  // one poll is never enough
  EXPECT_FALSE(TorchFlushSignal(p0, p0, true).has_value());   // no profiler_info yet

  Write(root + "/host_1_a_ascend_pt/profiler_info_0.json", "{}");
  Write(root + "/host 2_b_ascend_pt/profiler_info_1.json", "{}");
  TorchFlushPoll p1 = PollTorch(root);
  EXPECT_FALSE(TorchFlushSignal(p0, p1, true).has_value());  // sizes changed since the last poll
  TorchFlushPoll p2 = PollTorch(root);
  ASSERT_EQ(TorchFlushSignal(p1, p2, true).value_or(""), "profiler_info");
  const json dirs = TorchFlushDirsJson(p2);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0]["profiler_info"], true);
  EXPECT_GT(dirs[1]["size"].get<int64_t>(), 5);

  Write(root + "/host_1_a_ascend_pt/PROF_1/device_0/data/late", "more");  // still landing
  TorchFlushPoll p3 = PollTorch(root);
  EXPECT_FALSE(TorchFlushSignal(p2, p3, true).has_value());
}

// One poll lists every rank dir with one find: each file counts for the dir
// it lies under (nested, hidden), a symlink is no regular file, the dirs come
// in the glob's order whatever the root's spelling.
TEST(TorchFlushSignals, EachDirsFilesAndBytesFromOneListing) {
  TempDir t;
  const std::string root = t.path + "/vllm_profile";
  Write(root + "/a_1_ascend_pt/profiler_info_1.json", "{}");
  Write(root + "/a_1_ascend_pt/sub/deeper/f", std::string(1000, 'x'));
  Write(root + "/a_1_ascend_pt/.hidden", "123");
  Write(root + "/b c_2_ascend_pt/profiler_info_2.json", "{}");
  Write(root + "/b c_2_ascend_pt/profiler_info_3.json", "{}");
  Write(root + "/c_3_ascend_pt_x/f", "not a rank dir");
  fs::create_directories(root + "/d_4_ascend_pt");
  fs::create_symlink(root + "/a_1_ascend_pt/sub/deeper/f", root + "/d_4_ascend_pt/link");
  for (const std::string& spelling : {root, root + "/"}) {
    TorchFlushPoll p = PollTorch(spelling);
    EXPECT_EQ(p.unparsed, 0);
    ASSERT_EQ(p.dirs.size(), 3u);
    EXPECT_EQ(p.dirs[0], (RankDirPoll{"a_1_ascend_pt", 1, 3, 1005}));
    EXPECT_EQ(p.dirs[1], (RankDirPoll{"b c_2_ascend_pt", 2, 2, 4}));
    EXPECT_EQ(p.dirs[2], (RankDirPoll{"d_4_ascend_pt", 0, 0, 0}));
  }
}

TEST(TorchFlushSignals, NoDirsTwiceEndsTheWaitAndOddLinesNeverDo) {
  TempDir t;
  TorchFlushPoll absent = PollTorch(t.path + "/missing");
  EXPECT_FALSE(absent.root_exists);
  EXPECT_EQ(TorchFlushSignal(absent, absent, true).value_or(""), "no_profile_dirs");
  TorchFlushPoll odd = ParseTorchFlushPoll("root=present\ndir 1 x 3 name_ascend_pt\n\xff\xfe garbage\n");
  EXPECT_EQ(odd.unparsed, 2);
  EXPECT_FALSE(TorchFlushSignal(odd, odd, true).has_value());
}

MsprofFlushPoll PollMsprof(const std::string& dir, const std::string& log, int64_t pgid, const std::string& rt) {
  auto argv = MsprofFlushPollArgv(dir, log, pgid, rt);
  EXPECT_TRUE(argv.ok()) << argv.status().message();
  auto r = RunLocalArgv(*argv, "");
  EXPECT_EQ(r.status, 0) << r.err;
  return ParseMsprofFlushPoll(r.out, pgid > 0);
}

TEST(MsprofFlushSignals, CompleteOnlyWithEveryEndInfo) {
  TempDir t;
  const std::string rt = t.path + "/run1/service-1", d = rt + "/msprof_data", log = rt + "/stdout.log";
  fs::create_directories(rt);
  EXPECT_EQ(MsprofFlushSignal(PollMsprof(d, log, 0, rt)).value_or(""), "no_msprof_data");
  Write(d + "/PROF_000001_a/host/start_info", "s");
  Write(d + "/PROF_000001_a/host/end_info", "e");
  Write(d + "/PROF_000002_b/host/start_info", "s");
  Write(d + "/PROF_000002_b/device_3/start_info.3", "s");
  Write(log, "[INFO] Start profiling....\n");
  MsprofFlushPoll p = PollMsprof(d, log, 0, rt);
  ASSERT_EQ(p.profs.size(), 2u);
  EXPECT_TRUE(p.profs[0].complete());
  EXPECT_FALSE(p.profs[1].complete());
  EXPECT_EQ(MsprofFlushSignal(p).value_or(""), "msprof_exited_incomplete");

  Write(log, "[INFO] Process profiling data complete. Data is saved in " + d + "/PROF_000002_b\n");
  EXPECT_EQ(MsprofFlushSignal(PollMsprof(d, log, 0, rt)).value_or(""), "completion_line");
  Write(d + "/PROF_000002_b/host/end_info", "e");
  Write(d + "/PROF_000002_b/device_3/end_info.3", "e");
  MsprofFlushPoll done = PollMsprof(d, log, 0, rt);
  EXPECT_EQ(MsprofFlushSignal(done).value_or(""), "end_info");
  EXPECT_EQ(MsprofFlushJson(done)["prof_dirs"][1]["device_end_info"], 1);
}

TEST(MsprofFlushSignals, WaitsWhileAProcessOfTheServiceGroupLives) {
  TempDir t;
  const std::string rt = t.path + "/run2/service-1", d = rt + "/msprof_data";
  Write(d + "/PROF_000001_a/host/end_info", "e");
  // A process group of its own carrying the service's marker (as msprof does under _start.sh).
  FILE* f = popen("NPUPROF_SERVICE=run2/service-1 setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!", "r");
  ASSERT_NE(f, nullptr);
  long pid = 0;
  ASSERT_EQ(fscanf(f, "%ld", &pid), 1);
  pclose(f);
  MsprofFlushPoll alive = PollMsprof(d, rt + "/stdout.log", pid, rt);
  EXPECT_TRUE(alive.group_known);
  EXPECT_TRUE(alive.group_alive);
  EXPECT_FALSE(MsprofFlushSignal(alive).has_value());
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  // Gone (or a zombie until init reaps it: zombies count as gone) -> the markers decide.
  MsprofFlushPoll gone;
  for (int i = 0; i < 100; ++i) {
    gone = PollMsprof(d, rt + "/stdout.log", pid, rt);
    if (!gone.group_alive) break;
    usleep(50000);
  }
  EXPECT_FALSE(gone.group_alive);
  EXPECT_EQ(MsprofFlushSignal(gone).value_or(""), "end_info");
  EXPECT_FALSE(ParseMsprofFlushPoll("prof 1 0 0 P\ncomplete_lines=0\n", true).group_known);  // no status line: wait
}

}  // namespace
}  // namespace npuprof::workers
