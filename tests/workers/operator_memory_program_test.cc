// The operator-memory digest program (workers/profiling/operator_memory_program.h),
// run with the local python3 through its argv over ranks laid out in the real
// torch_npu formats (the memory_record.csv rows of torch_npu's documentation
// figure among them): it starts analyse() (a stand-in torch_npu) in every
// *_ascend_pt directory and waits for it, finds each rank's PTA peak and the
// operators live at it with their rows, and says for each broken rank what is
// wrong with its CSVs (missing, empty, truncated, not UTF-8, above the cap)
// while the good rank's digest stands. Its output decodes
// (statemachine/operator_memory_digest.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "statemachine/operator_memory_digest.h"
#include "statemachine/torch_profile_analyse_limit.h"
#include "tests/support/temp_dir.h"
#include "workers/profiling/operator_memory_program.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::profiling {
namespace {

using npuprof::testing::TempDir;
using npuprof::testing::WriteTree;

// A stand-in torch_npu whose analyse() only counts its runs (the test laid
// out ASCEND_PROFILER_OUTPUT already).
constexpr const char* kFakeAnalyse = R"PY(import os
def analyse(path):
    with open(os.path.join(path, "runs"), "a") as f:
        f.write("x")
)PY";

constexpr const char* kRecordHeader =
    "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n";
constexpr const char* kOperatorHeader =
    "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
    "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),Release Total "
    "Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type\n";

// Device 4: the documentation figure's rows, then a peak of 610 MB allocated
// / 650 MB reserved at t=2000 (data row 7), where three operators are live.
std::string GoodRecord() {
  return std::string(kRecordHeader) +
         "APP,1706525863596995.580,,219.4960938,,,NPU:4\n"
         "PTA,1706525859780072.510,0.465820313,2,0.465820313,1.87651E+14,NPU:4\n"
         "PTA+GE,1706525859780072.510,0.465820313,2,0.465820313,1.87651E+14,NPU:4\n"
         "PTA,1706525859780285.682,0.466308594,2,0.466308594,1.87651E+14,NPU:4\n"
         "PTA,1706525859781000.000\t,500,520,500,1,NPU:4\n"
         "GE,1706525859781500.000,900,900,900,1,NPU:4\n"
         "PTA,1706525859782000.000\t,610,650,610,1,NPU:4\n"
         "PTA,1706525859783000.000\t,100,650,100,1,NPU:4\n";
}

std::string GoodOperators() {
  return std::string(kOperatorHeader) +
         // row 1: released before the peak
         "aten::empty,2048.00,1706525859780500.000\t,1706525859781200.000\t,,700,700,1,2,1,0,2,0,1,NPU:4\n"
         // row 2: live at the peak, never released in the window
         "aten::zeros,1024.00,1706525859780600.000\t,,,,,1,2,1,,,,1,NPU:4\n"
         // row 3: the largest live one (a quoted name with a comma)
         "\"npu::attention, fused\",102400.00,1706525859781900.000\t,1706525859782500.000\t,,600,600,1,2,1,0,2,0,1,"
         "NPU:4\n"
         // row 4: allocated after the peak
         "aten::cat,999999.00,1706525859782100.000\t,1706525859782900.000\t,,800,800,1,2,1,0,2,0,1,NPU:4\n"
         // row 5: released exactly at the peak: not live
         "aten::add,50000.00,1706525859781000.000\t,1706525859782000.000\t,,1000,1000,1,2,1,0,2,0,1,NPU:4\n"
         // row 6: live, middle size
         "aten::matmul,8192.00,1706525859781950.000\t,1706525859782600.000\t,,650,650,1,2,1,0,2,0,1,NPU:4\n";
}

std::string SmallRecord(int device) {
  return std::string(kRecordHeader) + "PTA,10.000,5,7,5,1,NPU:" + std::to_string(device) + "\n";
}

class OperatorMemoryProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path.empty());
    WriteTree(tmp_.path + "/py/torch_npu/__init__.py", "");
    WriteTree(tmp_.path + "/py/torch_npu/profiler/__init__.py", "");
    WriteTree(tmp_.path + "/py/torch_npu/profiler/profiler.py", kFakeAnalyse);
    root_ = tmp_.path + "/profile root";
  }
  std::string Out(const std::string& rank) { return root_ + "/" + rank + "_ascend_pt/ASCEND_PROFILER_OUTPUT/"; }
  Result<sm::OperatorMemoryOutput> Run(int64_t max_bytes, int top_n = 2, int64_t limit = 0,
                                       std::chrono::milliseconds budget = std::chrono::seconds(60)) {
    const std::string cmd =
        "PYTHONPATH=" + ssh::ShellQuote(tmp_.path + "/py") + " " +
        ssh::BuildCommand(OperatorMemoryDigestArgv(root_, AnalyseMarkerName("t1"), budget, false, top_n, true, limit,
                                                   max_bytes));
    FILE* f = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
    return sm::ParseOperatorMemoryOutput(out);
  }
  TempDir tmp_;
  std::string root_;
};

const sm::OperatorMemoryRank* RankOf(const sm::OperatorMemoryOutput& o, const std::string& name) {
  for (const auto& r : o.ranks)
    if (r.dir.find("/" + name + "_ascend_pt") != std::string::npos) return &r;
  return nullptr;
}

TEST_F(OperatorMemoryProgram, FindsThePeakAndTheOperatorsLiveAtItAndNamesEveryBrokenRank) {
  WriteTree(Out("a") + "memory_record.csv", GoodRecord());
  WriteTree(Out("a") + "operator_memory.csv", GoodOperators());
  WriteTree(Out("b") + "memory_record.csv", SmallRecord(1));  // operator_memory.csv missing
  WriteTree(Out("c") + "memory_record.csv", SmallRecord(2));
  WriteTree(Out("c") + "operator_memory.csv", "");
  WriteTree(Out("d") + "memory_record.csv", SmallRecord(3));
  WriteTree(Out("d") + "operator_memory.csv", std::string(kOperatorHeader) + "aten::x,1.00,5.000,9.000,,4,4,1,2,1,0,2,0,1,NPU:3\naten::y,2.0,6");
  WriteTree(Out("e") + "memory_record.csv", SmallRecord(5));
  WriteTree(Out("e") + "operator_memory.csv", std::string(kOperatorHeader) + "aten::\xff\xfe,1.00,5.000,9.000,,4,4,1,2,1,0,2,0,1,NPU:5\n");
  WriteTree(Out("f") + "memory_record.csv", SmallRecord(6));
  WriteTree(Out("f") + "operator_memory.csv", "");
  std::filesystem::resize_file(Out("f") + "operator_memory.csv", 2 << 20);  // above the 1 MiB cap below
  // g: a memory record whose header lacks a column; its device from its PROF dir.
  WriteTree(Out("g") + "memory_record.csv", "Component,Timestamp(us)\nPTA,1\n");
  std::filesystem::create_directories(root_ + "/g_ascend_pt/PROF_000001_x/device_7");
  WriteTree(root_ + "/not_a_rank/x", "");

  auto o = Run(1 << 20);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->pending.empty());
  ASSERT_EQ(o->ranks.size(), 7u);

  const auto* a = RankOf(*o, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->analyse_exit, 0);
  EXPECT_EQ(a->device_id, 4);
  EXPECT_EQ(a->memory_record.status, "ok");
  EXPECT_EQ(a->operator_memory.status, "ok");
  ASSERT_TRUE(a->peak);
  EXPECT_EQ(a->peak->row, 7);
  EXPECT_DOUBLE_EQ(a->peak->allocated_mb, 610);
  EXPECT_DOUBLE_EQ(a->peak->reserved_mb, 650);
  ASSERT_TRUE(a->window);
  EXPECT_EQ(a->window->pta_rows, 5);
  EXPECT_DOUBLE_EQ(a->window->max_reserved_mb, 650);
  ASSERT_EQ(a->operators.size(), 2u) << "top 2 of the three live";
  EXPECT_EQ(a->operators[0].name, "npu::attention, fused");
  EXPECT_DOUBLE_EQ(a->operators[0].size_kb, 102400);
  EXPECT_EQ(a->operators[0].row, 3);
  EXPECT_EQ(a->operators[1].name, "aten::matmul");
  EXPECT_EQ(a->operators[1].row, 6);
  ASSERT_TRUE(a->operators[1].released_us);

  const auto expect_problem = [&](const char* rank, const char* status, const char* words) {
    const auto* r = RankOf(*o, rank);
    ASSERT_NE(r, nullptr) << rank;
    EXPECT_EQ(r->operator_memory.status, status) << rank << ": " << r->operator_memory.problem;
    EXPECT_NE(r->operator_memory.problem.find(words), std::string::npos) << rank << ": " << r->operator_memory.problem;
    EXPECT_TRUE(r->operators.empty()) << rank;
    EXPECT_EQ(r->memory_record.status, "ok") << rank << ": the other file still read";
  };
  expect_problem("b", "missing", "does not exist");
  expect_problem("c", "empty", "empty");
  expect_problem("d", "truncated", "ends inside data row 2");
  expect_problem("e", "not_utf8", "line 2 is not UTF-8");
  expect_problem("f", "too_large", "above the 1048576-byte cap");
  const auto* g = RankOf(*o, "g");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->memory_record.status, "bad_header");
  EXPECT_FALSE(g->peak);
  EXPECT_EQ(g->device_id, 7);

  // A second call re-attaches: analyse() ran once per rank.
  auto again = Run(1 << 20);
  ASSERT_TRUE(again.ok()) << again.status().message();
  std::ifstream runs(root_ + "/a_ascend_pt/runs");
  std::string s;
  runs >> s;
  EXPECT_EQ(s, "x");
}

TEST_F(OperatorMemoryProgram, AnEmptyRootGivesNoRanks) {
  std::filesystem::create_directories(root_);
  auto o = Run(1 << 20);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->ranks.empty());
}

// A stand-in analyse() that notes whether another one was running when it
// started (a lock file per run in a shared dir), then holds its lock until
// the test's gate file exists or 2 s passed.
constexpr const char* kOverlapAnalyse = R"PY(import glob, os, time
def analyse(path):
    shared = os.path.join(os.path.dirname(path), "locks")
    os.makedirs(shared, exist_ok=True)
    others = glob.glob(os.path.join(shared, "*"))
    mine = os.path.join(shared, os.path.basename(path))
    open(mine, "w").close()
    with open(os.path.join(path, "runs"), "a") as f:
        f.write("x" if not others else "o")
    t = time.monotonic()
    while time.monotonic() - t < 0.3:
        time.sleep(0.02)
    os.remove(mine)
)PY";

TEST_F(OperatorMemoryProgram, AtMostTheLimitRunAtOnceAndTheRestWaitForTheirTurn) {
  WriteTree(tmp_.path + "/py/torch_npu/profiler/profiler.py", kOverlapAnalyse);
  for (const char* r : {"a", "b", "c"}) WriteTree(Out(r) + "memory_record.csv", SmallRecord(0));
  // A first call that waits no time: one started, all three pending.
  auto first = Run(1 << 20, 2, 1, std::chrono::milliseconds(0));
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_GE(first->pending.size(), 2u) << "one started, the others waiting for their turn";
  ASSERT_TRUE(first->analyse_limit.has_value());
  EXPECT_EQ(first->analyse_limit->limit, 1);
  EXPECT_EQ(first->analyse_limit->source, "given");
  // The next call starts the others one at a time and digests every rank.
  auto o = Run(1 << 20, 2, 1);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_EQ(o->ranks.size(), 3u);
  for (const char* r : {"a", "b", "c"}) {
    std::ifstream in(root_ + "/" + r + "_ascend_pt/runs");
    std::string s;
    in >> s;
    EXPECT_EQ(s, "x") << r << ": analyse() ran once, with no other running";
    const sm::OperatorMemoryRank* rank = RankOf(*o, r);
    ASSERT_NE(rank, nullptr);
    EXPECT_EQ(rank->analyse_exit, 0);
  }
}

TEST_F(OperatorMemoryProgram, TheLimitIsChosenFromTheTargetsMeansWhenNoneIsGiven) {
  for (const char* r : {"a", "b"}) WriteTree(Out(r) + "memory_record.csv", SmallRecord(0));
  auto o = Run(1 << 20, 2, 0);
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->analyse_limit.has_value());
  EXPECT_EQ(o->analyse_limit->source, "means") << o->analyse_limit->reason;
  EXPECT_GE(o->analyse_limit->limit, 1);
  EXPECT_LE(o->analyse_limit->limit, 2) << "never more than the ranks";
  EXPECT_NE(o->analyse_limit->reason.find("core"), std::string::npos) << o->analyse_limit->reason;
}

// The program's rule is torch-profile's (statemachine/torch_profile_analyse_limit.h):
// the same means give the same limit.
TEST(OperatorMemoryProgramLimit, IsTorchProfilesRule) {
  const TempDir tmp;
  const std::string py = tmp.path + "/d.py";
  WriteTree(py, std::string(OperatorMemoryDigestSource()));
  struct Case {
    std::optional<int64_t> cores, mem;
    std::vector<std::optional<int64_t>> sizes;
  };
  const int64_t gib = int64_t{1} << 30;
  const std::vector<Case> cases = {
      {4, 100 * gib, {1 * gib, 2 * gib, 1 * gib}},   // by memory: 100 / 40 = 2
      {2, 1000 * gib, {1 * gib, 1 * gib, 1 * gib}},  // by cores
      {16, 1000 * gib, {gib, gib}},                  // by ranks
      {8, gib, {10 * gib}},                          // short even for one
      {8, 100 * gib, {0, 0, 0}},                     // empty ranks bound nothing by memory
      {std::nullopt, 100 * gib, {gib}},              // cores unread
      {4, std::nullopt, {gib}},                      // memory unread
      {4, 100 * gib, {gib, std::nullopt}},           // a size unread
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto arg = [](std::optional<int64_t> v) { return v ? std::to_string(*v) : std::string("-"); };
    std::vector<std::string> argv = {"python3", py, "limit", arg(c.cores), arg(c.mem)};
    for (const auto& s : c.sizes) argv.push_back(arg(s));
    FILE* f = popen(ssh::BuildCommand(argv).c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[1024];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << out;
    sm::AnalyseMeans means;
    means.cores = c.cores;
    means.mem_available_bytes = c.mem;
    means.rank_bytes = c.sizes;
    const sm::AnalyseLimit want = sm::ChooseAnalyseLimit(means, c.sizes.size(), std::nullopt);
    EXPECT_EQ(j.value("limit", -1), want.limit) << "case " << i << ": " << out << " / " << want.reason;
    EXPECT_EQ(j.value("source", ""), want.source) << "case " << i;
  }
}

TEST(OperatorMemoryProgramArgv, CarriesTheProgramTheMarkerAndTheLaunchScript) {
  const auto argv = OperatorMemoryDigestArgv("/r", ".m", std::chrono::milliseconds(2500), false, 500, true);
  ASSERT_EQ(argv.size(), 12u);
  EXPECT_EQ(argv[2], std::string(OperatorMemoryDigestSource()));
  EXPECT_EQ(argv[6], "2500");
  EXPECT_EQ(argv[8], "100") << "top N capped";
  EXPECT_EQ(argv[10], "0") << "the limit chosen on the target";
  EXPECT_EQ(argv[11], DetachedAnalyseScript());
  EXPECT_EQ(OperatorMemoryDigestArgv("/r", ".m", std::chrono::milliseconds(1), true, 1, false, 3)[10], "3");
  EXPECT_EQ(OperatorMemoryDigestArgv("/r", ".m", std::chrono::milliseconds(1), true, 1, false, 3)[11], "");
  EXPECT_EQ(AnalyseMarkerName("a/b"), ".npuprof_analyse.a_b");
}

}  // namespace
}  // namespace npuprof::profiling
