// WorkerRegistry alone: which worker gets a task, and whether any slot is free
// (Dispatch stops walking the pending tasks once none is).
#include "broker/worker_registry.h"

#include <gtest/gtest.h>

namespace npuprof::broker {
namespace {

WorkerEntry& Add(WorkerRegistry& r, const std::string& id, std::set<std::string> kinds, int capacity) {
  WorkerEntry& w = r.Upsert(id);
  w.worker_id = id;
  w.kinds = std::move(kinds);
  w.capacity = capacity;
  return w;
}

TEST(WorkerRegistry, PicksTheLeastLoadedWorkerServingTheKind) {
  WorkerRegistry r;
  Add(r, "a", {"probe.npu_smi"}, 2).tasks = {"t1"};
  Add(r, "b", {"probe.npu_smi", "tp.analyse_rank"}, 2);
  Add(r, "c", {"tp.analyse_rank"}, 4);
  ASSERT_NE(r.PickFor("probe.npu_smi"), nullptr);
  EXPECT_EQ(r.PickFor("probe.npu_smi")->identity, "b");
  EXPECT_EQ(r.PickFor("no.such_kind"), nullptr);
}

TEST(WorkerRegistry, NoSlotOnceEveryWorkerIsAtCapacity) {
  WorkerRegistry r;
  EXPECT_FALSE(r.AnyFreeSlot());  // no worker at all
  WorkerEntry& a = Add(r, "a", {"k"}, 2);
  WorkerEntry& b = Add(r, "b", {"other"}, 1);
  EXPECT_TRUE(r.AnyFreeSlot());
  a.tasks = {"t1", "t2"};
  EXPECT_EQ(r.PickFor("k"), nullptr);
  EXPECT_TRUE(r.AnyFreeSlot());  // b still has one, for its own kind
  b.tasks = {"t3"};
  EXPECT_FALSE(r.AnyFreeSlot());
  a.tasks.erase("t1");
  EXPECT_TRUE(r.AnyFreeSlot());
  EXPECT_EQ(r.PickFor("k"), &a);
}

}  // namespace
}  // namespace npuprof::broker
