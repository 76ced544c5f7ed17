// The Dispatcher alone (broker/dispatcher.h): no sockets, no store, the
// clock passed in.
#include "broker/dispatcher.h"

#include <gtest/gtest.h>

namespace npuprof::broker {
namespace {

proto::WorkerReady Ready(const std::string& id, std::vector<std::string> kinds, int capacity) {
  proto::WorkerReady r;
  r.set_worker_id(id);
  r.set_pid(42);
  r.set_capacity(capacity);
  for (const auto& k : kinds) r.add_task_kinds(k);
  return r;
}

sm::TaskInfo Task(const std::string& id, const std::string& kind, uint32_t attempt = 1, int64_t lease_ms = 1000) {
  sm::TaskInfo t;
  t.task_id = id;
  t.kind = kind;
  t.attempt = attempt;
  t.policy.lease_ms = lease_ms;
  t.payload = {{"x", id}};
  return t;
}

// The runs' tasks as the lookup sees them: run id -> tasks.
struct Runs {
  std::map<std::string, std::map<std::string, sm::TaskInfo>> tasks;
  int lookups = 0;
  Dispatcher::Lookup lookup() {
    return [this](const std::string& run, const std::string& task) -> const sm::TaskInfo* {
      ++lookups;
      auto r = tasks.find(run);
      if (r == tasks.end()) return nullptr;
      auto t = r->second.find(task);
      return t == r->second.end() || !t->second.in_flight() ? nullptr : &t->second;
    };
  }
};

std::vector<ToWorker> DispatchAll(Dispatcher& d, Runs& runs, int64_t now = 0) {
  std::vector<ToWorker> out;
  d.Dispatch(now, runs.lookup(), nullptr, &out);
  return out;
}

TEST(Dispatcher, GivesEachTaskToTheLeastLoadedWorkerServingItsKind) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 2), 1000);
  d.WorkerReady("B", Ready("wb", {"k", "other"}, 2), 1000);
  std::vector<ToWorker> out;
  for (const char* t : {"t1", "t2", "t3"}) {
    runs.tasks["r"][t] = Task(t, "k");
    d.Schedule("r", t, "k", &out);
  }
  EXPECT_TRUE(out.empty()) << "nothing held yet: no cancels";
  auto sent = DispatchAll(d, runs);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_NE(sent[0].identity, sent[1].identity) << "the second goes to the less loaded worker";
  EXPECT_EQ(sent[0].msg.task().task_id(), "t1");
  EXPECT_EQ(sent[0].msg.task().run_id(), "r");
  EXPECT_EQ(sent[0].msg.task().lease_ms(), 1000);
  EXPECT_EQ(d.pending(), 0u);
  EXPECT_EQ(d.in_flight(), 3u);
}

TEST(Dispatcher, TasksOfAKindNoWorkerTakesWaitWithoutLookups) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 1), 1000);
  std::vector<ToWorker> out;
  for (int i = 0; i < 50; ++i) {
    const std::string id = "u" + std::to_string(i);
    runs.tasks["r"][id] = Task(id, "unserved");
    d.Schedule("r", id, "unserved", &out);
  }
  runs.tasks["r"]["k1"] = Task("k1", "k");
  d.Schedule("r", "k1", "k", &out);
  auto sent = DispatchAll(d, runs);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].msg.task().task_id(), "k1");
  EXPECT_EQ(runs.lookups, 2) << "one lookup finds no worker for the kind; the other 49 are skipped";
  EXPECT_EQ(d.pending(), 50u);
}

TEST(Dispatcher, ATaskNoLongerRunnableIsDroppedFromPending) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 4), 1000);
  std::vector<ToWorker> out;
  d.Schedule("gone", "t1", "k", &out);  // its run is not in the lookup
  runs.tasks["r"]["t2"] = Task("t2", "k");
  runs.tasks["r"]["t2"].status = sm::TaskStatus::kSucceeded;
  d.Schedule("r", "t2", "k", &out);
  EXPECT_TRUE(DispatchAll(d, runs).empty());
  EXPECT_EQ(d.pending(), 0u);
}

TEST(Dispatcher, ANewAttemptOfAHeldTaskCancelsTheOldHolder) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 1), 1000);
  d.WorkerReady("B", Ready("wb", {"k"}, 1), 1000);
  std::vector<ToWorker> out;
  runs.tasks["r"]["t"] = Task("t", "k", 1);
  d.Schedule("r", "t", "k", &out);
  auto sent = DispatchAll(d, runs);
  ASSERT_EQ(sent.size(), 1u);
  const std::string first_holder = sent[0].identity;
  runs.tasks["r"]["t"].attempt = 2;
  d.Schedule("r", "t", "k", &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].identity, first_holder);
  EXPECT_EQ(out[0].msg.cancel_task_id(), "t");
  sent = DispatchAll(d, runs);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].msg.task().attempt(), 2u);
  EXPECT_EQ(d.in_flight(), 1u);
  // Both workers were free: the least loaded first in order (A again) holds
  // attempt 2. Its late answer for attempt 1 is decided (the engine records
  // it as ignored) but does not free the slot attempt 2 holds.
  EXPECT_EQ(sent[0].identity, first_holder);
  const auto stale = d.Result(first_holder, "r", "t", 1);
  EXPECT_TRUE(stale.decide);
  EXPECT_FALSE(stale.timing.has_value());
  EXPECT_EQ(d.in_flight(), 1u);
  EXPECT_FALSE(d.Result("B", "r", "t", 1).decide) << "B never held t";
  // Abandoning it cancels the new holder; nothing is held after.
  out.clear();
  d.Abandon("t", &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].identity, sent[0].identity);
  EXPECT_EQ(d.in_flight(), 0u);
}

TEST(Dispatcher, AResultCountsOnlyFromTheWorkerGivenTheTaskForThatRun) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 1), 1000);
  d.WorkerReady("B", Ready("wb", {"other"}, 1), 1000);
  std::vector<ToWorker> out;
  runs.tasks["r"]["t"] = Task("t", "k");
  d.Schedule("r", "t", "k", &out);
  ASSERT_EQ(DispatchAll(d, runs).size(), 1u);
  EXPECT_FALSE(d.Result("B", "r", "t", 1).decide) << "B was never given t";
  EXPECT_FALSE(d.Result("A", "other-run", "t", 1).decide) << "t was given for run r";
  EXPECT_FALSE(d.Result("nobody", "r", "t", 1).decide);
  const auto a = d.Result("A", "r", "t", 1);
  EXPECT_TRUE(a.decide);
  ASSERT_TRUE(a.timing.has_value());
  EXPECT_EQ(a.timing->first, "k");
  EXPECT_EQ(d.in_flight(), 0u);
  EXPECT_TRUE(d.workers().all().at("A").tasks.empty()) << "the slot is free again";
  EXPECT_FALSE(d.Result("A", "r", "t", 1).decide) << "a duplicate: A no longer holds t";
}

TEST(Dispatcher, ProgressExtendsTheLeaseAndAnExpiredLeaseIsLostOnceAndCancelled) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 1), 1'000'000);
  std::vector<ToWorker> out;
  runs.tasks["r"]["t"] = Task("t", "k", 1, 100);
  d.Schedule("r", "t", "k", &out);
  ASSERT_EQ(DispatchAll(d, runs, 0).size(), 1u);
  d.Progress("t", 1, 90);  // lease now until 190
  EXPECT_TRUE(d.Expire(150, &out).empty());
  d.Progress("t", 7, 180);  // another attempt's progress does not count
  auto lost = d.Expire(200, &out);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].run_id, "r");
  EXPECT_EQ(lost[0].task_id, "t");
  EXPECT_EQ(lost[0].attempt, 1u);
  EXPECT_EQ(lost[0].worker, "wa (lease expired)");
  EXPECT_TRUE(lost[0].lease_expired);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].msg.cancel_task_id(), "t");
  EXPECT_TRUE(d.Expire(300, &out).empty()) << "lost once";
  EXPECT_EQ(d.workers().all().at("A").tasks.size(), 0u);
}

TEST(Dispatcher, ASilentWorkerIsRemovedAndWhatItHeldIsLost) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 2), 100);
  std::vector<ToWorker> out;
  for (const char* t : {"t1", "t2"}) {
    runs.tasks["r"][t] = Task(t, "k", 1, 1'000'000);
    d.Schedule("r", t, "k", &out);
  }
  ASSERT_EQ(DispatchAll(d, runs).size(), 2u);
  EXPECT_NE(d.Alive("A", 200), nullptr);
  EXPECT_TRUE(d.Expire(150, &out).empty()) << "alive until 200";
  auto lost = d.Expire(250, &out);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].worker, "wa");
  EXPECT_TRUE(out.empty()) << "nobody to tell";
  EXPECT_EQ(d.Alive("A", 300), nullptr) << "removed: a stranger now";
  EXPECT_EQ(d.in_flight(), 0u);
}

TEST(Dispatcher, AWorkerAnnouncingItselfAgainLosesWhatItHeld) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k"}, 1), 1000);
  std::vector<ToWorker> out;
  runs.tasks["r"]["t"] = Task("t", "k");
  d.Schedule("r", "t", "k", &out);
  ASSERT_EQ(DispatchAll(d, runs).size(), 1u);
  auto lost = d.WorkerReady("A", Ready("wa2", {"k"}, 3), 2000);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker, "wa");
  EXPECT_EQ(d.workers().all().at("A").capacity, 3);
  EXPECT_TRUE(d.workers().all().at("A").tasks.empty());
  EXPECT_EQ(d.in_flight(), 0u);
}

TEST(Dispatcher, BeforeSendSeesTheKindOfEachTaskSent) {
  Dispatcher d;
  Runs runs;
  d.WorkerReady("A", Ready("wa", {"k", "j"}, 4), 1000);
  std::vector<ToWorker> out;
  runs.tasks["r"]["t1"] = Task("t1", "k");
  runs.tasks["r"]["t2"] = Task("t2", "j");
  d.Schedule("r", "t1", "k", &out);
  d.Schedule("r", "t2", "j", &out);
  std::vector<std::string> kinds;
  d.Dispatch(0, runs.lookup(), [&](const std::string& k) { kinds.push_back(k); }, &out);
  EXPECT_EQ(kinds, (std::vector<std::string>{"k", "j"}));
}

}  // namespace
}  // namespace npuprof::broker
