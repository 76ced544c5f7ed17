// The broker in-process with its own kind registry (BrokerOptions::kinds):
// the benchmark's fan-out kind, driven over the wire protocol by a raw
// client and a raw worker. Covers what the fan-out benchmark relies on, and
// the broker's rebuild of a run's cached state after a rejected input (the
// engine decides on the cached state itself, so a rejected input consumes it),
// and `verify` answered off the loop thread (broker/verify_runner.h).
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "bench/fanout_kind.h"
#include "bench/raw_client.h"
#include "broker/broker.h"
#include "broker/verify_runner.h"
#include "npuprof.pb.h"
#include "proto/wire.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"
#include "store/event_store.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const sm::KindRegistry& FanoutOnly() {
  static const sm::KindRegistry* kinds = [] {
    auto* r = new sm::KindRegistry;
    r->Register(bench::MakeFanoutKind());
    return r;
  }();
  return *kinds;
}

// A kind with a bug: it throws on its task's result; the "twice" one throws
// on the task's failure too.
class ThrowingKind : public sm::RunKind {
 public:
  explicit ThrowingKind(bool twice) : twice_(twice) {}
  std::string_view name() const override { return twice_ ? "test-throws-twice" : "test-throws"; }
  const sm::TransitionTable& transitions() const override {
    static const sm::TransitionTable table({{"queued", "running"},
                                            {"running", "completed"},
                                            {"running", "failed"},
                                            {"queued", "cancelled"},
                                            {"running", "cancelled"}},
                                           {"completed", "failed", "cancelled"});
    return table;
  }
  Status ValidateSpec(sm::json&) const override { return Status::Ok(); }
  void OnStart(sm::Decision& d) const override {
    d.Transition("running");
    sm::TaskPolicy once;
    once.max_attempts = 1;
    d.ScheduleTask(bench::kFanoutTask, json{{"index", 0}}, once);
  }
  void OnTaskSucceeded(sm::Decision&, const sm::TaskInfo&, const sm::TaskResult& result) const override {
    throw std::runtime_error("no rule for index " + result.recorded().value("index", json()).dump());
  }
  void OnTaskFailed(sm::Decision& d, const sm::TaskInfo&, const sm::TaskFailure& failure) const override {
    if (twice_) throw std::runtime_error("no rule for a failure either");
    d.Finish(sm::RunStatus::kFailed, failure.error_kind() + ": " + failure.error());
  }

 private:
  bool twice_;
};

// A kind whose projections throw (a state it cannot read, as a store another
// npuprof wrote may hold): its run ends at once.
class UnreadableKind : public sm::RunKind {
 public:
  std::string_view name() const override { return "test-unreadable"; }
  const sm::TransitionTable& transitions() const override {
    static const sm::TransitionTable table({{"queued", "completed"}, {"queued", "cancelled"}},
                                           {"completed", "failed", "cancelled"});
    return table;
  }
  Status ValidateSpec(sm::json&) const override { return Status::Ok(); }
  void OnStart(sm::Decision& d) const override { d.Finish(sm::RunStatus::kOk); }
  void OnTaskSucceeded(sm::Decision&, const sm::TaskInfo&, const sm::TaskResult&) const override {}
  void OnTaskFailed(sm::Decision&, const sm::TaskInfo&, const sm::TaskFailure&) const override {}
  sm::json Summary(const sm::RunState&) const override { throw std::logic_error("no summary of this state"); }
  sm::json Manifest(const sm::RunState&) const override { throw std::logic_error("no manifest of this state"); }
};

// A kind that watches the run its spec names and ends when told it ended.
class WatchingKind : public sm::RunKind {
 public:
  std::string_view name() const override { return "test-watches"; }
  const sm::TransitionTable& transitions() const override {
    static const sm::TransitionTable table({{"queued", "watching"},
                                            {"watching", "completed"},
                                            {"queued", "cancelled"},
                                            {"watching", "cancelled"}},
                                           {"completed", "failed", "cancelled"});
    return table;
  }
  Status ValidateSpec(sm::json&) const override { return Status::Ok(); }
  void OnStart(sm::Decision& d) const override {
    d.Transition("watching");
    d.WatchRun(d.state().spec.value("target", ""));
  }
  void OnTaskSucceeded(sm::Decision&, const sm::TaskInfo&, const sm::TaskResult&) const override {}
  void OnTaskFailed(sm::Decision&, const sm::TaskInfo&, const sm::TaskFailure&) const override {}
  bool AcceptsSignal(std::string_view name) const override { return name == sm::ev::kSignalWatchedRunFinished; }
  void OnSignal(sm::Decision& d, const std::string&, const sm::json&) const override {
    d.Finish(sm::RunStatus::kOk);
  }
};

const sm::KindRegistry& FanoutAndThrowing() {
  static const sm::KindRegistry* kinds = [] {
    auto* r = new sm::KindRegistry;
    r->Register(bench::MakeFanoutKind());
    r->Register(std::make_unique<ThrowingKind>(false));
    r->Register(std::make_unique<ThrowingKind>(true));
    r->Register(std::make_unique<UnreadableKind>());
    r->Register(std::make_unique<WatchingKind>());
    return r;
  }();
  return *kinds;
}

class CustomKindsTest : public ::testing::Test {
 protected:
  virtual const sm::KindRegistry& Kinds() const { return FanoutOnly(); }

  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "npuprof_custom_kinds_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    broker::BrokerOptions o;
    o.data_dir = dir_;
    o.sync = false;
    o.kinds = &Kinds();
    auto b = broker::Broker::Open(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    broker_ = std::move(b).value();
    client_ = std::make_unique<bench::RawClient>(wire::IpcEndpointFor(dir_));
  }
  void TearDown() override {
    stop_ = true;
    if (worker_.joinable()) worker_.join();
    if (loop_.joinable()) loop_.join();
    broker_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Runs the broker's loop; what was sent before is handled in its first turn.
  void StartBroker() {
    loop_ = std::thread([this] { EXPECT_TRUE(broker_->Run(stop_).ok()); });
  }

  void Send(const std::string& verb, const json& args) { client_->Send(verb, args); }
  proto::ClientResponse Recv() { return client_->Recv(20s); }
  json Call(const std::string& verb, const json& args) {
    proto::ClientResponse r = client_->Call(verb, args);
    EXPECT_TRUE(r.ok()) << verb << ": " << r.error();
    return r.ok() ? json::parse(r.body_json()) : json();
  }

  // A worker that answers every bench.noop task with success at once.
  void StartNoopWorker() {
    worker_ = std::thread([this] {
      zmq::socket_t sock(ctx_, zmq::socket_type::dealer);
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::routing_id, "noop-worker");
      sock.connect(wire::IpcEndpointFor(dir_));
      auto send = [&](const proto::WorkerToBroker& m) {
        const std::string body = m.SerializeAsString();
        wire::SendFrames(sock, {wire::kWorkerHeader, body});
      };
      proto::WorkerToBroker ready;
      ready.mutable_ready()->set_worker_id("noop-worker");
      ready.mutable_ready()->add_task_kinds(bench::kFanoutTask);
      ready.mutable_ready()->set_capacity(64);
      send(ready);
      while (!stop_) {
        zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 1, 50ms);
        while (auto frames = wire::RecvFrames(sock, true)) {
          proto::BrokerToWorker msg;
          if (frames->size() < 2 || !msg.ParseFromString((*frames)[1])) continue;
          proto::WorkerToBroker out;
          if (!msg.has_task()) {
            out.set_heartbeat(true);
            send(out);
            continue;
          }
          proto::TaskResult* r = out.mutable_result();
          r->set_task_id(msg.task().task_id());
          r->set_run_id(msg.task().run_id());
          r->set_attempt(msg.task().attempt());
          r->set_ok(true);
          r->set_result_json(json{{"index", json::parse(msg.task().payload_json())["index"]}}.dump());
          send(out);
        }
      }
    });
  }

  json WaitFinished(const std::string& run_id) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    json shown;
    while (std::chrono::steady_clock::now() < deadline) {
      shown = Call("show", json{{"run_id", run_id}});
      if (!shown.is_object() || shown.value("status", "running") != "running") return shown;
      std::this_thread::sleep_for(20ms);
    }
    return shown;
  }

  std::string dir_;
  std::unique_ptr<broker::Broker> broker_;
  std::atomic<bool> stop_{false};
  std::thread loop_, worker_;
  zmq::context_t ctx_{1};
  std::unique_ptr<bench::RawClient> client_;
};

TEST_F(CustomKindsTest, OnlyTheRegistrysKindsAreAccepted) {
  StartBroker();
  Send("submit", json{{"kind", "probe"}, {"spec", {{"machine", "x"}}}});
  proto::ClientResponse r = Recv();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("unknown run kind 'probe'; known kinds: bench-fanout"), std::string::npos) << r.error();
}

TEST_F(CustomKindsTest, FanoutRunSurvivesRejectedInputsStagedInTheSameTurn) {
  // All of these are queued before the loop starts, so its first turn
  // handles them together: the signals are rejected while the submission's
  // events are staged but not yet committed, and each rejection consumes the
  // run's cached state, which must be rebuilt from store + staged events.
  Send("submit", json{{"kind", bench::kFanoutKind}, {"run_id", "fan1"}, {"spec", {{"tasks", 3}}}});
  Send("signal", json{{"run_id", "fan1"}, {"name", "bogus"}});
  Send("signal", json{{"run_id", "fan1"}, {"name", "bogus2"}});
  std::this_thread::sleep_for(200ms);  // let the ipc pipe deliver them before the first poll
  StartBroker();
  // A refusal is answered at once, the submission after its commit.
  for (int i = 0; i < 2; ++i) {
    proto::ClientResponse refused = Recv();
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.error().find("does not accept"), std::string::npos) << refused.error();
  }
  proto::ClientResponse submitted = Recv();
  ASSERT_TRUE(submitted.ok()) << submitted.error();
  // Once more after the commit: the rebuild from committed events alone.
  Send("signal", json{{"run_id", "fan1"}, {"name", "bogus3"}});
  EXPECT_FALSE(Recv().ok());

  StartNoopWorker();
  const json shown = WaitFinished("fan1");
  ASSERT_TRUE(shown.is_object()) << shown.dump();
  EXPECT_EQ(shown.value("status", ""), "ok") << shown.dump();
  EXPECT_EQ(shown.value("state", ""), "completed") << shown.dump();

  const json evs = Call("events", json{{"run_id", "fan1"}})["events"];
  std::vector<std::string> types;
  for (const auto& e : evs) types.push_back(e["type"]);
  const std::vector<std::string> want = {"RunSubmitted",  "StateChanged",  "TaskScheduled", "TaskScheduled",
                                         "TaskScheduled", "TaskSucceeded", "TaskSucceeded", "TaskSucceeded",
                                         "StateChanged",  "RunFinished"};
  EXPECT_EQ(types, want);
  // The served (cached) state equals a fold of the events from scratch.
  const json verified = Call("verify", json::object());
  EXPECT_TRUE(verified.value("ok", false)) << verified.dump();
}

// A run shown in the turn that staged its events is answered after their
// commit: both requests below reach the loop's first turn together, and the
// show's answer follows the submission's, which is sent once its events are
// durable. (Were the show answered at once, it would come first, from a state
// the store did not hold yet.)
TEST_F(CustomKindsTest, AShowOfEventsStagedInTheSameTurnIsAnsweredAfterTheirCommit) {
  Send("submit", json{{"kind", bench::kFanoutKind}, {"run_id", "fan2"}, {"spec", {{"tasks", 2}}}});
  Send("show", json{{"run_id", "fan2"}});
  StartBroker();
  proto::ClientResponse first = Recv();
  ASSERT_TRUE(first.ok()) << first.error();
  const json submitted = json::parse(first.body_json());
  EXPECT_EQ(submitted, json({{"run_id", "fan2"}})) << "the submission's answer comes first: " << submitted.dump();
  proto::ClientResponse second = Recv();
  ASSERT_TRUE(second.ok()) << second.error();
  const json shown = json::parse(second.body_json());
  EXPECT_EQ(shown.value("kind", ""), bench::kFanoutKind) << shown.dump();
  EXPECT_EQ(shown.value("state", ""), "running") << shown.dump();
  // What was shown is in the store.
  const json evs = Call("events", json{{"run_id", "fan2"}})["events"];
  EXPECT_GE(evs.size(), 3u) << evs.dump();
}

TEST_F(CustomKindsTest, VerifyIsAnsweredByItsOwnThreadAfterRequestsQueuedBehindIt) {
  // Both queued before the loop's first turn: the ping is answered in the
  // turn, the verify only once the runner has replayed the store.
  Send("verify", json::object());
  Send("ping", json::object());
  std::this_thread::sleep_for(200ms);  // let the ipc pipe deliver them before the first poll
  StartBroker();
  const proto::ClientResponse first = Recv(), second = Recv();
  ASSERT_TRUE(first.ok()) << first.error();
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(json::parse(first.body_json()).value("server", ""), "npuprof") << first.body_json();
  const json verified = json::parse(second.body_json());
  EXPECT_TRUE(verified.value("ok", false)) << verified.dump();
  EXPECT_EQ(verified.value("checked", -1), 0) << verified.dump();
  // One run: the answer names it; an unknown run is refused at once.
  Send("submit", json{{"kind", bench::kFanoutKind}, {"run_id", "fan2"}, {"spec", {{"tasks", 2}}}});
  ASSERT_TRUE(Recv().ok());
  StartNoopWorker();
  ASSERT_EQ(WaitFinished("fan2").value("status", ""), "ok");
  const json one = Call("verify", json{{"run_id", "fan2"}});
  EXPECT_TRUE(one.value("ok", false)) << one.dump();
  EXPECT_EQ(one["runs"][0].value("run_id", ""), "fan2") << one.dump();
  Send("verify", json{{"run_id", "nope"}});
  const proto::ClientResponse unknown = Recv();
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("no run 'nope'"), std::string::npos) << unknown.error();
}

TEST_F(CustomKindsTest, AVerifyJobJudgesEachRunAsItWasServed) {
  StartBroker();
  StartNoopWorker();
  Send("submit", json{{"kind", bench::kFanoutKind}, {"run_id", "fan3"}, {"spec", {{"tasks", 2}}}});
  ASSERT_TRUE(Recv().ok());
  ASSERT_EQ(WaitFinished("fan3").value("status", ""), "ok");
  stop_ = true;
  worker_.join();
  loop_.join();
  broker_.reset();
  auto store = store::EventStore::Open(dir_ + "/store");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto events = (*store)->ReadRun("fan3");
  ASSERT_TRUE(events.ok());
  ASSERT_GT(events->size(), 4u);
  // Served after its fourth event: judged on those four (what came later is
  // the next verify's), and equal to the fold of that prefix.
  const std::vector<proto::Event> prefix(events->begin(), events->begin() + 4);
  const auto folded = sm::Fold(FanoutOnly(), prefix);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const sm::RunKind* kind = FanoutOnly().Find(bench::kFanoutKind);
  broker::VerifyJob job;
  job.only = "fan3";
  job.served["fan3"] = {4, kind->Manifest(*folded).dump(), kind->Summary(*folded).dump()};
  const std::atomic<bool> go{false}, stop{true};
  broker::VerifyAnswer a = broker::RunVerifyJob(job, **store, FanoutOnly(), go);
  EXPECT_TRUE(a.ok) << a.body.dump();
  EXPECT_EQ(a.body["runs"][0].value("events", 0), 4) << a.body.dump();
  // A served manifest that is not the fold's is reported.
  job.served["fan3"].manifest = "{}";
  a = broker::RunVerifyJob(job, **store, FanoutOnly(), go);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.body["runs"][0].value("error", ""), "the manifest folded from the events differs from the one served")
      << a.body.dump();
  // A whole-store verify of a run not cached folds all of it; a stop cuts it short.
  a = broker::RunVerifyJob(broker::VerifyJob{}, **store, FanoutOnly(), go);
  EXPECT_TRUE(a.ok) << a.body.dump();
  EXPECT_EQ(a.body["runs"][0].value("events", size_t{0}), events->size()) << a.body.dump();
  EXPECT_TRUE(a.body["lease_audit"].value("ok", false)) << a.body.dump();
  a = broker::RunVerifyJob(broker::VerifyJob{}, **store, FanoutOnly(), stop);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.body.value("error", "").find("cut short"), std::string::npos) << a.body.dump();
}

}  // namespace
}  // namespace npuprof::testing

namespace npuprof::testing {
namespace {

class ThrowingKindTest : public CustomKindsTest {
 protected:
  const sm::KindRegistry& Kinds() const override { return FanoutAndThrowing(); }
};

// The events of run_id by type, and the payload of the last of each.
std::map<std::string, json> LastOfEachType(const json& evs) {
  std::map<std::string, json> out;
  for (const auto& e : evs) out[e["type"].get<std::string>()] = e["payload"];
  return out;
}

TEST_F(ThrowingKindTest, AResultTheKindThrowsOnFailsItsTaskSoTheKindsFailurePathEndsTheRun) {
  StartBroker();
  StartNoopWorker();
  ASSERT_EQ(Call("submit", json{{"kind", "test-throws"}, {"run_id", "thr1"}, {"spec", json::object()}})
                .value("run_id", ""),
            "thr1");
  const json shown = WaitFinished("thr1");
  ASSERT_TRUE(shown.is_object()) << shown.dump();
  EXPECT_EQ(shown.value("status", ""), "failed") << shown.dump();
  EXPECT_NE(shown.value("error", "").find("kind_failed: npuprof: the test-throws kind failed on task:thr1.t1#1: "
                                          "no rule for index 0"),
            std::string::npos)
      << shown.dump();

  const json evs = Call("events", json{{"run_id", "thr1"}})["events"];
  const auto last = LastOfEachType(evs);
  ASSERT_TRUE(last.count("TaskFailed")) << evs.dump();
  EXPECT_EQ(last.at("TaskFailed").value("error_kind", ""), "kind_failed");
  EXPECT_TRUE(last.at("TaskFailed").value("final", false));
  // The result that made the kind throw was not recorded: nothing half-decided.
  EXPECT_FALSE(last.count("TaskSucceeded")) << evs.dump();
  EXPECT_FALSE(last.count("CancelRequested")) << evs.dump();
  const json verified = Call("verify", json::object());
  EXPECT_TRUE(verified.value("ok", false)) << verified.dump();
}

TEST_F(ThrowingKindTest, AKindThatThrowsOnTheFailureTooHasItsRunCancelledInsteadOfStalled) {
  StartBroker();
  StartNoopWorker();
  ASSERT_EQ(Call("submit", json{{"kind", "test-throws-twice"}, {"run_id", "thr2"}, {"spec", json::object()}})
                .value("run_id", ""),
            "thr2");
  const json shown = WaitFinished("thr2");
  ASSERT_TRUE(shown.is_object()) << shown.dump();
  EXPECT_EQ(shown.value("status", ""), "cancelled") << shown.dump();

  const json evs = Call("events", json{{"run_id", "thr2"}})["events"];
  const auto last = LastOfEachType(evs);
  ASSERT_TRUE(last.count("CancelRequested")) << evs.dump();
  const std::string by = last.at("CancelRequested").value("by", "");
  EXPECT_NE(by.find("the test-throws-twice kind failed on task:thr2.t1#1: no rule for a failure either"),
            std::string::npos)
      << by;
  EXPECT_FALSE(last.count("TaskSucceeded")) << evs.dump();
  EXPECT_FALSE(last.count("TaskFailed")) << "the failure the kind threw on was not recorded either: " << evs.dump();
  const json verified = Call("verify", json::object());
  EXPECT_TRUE(verified.value("ok", false)) << verified.dump();
}

// A projection that throws where the broker builds it outside a request (the
// summary a watch delivers, the projections a verify captures) is named, and
// the broker goes on serving: it used to end the broker's loop.
TEST_F(ThrowingKindTest, AProjectionThatThrowsOutsideARequestIsNamedAndTheBrokerGoesOn) {
  StartBroker();
  // The watched run has ended (and is stored) before the watch is asked.
  ASSERT_EQ(Call("submit", json{{"kind", "test-unreadable"}, {"run_id", "unr1"}, {"spec", json::object()}})
                .value("run_id", ""),
            "unr1");
  ASSERT_EQ(Call("submit", json{{"kind", "test-watches"}, {"run_id", "w1"}, {"spec", {{"target", "unr1"}}}})
                .value("run_id", ""),
            "w1");
  const json watcher = WaitFinished("w1");
  ASSERT_TRUE(watcher.is_object()) << watcher.dump();
  EXPECT_EQ(watcher.value("status", ""), "ok") << watcher.dump();
  json delivered;
  const json events = Call("events", json{{"run_id", "w1"}});
  for (const auto& e : events["events"])
    if (e["type"] == sm::ev::kSignalReceived) delivered = e["payload"];
  ASSERT_TRUE(delivered.is_object()) << "the watch was delivered: " << events.dump();
  const std::string named = delivered["payload"]["summary"].value("projection_error", "");
  EXPECT_NE(named.find("no summary of this state"), std::string::npos) << delivered.dump();

  // A show fails its request alone; a verify is answered, naming the run.
  proto::ClientResponse shown = client_->Call("show", json{{"run_id", "unr1"}});
  EXPECT_FALSE(shown.ok());
  EXPECT_NE(shown.error().find("no summary of this state"), std::string::npos) << shown.error();
  proto::ClientResponse verified = client_->Call("verify", json::object());
  const std::string answer = verified.ok() ? verified.body_json() : verified.error();
  EXPECT_NE(answer.find("unr1"), std::string::npos) << answer;
  EXPECT_EQ(Call("show", json{{"run_id", "w1"}}).value("status", ""), "ok") << "the broker still serves";
  // A submission that builds on that run is refused naming the field and the
  // run, and nothing is submitted.
  proto::ClientResponse built_on = client_->Call(
      "submit", json{{"kind", "test-watches"}, {"run_id", "w2"}, {"spec", {{"target", "unr1"}, {"baseline_run", "unr1"}}}});
  EXPECT_FALSE(built_on.ok());
  EXPECT_NE(built_on.error().find("baseline_run: run 'unr1' cannot be read (no summary of this state"), std::string::npos)
      << built_on.error();
  EXPECT_FALSE(client_->Call("show", json{{"run_id", "w2"}}).ok()) << "w2 was not submitted";
}

// A kind that needs any 2 NPUs of machine "m1" and cannot fail while queued
// (no queued -> failed move): a lease refusal is a decision it rejects.
class UnrefusableKind : public sm::RunKind {
 public:
  std::string_view name() const override { return "test-unrefusable"; }
  const sm::TransitionTable& transitions() const override {
    static const sm::TransitionTable table({{"queued", "running"}, {"queued", "cancelled"}, {"running", "completed"}},
                                           {"completed", "cancelled"});
    return table;
  }
  Status ValidateSpec(sm::json&) const override { return Status::Ok(); }
  std::optional<sm::DeviceNeed> DevicesNeeded(const sm::RunState&) const override {
    sm::DeviceNeed n;
    sm::DeviceNeedLeg leg;
    leg.machine = "m1";
    leg.count = 2;
    n.legs.push_back(leg);
    n.probe_payload.set_purpose(sm::kLeaseProbePurpose);
    return n;
  }
  void OnStart(sm::Decision& d) const override { d.Transition("running"); }
  void OnTaskSucceeded(sm::Decision&, const sm::TaskInfo&, const sm::TaskResult&) const override {}
  void OnTaskFailed(sm::Decision&, const sm::TaskInfo&, const sm::TaskFailure&) const override {}
};

class LeaseRefusalTest : public CustomKindsTest {
 protected:
  const sm::KindRegistry& Kinds() const override {
    static const sm::KindRegistry* kinds = [] {
      auto* r = new sm::KindRegistry;
      r->Register(std::make_unique<UnrefusableKind>());
      return r;
    }();
    return *kinds;
  }
  // A worker whose npu-smi probe sees one free NPU on any machine.
  void StartProbeWorker() {
    worker_ = std::thread([this] {
      zmq::socket_t sock(ctx_, zmq::socket_type::dealer);
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::routing_id, "probe-worker");
      sock.connect(wire::IpcEndpointFor(dir_));
      auto send = [&](const proto::WorkerToBroker& m) { wire::SendFrames(sock, {wire::kWorkerHeader, m.SerializeAsString()}); };
      proto::WorkerToBroker ready;
      ready.mutable_ready()->set_worker_id("probe-worker");
      ready.mutable_ready()->add_task_kinds("probe.npu_smi");
      ready.mutable_ready()->set_capacity(4);
      send(ready);
      while (!stop_) {
        zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 1, 50ms);
        while (auto frames = wire::RecvFrames(sock, true)) {
          proto::BrokerToWorker msg;
          if (frames->size() < 2 || !msg.ParseFromString((*frames)[1])) continue;
          proto::WorkerToBroker out;
          if (!msg.has_task()) {
            out.set_heartbeat(true);
            send(out);
            continue;
          }
          proto::TaskResult* r = out.mutable_result();
          r->set_task_id(msg.task().task_id());
          r->set_run_id(msg.task().run_id());
          r->set_attempt(msg.task().attempt());
          r->set_ok(true);
          r->set_result_json(json{{"free_devices", {0}}, {"busy_devices", json::array()}}.dump());
          send(out);
        }
      }
    });
  }
};

// The scheduler takes a refused run off its queue, as it marks a granted one
// held. A refusal the run does not take (its decision is rejected, so
// nothing is committed) leaves the run queued: it must go back into the
// scheduler, as a grant it did not take does, not vanish from it (before,
// `runs` showed it queued with nothing it waited for, and it was never
// scheduled again).
TEST_F(LeaseRefusalTest, ARefusalTheRunDoesNotTakeLeavesItInTheScheduler) {
  StartBroker();
  StartProbeWorker();
  ASSERT_EQ(Call("submit", json{{"kind", "test-unrefusable"}, {"run_id", "ref1"}, {"spec", json::object()}})
                .value("run_id", ""),
            "ref1");
  // The probe's answer is recorded, then the scheduler refuses (1 free of 2).
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  json shown, evs;
  bool requested = false;
  while (std::chrono::steady_clock::now() < deadline) {
    evs = Call("events", json{{"run_id", "ref1"}})["events"];
    for (const auto& e : evs) requested |= e["type"] == sm::kDevicesRequested;
    shown = Call("show", json{{"run_id", "ref1"}});
    if (requested && shown.contains("waiting_for")) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(requested) << evs.dump();
  EXPECT_EQ(shown.value("state", ""), "queued") << shown.dump();
  ASSERT_TRUE(shown.contains("waiting_for")) << "the refused run is still in the scheduler: " << shown.dump();
  EXPECT_EQ(shown["waiting_for"].value("count", 0), 2) << shown.dump();
  for (const auto& e : evs) EXPECT_NE(e["type"], sm::kDevicesUnavailable) << "the refusal was not committed";
  Call("cancel", json{{"run_id", "ref1"}});
  EXPECT_EQ(WaitFinished("ref1").value("status", ""), "cancelled");
}

}  // namespace
}  // namespace npuprof::testing
