// A worker SIGKILLed while it holds a probe task: the broker notices the
// silence, re-dispatches the task (same id, next attempt) and the run
// completes; the server's supervisor replaces the dead worker.
#include <signal.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "broker_test_util.h"

namespace npuprof::testing {
namespace {

TEST(BrokerWorkerLoss, KilledWorkerTaskIsRedispatchedAndRunCompletes) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string started = AddSlowMachine(h, "slow", 30);
  const std::string run_id = SubmitProbe(h, "slow");
  ASSERT_FALSE(run_id.empty());
  const std::string task_id = run_id + ".t1";

  // The first npu-smi call is on the target now, sleeping.
  ASSERT_TRUE(WaitForFile(started, 60)) << "the probe never reached the target";
  uint32_t holder = 0;
  ASSERT_TRUE(PollUntil([&] { return (holder = WorkerHolding(h, task_id)) != 0; }, 20));
  const std::vector<pid_t> before = h.WorkerPids();
  ASSERT_NE(std::find(before.begin(), before.end(), static_cast<pid_t>(holder)), before.end());
  ASSERT_EQ(kill(static_cast<pid_t>(holder), SIGKILL), 0);

  auto shown = WaitFinished(h, run_id, 90);
  ASSERT_TRUE(shown.has_value()) << "run did not finish; events: " << TypesOf(Events(h, run_id));
  EXPECT_EQ((*shown)["status"], "ok") << shown->dump();
  EXPECT_EQ((*shown)["probe"]["device_count"], 8);

  const json events = Events(h, run_id);
  const auto redispatched = EventsOfType(events, "TaskRedispatched");
  ASSERT_EQ(redispatched.size(), 1u) << TypesOf(events);
  EXPECT_EQ(redispatched[0]["payload"]["reason"], "worker_lost");
  EXPECT_EQ(redispatched[0]["payload"]["task_id"], task_id);
  EXPECT_EQ(redispatched[0]["payload"]["attempt"], 2);
  const auto succeeded = EventsOfType(events, "TaskSucceeded");
  ASSERT_EQ(succeeded.size(), 1u) << TypesOf(events);
  EXPECT_EQ(succeeded[0]["payload"]["attempt"], 2);
  EXPECT_TRUE(EventsOfType(events, "TaskFailed").empty()) << TypesOf(events);
  const auto finished = EventsOfType(events, "RunFinished");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]["payload"]["status"], "ok");
  EXPECT_EQ(events.back()["type"], "RunFinished");

  // The dead worker is gone from the table and has been replaced.
  EXPECT_TRUE(PollUntil(
      [&] {
        auto now = h.WorkerPids();
        return now.size() == 2 && std::find(now.begin(), now.end(), static_cast<pid_t>(holder)) == now.end();
      },
      30));
}

}  // namespace
}  // namespace npuprof::testing
