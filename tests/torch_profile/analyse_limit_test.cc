// The choice of how many analyse() processes run at once on a machine
// (statemachine/torch_profile_analyse_limit.h): cores, memory, rank sizes,
// the override, and missing or garbage means (the safe default of 1); and
// the reading of the means command's output.
#include <gtest/gtest.h>

#include "statemachine/torch_profile_analyse_limit.h"
#include "statemachine/torch_profile_analysis.h"

namespace npuprof::sm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

// The connections opened ahead for a host's analyses, per task of the two
// before them (the flush wait and the listing): half the ranks analysed at
// once, at least 1 for a rank, at most 8.
TEST(AnalyseWarmSessions, HalfTheRanksAtOnceBoundedByTheOverrideAndEight) {
  EXPECT_EQ(AnalyseWarmSessions(0, std::nullopt), 0);
  EXPECT_EQ(AnalyseWarmSessions(1, std::nullopt), 1);
  EXPECT_EQ(AnalyseWarmSessions(2, std::nullopt), 1);
  EXPECT_EQ(AnalyseWarmSessions(8, std::nullopt), 4);
  EXPECT_EQ(AnalyseWarmSessions(15, std::nullopt), 8);
  EXPECT_EQ(AnalyseWarmSessions(16, std::nullopt), 8);
  EXPECT_EQ(AnalyseWarmSessions(64, std::nullopt), 8);
  EXPECT_EQ(AnalyseWarmSessions(16, 2), 1) << "--analyse-parallel 2: two analyses at once";
  EXPECT_EQ(AnalyseWarmSessions(16, 5), 3);
  EXPECT_EQ(AnalyseWarmSessions(4, 0), 2) << "no override";
  EXPECT_EQ(AnalyseWarmSessions(-3, std::nullopt), 0);
}

AnalyseMeans Means(int64_t cores, int64_t mem, std::vector<int64_t> sizes, std::optional<int64_t> disk = {}) {
  AnalyseMeans m;
  m.cores = cores;
  m.mem_available_bytes = mem;
  m.disk_free_bytes = disk;
  for (int64_t s : sizes) m.rank_bytes.push_back(s);
  return m;
}

TEST(AnalyseLimit, MemoryForOneLargeRankMeansOneAtATime) {
  const int64_t largest = kGiB * 12 / 10;  // 1.2 GiB
  const AnalyseLimit l = ChooseAnalyseLimit(Means(4, kGiB * 312 / 10, {kGiB, largest, kGiB / 2}), 3, std::nullopt);
  EXPECT_EQ(l.limit, 1);
  EXPECT_EQ(l.source, "means");
  EXPECT_EQ(l.reason,
            "4 cores, 31.2 GiB available, largest rank 1.2 GiB raw ×20 = 24.0 GiB each → 1 at a time (bound by memory)");
  EXPECT_EQ(*l.largest_rank_bytes, largest);
}

TEST(AnalyseLimit, FourCoresAndMemoryForTwoGiveTwo) {
  // 4 ranks of 10 MiB: 200 MiB each; 500 MiB available holds two.
  const AnalyseLimit l = ChooseAnalyseLimit(Means(4, 500 * kMiB, {10 * kMiB, 10 * kMiB, 9 * kMiB, 10 * kMiB}), 4,
                                            std::nullopt);
  EXPECT_EQ(l.limit, 2);
  EXPECT_NE(l.reason.find("→ 2 at a time (bound by memory)"), std::string::npos) << l.reason;
  EXPECT_EQ(*l.total_rank_bytes, 39 * kMiB);
}

TEST(AnalyseLimit, CoresAndRankCountBoundToo) {
  EXPECT_EQ(ChooseAnalyseLimit(Means(2, 64 * kGiB, {kMiB, kMiB, kMiB, kMiB}), 4, std::nullopt).limit, 2);
  const AnalyseLimit all = ChooseAnalyseLimit(Means(16, 64 * kGiB, {kMiB, kMiB, kMiB}), 3, std::nullopt);
  EXPECT_EQ(all.limit, 3);
  EXPECT_NE(all.reason.find("(all 3 ranks)"), std::string::npos) << all.reason;
  const AnalyseLimit cores = ChooseAnalyseLimit(Means(2, 64 * kGiB, {kMiB, kMiB, kMiB}), 3, std::nullopt);
  EXPECT_NE(cores.reason.find("(bound by cores)"), std::string::npos) << cores.reason;
}

TEST(AnalyseLimit, MemoryShortEvenForOneStillRunsOne) {
  const AnalyseLimit l = ChooseAnalyseLimit(Means(8, kGiB, {kGiB, kGiB}), 2, std::nullopt);
  EXPECT_EQ(l.limit, 1);
  EXPECT_NE(l.reason.find("memory is short even for one"), std::string::npos) << l.reason;
}

TEST(AnalyseLimit, EmptyRanksAreBoundByCoresOnly) {
  EXPECT_EQ(ChooseAnalyseLimit(Means(3, 0, {0, 0, 0, 0}), 4, std::nullopt).limit, 3);
}

TEST(AnalyseLimit, TheOverrideReplacesTheRule) {
  const AnalyseLimit l = ChooseAnalyseLimit(Means(1, kMiB, {kGiB, kGiB}), 2, 3);
  EXPECT_EQ(l.limit, 3);
  EXPECT_EQ(l.source, "override");
  EXPECT_EQ(l.reason, "--analyse-parallel 3");
  EXPECT_EQ(ChooseAnalyseLimit(AnalyseMeans{}, 2, 2).reason, "--analyse-parallel 2");  // no means needed
}

TEST(AnalyseLimit, MissingMeansGiveTheSafeDefaultAndSayWhich) {
  AnalyseMeans none;
  AnalyseLimit l = ChooseAnalyseLimit(none, 4, std::nullopt);
  EXPECT_EQ(l.limit, 1);
  EXPECT_EQ(l.source, "default");
  EXPECT_EQ(l.reason,
            "the core count (nproc), MemAvailable (/proc/meminfo), the rank dirs' sizes (du) could not be read → "
            "1 at a time (the safe default)");
  AnalyseMeans one_size_unread = Means(8, 64 * kGiB, {kMiB, kMiB});
  one_size_unread.rank_bytes[1].reset();
  l = ChooseAnalyseLimit(one_size_unread, 2, std::nullopt);
  EXPECT_EQ(l.limit, 1);
  EXPECT_EQ(l.reason, "the rank dirs' sizes (du) could not be read → 1 at a time (the safe default)");
  AnalyseMeans no_cores = Means(8, 64 * kGiB, {kMiB});
  no_cores.cores = 0;
  EXPECT_EQ(ChooseAnalyseLimit(no_cores, 1, std::nullopt).source, "default");
  // fewer sizes than ranks
  EXPECT_EQ(ChooseAnalyseLimit(Means(8, 64 * kGiB, {kMiB}), 3, std::nullopt).source, "default");
}

TEST(AnalyseLimit, ShortDiskIsAWarningNotALimit) {
  const AnalyseLimit l = ChooseAnalyseLimit(Means(4, 64 * kGiB, {kGiB, kGiB}, 10 * kGiB), 2, std::nullopt);
  EXPECT_EQ(l.limit, 2);
  EXPECT_EQ(l.warning,
            "10.0 GiB free on disk under the profile root, less than 20× the raw data (2.0 GiB × 20 = 40.0 GiB)");
  EXPECT_EQ(ChooseAnalyseLimit(Means(4, 64 * kGiB, {kGiB}, 100 * kGiB), 1, std::nullopt).warning, "");
}

TEST(AnalyseMeansText, ReadsTheCommandsLines) {
  const AnalyseMeans m = ParseAnalyseMeans(
      "cores 4\nmem_available_kb 32715060\ndisk_free_kb 1048576\ndir_kb 1024\ndir_kb 2048\n", 2);
  EXPECT_EQ(*m.cores, 4);
  EXPECT_EQ(*m.mem_available_bytes, int64_t{32715060} * 1024);
  EXPECT_EQ(*m.disk_free_bytes, kGiB);
  ASSERT_EQ(m.rank_bytes.size(), 2u);
  EXPECT_EQ(*m.rank_bytes[0], kMiB);
  EXPECT_EQ(*m.rank_bytes[1], 2 * kMiB);
}

TEST(AnalyseMeansText, GarbageAndGapsAreUnread) {
  const AnalyseMeans m = ParseAnalyseMeans(
      "cores \nmem_available_kb -5\ndisk_free_kb 12x\ndir_kb\ndir_kb 99999999999999999999\nnoise line\r\n", 3);
  EXPECT_FALSE(m.cores);
  EXPECT_FALSE(m.mem_available_bytes);
  EXPECT_FALSE(m.disk_free_bytes);
  ASSERT_EQ(m.rank_bytes.size(), 3u);  // the third line never came
  for (const auto& b : m.rank_bytes) EXPECT_FALSE(b);
  EXPECT_EQ(ChooseAnalyseLimit(m, 3, std::nullopt).limit, 1);
  // more dir lines than dirs are ignored; an empty text reads as nothing
  EXPECT_EQ(ParseAnalyseMeans("dir_kb 1\ndir_kb 2\n", 1).rank_bytes.size(), 1u);
  const AnalyseMeans empty = ParseAnalyseMeans("", 2);
  EXPECT_FALSE(empty.cores);
  EXPECT_EQ(empty.rank_bytes.size(), 2u);
  EXPECT_FALSE(ParseAnalyseMeans("cores 0\n", 0).cores);
}

TEST(AnalyseLimit, BytesText) {
  EXPECT_EQ(BytesText(0), "0 B");
  EXPECT_EQ(BytesText(12 * 1024), "12 KiB");
  EXPECT_EQ(BytesText(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(BytesText(kGiB * 12 / 10), "1.2 GiB");
}

}  // namespace
}  // namespace npuprof::sm
