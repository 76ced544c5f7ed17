// Stale and duplicate results, from a fake worker speaking the wire protocol
// (proto/wire.h) to a server with no local workers: the broker records them
// as TaskResultIgnored and the run's outcome comes from the right attempt.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "broker_test_util.h"
#include "npuprof.pb.h"
#include "proto/wire.h"

namespace npuprof::testing {
namespace {

// A DEALER worker on its own thread: heartbeats every 300 ms, keeps every
// task it receives, sends what the test queues.
class FakeWorker {
 public:
  FakeWorker(std::string endpoint, std::string identity)
      : endpoint_(std::move(endpoint)), identity_(std::move(identity)), thread_([this] { Loop(); }) {}
  ~FakeWorker() {
    stop_ = true;
    thread_.join();
  }

  void SendReady() {
    proto::WorkerToBroker m;
    m.mutable_ready()->set_worker_id("fake-worker");
    m.mutable_ready()->add_task_kinds("probe.npu_smi");
    m.mutable_ready()->set_capacity(1);
    m.mutable_ready()->set_pid(static_cast<uint32_t>(::getpid()));
    Send(m);
  }

  void SendResult(const proto::Task& task, uint32_t attempt) {
    SendResultJson(task, attempt,
                   json{{"device_count", 1},
                        {"devices", json::array()},
                        {"free_devices", {0}},
                        {"busy_devices", json::array()},
                        {"tool_version", "attempt-" + std::to_string(attempt)}}
                       .dump());
  }

  // A success whose result is this text, as it is.
  void SendResultJson(const proto::Task& task, uint32_t attempt, const std::string& result_json) {
    proto::WorkerToBroker m;
    proto::TaskResult* r = m.mutable_result();
    r->set_task_id(task.task_id());
    r->set_run_id(task.run_id());
    r->set_attempt(attempt);
    r->set_ok(true);
    r->set_result_json(result_json);
    Send(m);
  }

  void Send(const proto::WorkerToBroker& m) {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back(m.SerializeAsString());
  }

  // The first task received with this attempt (waits up to timeout_s).
  std::optional<proto::Task> WaitTask(uint32_t attempt, int timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<proto::Task> found;
    cv_.wait_for(lock, std::chrono::seconds(timeout_s), [&] {
      for (const auto& t : tasks_)
        if (t.attempt() == attempt) {
          found = t;
          return true;
        }
      return false;
    });
    return found;
  }

 private:
  void Loop() {
    zmq::context_t ctx(1);
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::routing_id, identity_);
    sock.connect(endpoint_);
    auto next_hb = std::chrono::steady_clock::now();
    while (!stop_) {
      zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(20));
      while (auto frames = wire::RecvFrames(sock, true)) {
        if (frames->size() < 2 || (*frames)[0] != wire::kWorkerHeader) continue;
        proto::BrokerToWorker msg;
        if (!msg.ParseFromString((*frames)[1]) || !msg.has_task()) continue;
        std::lock_guard<std::mutex> lock(mu_);
        tasks_.push_back(msg.task());
        cv_.notify_all();
      }
      std::deque<std::string> out;
      {
        std::lock_guard<std::mutex> lock(mu_);
        out.swap(outbox_);
      }
      for (const auto& body : out) wire::SendFrames(sock, {wire::kWorkerHeader, body});
      if (std::chrono::steady_clock::now() >= next_hb) {
        proto::WorkerToBroker hb;
        hb.set_heartbeat(true);
        const std::string body = hb.SerializeAsString();
        wire::SendFrames(sock, {wire::kWorkerHeader, body});
        next_hb = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
      }
    }
  }

  std::string endpoint_;
  std::string identity_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> outbox_;
  std::vector<proto::Task> tasks_;
  std::thread thread_;
};

// The probe run ends on the first result, so the duplicate arrives after
// RunFinished: it changes nothing and is not recorded (nothing follows
// RunFinished; the broker logs it). A duplicate while the run is live is
// recorded as TaskResultIgnored (next test).
TEST(BrokerIgnoredResults, DuplicateResultAfterTheEndChangesNothing) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, /*local_workers=*/0).ok());
  FakeWorker fake(wire::IpcEndpointFor(h.DataDir()), "fake-dup");
  fake.SendReady();
  ASSERT_TRUE(PollUntil([&] { return h.WorkerPids().size() == 1; }, 20));

  const std::string run_id = SubmitProbe(h, "sim1");
  ASSERT_FALSE(run_id.empty());
  auto task = fake.WaitTask(1, 30);
  ASSERT_TRUE(task.has_value()) << "the fake worker got no task";
  EXPECT_EQ(task->task_id(), run_id + ".t1");
  EXPECT_EQ(task->kind(), "probe.npu_smi");
  fake.SendResult(*task, 1);
  fake.SendResult(*task, 1);

  auto shown = WaitFinished(h, run_id, 30);
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ((*shown)["status"], "ok") << shown->dump();
  // Give the duplicate time to arrive and be handled.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  json events = Events(h, run_id);
  ASSERT_EQ(EventsOfType(events, "TaskSucceeded").size(), 1u) << TypesOf(events);
  EXPECT_EQ(EventsOfType(events, "ProbeRecorded").size(), 1u);
  EXPECT_EQ(EventsOfType(events, "RunFinished").size(), 1u);
  EXPECT_EQ(events.back()["type"], "RunFinished") << TypesOf(events);
  CliResult v = h.Cli({"verify", run_id});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST(BrokerIgnoredResults, OldAttemptResultIsIgnoredAndTheCurrentOneCounts) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, /*local_workers=*/0).ok());
  FakeWorker fake(wire::IpcEndpointFor(h.DataDir()), "fake-stale");
  fake.SendReady();
  ASSERT_TRUE(PollUntil([&] { return h.WorkerPids().size() == 1; }, 20));

  const std::string run_id = SubmitProbe(h, "sim1");
  ASSERT_FALSE(run_id.empty());
  const std::string task_id = run_id + ".t1";
  auto first = fake.WaitTask(1, 30);
  ASSERT_TRUE(first.has_value());
  // Announcing itself again means the worker forgot what it held: the broker
  // treats attempt 1 as lost and hands out attempt 2 (to this worker again).
  fake.SendReady();
  auto second = fake.WaitTask(2, 30);
  ASSERT_TRUE(second.has_value()) << TypesOf(Events(h, run_id));
  EXPECT_EQ(second->task_id(), task_id);

  // The late result of attempt 1 is recorded as ignored; the run goes on.
  fake.SendResult(*first, 1);
  json events;
  ASSERT_TRUE(PollUntil(
      [&] {
        events = Events(h, run_id);
        return !EventsOfType(events, "TaskResultIgnored").empty();
      },
      20))
      << TypesOf(events);
  const auto ignored = EventsOfType(events, "TaskResultIgnored");
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_EQ(ignored[0]["payload"]["attempt"], 1);
  EXPECT_NE(ignored[0]["payload"].value("reason", "").find("stale"), std::string::npos) << ignored[0].dump();
  EXPECT_TRUE(EventsOfType(events, "TaskSucceeded").empty());
  EXPECT_EQ(h.Cli({"show", run_id}).json().value("status", ""), "running");
  // The worker still holds attempt 2: the stale result must not release it.
  EXPECT_NE(WorkerHolding(h, task_id), 0u) << h.Cli({"workers"}).out;

  fake.SendResult(*second, 2);
  auto shown = WaitFinished(h, run_id, 30);
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ((*shown)["status"], "ok");
  events = Events(h, run_id);
  const auto redispatched = EventsOfType(events, "TaskRedispatched");
  ASSERT_EQ(redispatched.size(), 1u) << TypesOf(events);
  EXPECT_EQ(redispatched[0]["payload"]["reason"], "worker_lost");
  const auto succeeded = EventsOfType(events, "TaskSucceeded");
  ASSERT_EQ(succeeded.size(), 1u) << TypesOf(events);
  EXPECT_EQ(succeeded[0]["payload"]["attempt"], 2);
  EXPECT_EQ(succeeded[0]["payload"]["result"]["tool_version"], "attempt-2");
  EXPECT_EQ(EventsOfType(events, "TaskResultIgnored").size(), 1u);
  EXPECT_EQ(WorkerHolding(h, task_id), 0u);
}

// A result nested 100,000 levels deep from the worker that holds the task:
// the broker's first walk of it overflowed its stack. Now it is read with the
// nesting limit, and the task fails for good naming it; the server goes on.
TEST(BrokerIgnoredResults, AResultNestedTooDeepFailsTheTaskNamingTheLimit) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, /*local_workers=*/0).ok());
  FakeWorker fake(wire::IpcEndpointFor(h.DataDir()), "fake-deep");
  fake.SendReady();
  ASSERT_TRUE(PollUntil([&] { return h.WorkerPids().size() == 1; }, 20));
  const std::string run_id = SubmitProbe(h, "sim1");
  ASSERT_FALSE(run_id.empty());
  auto task = fake.WaitTask(1, 30);
  ASSERT_TRUE(task.has_value()) << "the fake worker got no task";
  const size_t depth = 100000;
  fake.SendResultJson(*task, 1, R"({"devices":)" + std::string(depth, '[') + std::string(depth, ']') + "}");
  auto shown = WaitFinished(h, run_id, 30);
  ASSERT_TRUE(shown.has_value()) << "the server is gone or the run hangs";
  EXPECT_EQ((*shown)["status"], "failed") << shown->dump();
  const auto failed = EventsOfType(Events(h, run_id), "TaskFailed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["payload"]["error_kind"], "bad_result");
  EXPECT_EQ(failed[0]["payload"]["final"], true);
  const std::string error = failed[0]["payload"].value("error", "");
  EXPECT_NE(error.find("nested deeper than 128 levels"), std::string::npos) << error;
  EXPECT_NE(error.find("fake-worker"), std::string::npos) << error;
  EXPECT_EQ(h.Cli({"verify", run_id}).exit_code, 0);
  EXPECT_EQ(h.Cli({"ping"}).exit_code, 0);
}

}  // namespace
}  // namespace npuprof::testing
