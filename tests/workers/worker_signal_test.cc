// A signal that lands while the worker waits on the broker's socket
// (workers/worker_runtime.h): zmq's poll answers EINTR, and the worker goes
// on (its stop flag says whether to end) instead of ending the process with
// an uncaught zmq::error_t. `npuprof worker` and the server's local workers
// stop on SIGINT/SIGTERM this way.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/temp_dir.h"
#include "workers/worker_runtime.h"

namespace npuprof::workers {
namespace {

void Ignore(int) {}

TEST(WorkerSignal, SignalsWhileWaitingOnTheBrokerEndNothingAndTheStopFlagEndsTheLoop) {
  struct sigaction sa {};
  sa.sa_handler = Ignore;  // no SA_RESTART: every signal interrupts the poll
  sigemptyset(&sa.sa_mask);
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &before), 0);

  npuprof::testing::TempDir t;
  WorkerOptions opts;
  opts.broker_endpoint = "ipc://" + t.path + "/no-broker.sock";  // nobody answers: the worker waits
  opts.worker_id = "signal-test";
  opts.capacity = 1;
  WorkerRuntime rt(opts);
  std::atomic<bool> stop{false};
  std::atomic<bool> ran{false};
  Status st = Status::Ok();
  std::thread loop([&] {
    st = rt.Run(stop);
    ran = true;
  });
  // The loop waits in 50 ms polls; signals sent every 5 ms for 0.5 s land in
  // them many times over.
  for (int i = 0; i < 100 && !ran.load(); ++i) {
    pthread_kill(loop.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(ran.load()) << "the loop ended before its stop flag: " << st.ToString();
  stop = true;
  loop.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  sigaction(SIGUSR1, &before, nullptr);
}

}  // namespace
}  // namespace npuprof::workers
