// A full disk under the store is an error, never an abort (store/disk_space.h):
// on a tmpfs of its own per test, writes that do not fit are refused before
// RocksDB sees them, RocksDB meeting ENOSPC itself is a kNoSpace status (it
// used to abort on an assertion in its LOG writer), writes resume once space
// is back, a store does not open on a full disk, and what was committed is
// all there afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "store/event_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support/tmpfs_mount.h"

namespace npuprof::store::testing {
namespace {

using npuprof::testing::TmpfsMount;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Random bytes (RocksDB compresses table files: a repeated byte would take
// almost no room there).
std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

#define SKIP_WITHOUT_MOUNT(m) \
  if (!(m).ok()) GTEST_SKIP() << "cannot mount a tmpfs for this test: " << (m).error

Result<std::unique_ptr<EventStore>> OpenOn(const std::string& dir, uint64_t min_free, const std::string& label) {
  StoreOptions o;
  o.sync = true;
  o.min_free_bytes = min_free;
  o.space_label = label;
  return EventStore::Open(dir, o);
}

TEST(FullDisk, AWriteThatDoesNotFitIsRefusedBeforeRocksDbSeesItAndProgressStillRecords) {
  TmpfsMount m(48);
  SKIP_WITHOUT_MOUNT(m);
  const std::string dir = m.dir() + "/store";
  auto store = OpenOn(dir, 16 * kMiB, "DATA");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EventStore& s = **store;
  ASSERT_TRUE(s.Append(Req("r1", 0, {Ev("RunSubmitted")})).ok());

  // 20 MiB more counts twice (log now, table file later) over a 16 MiB floor: no room.
  const std::string big = RandomBytes(20 * kMiB, 1);
  auto refused = s.PutBlobWithNextSync(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNoSpace) << refused.status().ToString();
  EXPECT_EQ(refused.status().message().rfind("no space left on device under DATA (", 0), 0u)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(" MB free)"), std::string::npos) << refused.status().message();
  EXPECT_FALSE(s.GetBlob(Sha256Hex(big)).has_value());

  auto small = s.PutBlobWithNextSync(RandomBytes(4 * kMiB, 2));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  ASSERT_TRUE(s.Append(Req("r1", 1, {Ev("TaskSucceeded")})).ok());
  EXPECT_TRUE(s.CheckSpace(SpaceUse::kNewWork).ok());

  // Below the reserve, new work is refused while a run under way still
  // records its progress (half the reserve is kept for that).
  m.Fill("filler", 14 * kMiB);
  const Status new_work = s.CheckSpace(SpaceUse::kNewWork);
  EXPECT_EQ(new_work.code(), Code::kNoSpace) << new_work.ToString();
  EXPECT_TRUE(s.CheckSpace(SpaceUse::kProgress).ok());
  ASSERT_TRUE(s.Append(Req("r1", 2, {Ev("RunFinished", R"({"status":"failed"})")})).ok());

  // Space back: new work again.
  std::filesystem::remove(m.dir() + "/filler");
  EXPECT_TRUE(s.CheckSpace(SpaceUse::kNewWork).ok());
  EXPECT_TRUE(s.PutBlob(RandomBytes(kMiB, 3)).ok());

  store->reset();
  auto again = OpenOn(dir, 16 * kMiB, "DATA");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto evs = (*again)->ReadRun("r1");
  ASSERT_TRUE(evs.ok());
  EXPECT_EQ(evs->size(), 3u);
  EXPECT_TRUE((*again)->GetBlob(*small).has_value());
}

// No reserve at all (min_free_bytes 0): RocksDB meets ENOSPC itself. Its
// LOG file used to abort the process on the next line it wrote; now the
// write is a kNoSpace error, writes come back once space does (RocksDB
// recovers when as much is free as one memtable may need, 64 MiB), a store
// closed on a full disk closes, and everything that was committed survives
// a reopen.
TEST(FullDisk, RocksDbMeetingAFullDiskIsAnErrorNotAnAbortAndWritesResume) {
  TmpfsMount m(224);
  SKIP_WITHOUT_MOUNT(m);
  const std::string dir = m.dir() + "/store";
  auto store = OpenOn(dir, 0, "DATA");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EventStore& s = **store;
  m.Fill("filler", 24 * kMiB);

  uint64_t seq = 0;
  std::vector<std::string> blobs;
  Status failed;
  for (int i = 0; i < 200 && failed.ok(); ++i) {
    auto blob = s.PutBlobWithNextSync(RandomBytes(kMiB, 100 + i));
    if (!blob.ok()) {
      failed = blob.status();
      break;
    }
    Status st = s.Append(Req("r1", seq, {Ev("Progress", "{\"i\":" + std::to_string(i) + "}")}));
    if (!st.ok()) {
      failed = st;
      break;
    }
    ++seq;
    blobs.push_back(*blob);
  }
  ASSERT_FALSE(failed.ok()) << "the disk never filled";
  EXPECT_EQ(failed.code(), Code::kNoSpace) << failed.ToString();
  EXPECT_EQ(failed.message().rfind("no space left on device under DATA (", 0), 0u) << failed.message();
  ASSERT_GT(seq, 0u);
  // The last free bytes taken too (the log lines RocksDB writes about its
  // failures then fail as well): still refused, still no abort. Its LOG file
  // on the store's disk aborted the process on the next line after one
  // that failed.
  m.Fill("crumbs", 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(s.Append(Req("r1", seq, {Ev("Progress")})).ok());
    EXPECT_FALSE(s.PutBlobWithNextSync(RandomBytes(kMiB, 1000 + i)).ok());
  }

  std::filesystem::remove(m.dir() + "/filler");
  std::filesystem::remove(m.dir() + "/crumbs");
  Status resumed = Status::Internal("not tried");
  auto delay = std::chrono::milliseconds(50);
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until; delay = std::min(delay * 2, std::chrono::milliseconds(1000))) {
    resumed = s.Append(Req("r1", seq, {Ev("AfterSpaceCameBack")}));
    if (resumed.ok()) break;
    std::this_thread::sleep_for(delay);
  }
  ASSERT_TRUE(resumed.ok()) << "writes did not resume once space was back: " << resumed.ToString();
  const uint64_t seq_after_resume = ++seq;

  // Full again, to the last byte: the store closes, and opening it (no
  // reserve to refuse it first) is an error: RocksDB's LOG file aborted the
  // process on the lines it writes then. A reopen once space is back has
  // everything committed.
  m.Fill("filler", 0);
  while (s.Append(Req("r1", seq, {Ev("Progress")})).ok()) ++seq;
  store->reset();
  auto on_full = OpenOn(dir, 0, "DATA");
  EXPECT_FALSE(on_full.ok()) << "opened on a full disk";
  on_full = Status::Internal("closed");
  std::filesystem::remove(m.dir() + "/filler");
  auto again = OpenOn(dir, 0, "DATA");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto evs = (*again)->ReadRun("r1");
  ASSERT_TRUE(evs.ok());
  EXPECT_EQ(evs->size(), seq);
  EXPECT_EQ((*evs)[seq_after_resume - 1].type(), "AfterSpaceCameBack");
  for (const auto& b : blobs) EXPECT_TRUE((*again)->GetBlob(b).has_value()) << b;
}

TEST(FullDisk, AStoreDoesNotOpenOnAFullDiskAndSaysSo) {
  TmpfsMount m(96);
  SKIP_WITHOUT_MOUNT(m);
  const std::string dir = m.dir() + "/store";
  {
    auto store = OpenOn(dir, 8 * kMiB, "DATA");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Append(Req("r1", 0, {Ev("RunSubmitted")})).ok());
  }
  m.Fill("filler", 0);
  auto refused = OpenOn(dir, 8 * kMiB, "DATA");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNoSpace) << refused.status().ToString();
  EXPECT_EQ(refused.status().message().rfind("no space left on device under DATA (0 MB free)", 0), 0u)
      << refused.status().message();
  // A new store on the full disk: the same.
  auto fresh = OpenOn(m.dir() + "/other", 8 * kMiB, "DATA");
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(fresh.status().code(), Code::kNoSpace) << fresh.status().ToString();

  std::filesystem::remove(m.dir() + "/filler");
  auto back = OpenOn(dir, 8 * kMiB, "DATA");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto evs = (*back)->ReadRun("r1");
  ASSERT_TRUE(evs.ok());
  EXPECT_EQ(evs->size(), 1u);
}

}  // namespace
}  // namespace npuprof::store::testing
