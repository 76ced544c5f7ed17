// The broker against 10,000 mutated messages from one peer: client requests
// of every verb with type flips, missing and extra fields, huge strings,
// invalid UTF-8 and JSON nested up to 100,000 levels deep in their
// arguments; worker messages (announce, progress, results for stale, foreign
// and made-up task ids; results nested as deep) with mutated bytes; wrong
// frame counts and unknown headers. Afterwards the server process is alive,
// answers a valid request, runs a probe to the end and verifies clean.
// The mutations come from a fixed seed, so a failure replays.
#include <signal.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <google/protobuf/stubs/logging.h>

#include "npuprof.pb.h"
#include "proto/wire.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

constexpr int kMessages = 10000;

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // A JSON value of a random type (the "type flip").
  json AnyValue(int depth = 0) {
    switch (Pick(depth > 2 ? 6 : 8)) {
      case 0: return nullptr;
      case 1: return Pick(2) == 0;
      case 2: return static_cast<int64_t>(rng_()) - (int64_t{1} << 31);
      case 3: return 1e308 * (Pick(2) ? 10 : -1.5);  // overflows to inf: dumped as null
      case 4: return Text();
      case 5: return static_cast<uint64_t>(rng_()) << 32;
      case 6: {
        json a = json::array();
        for (size_t i = Pick(4); i > 0; --i) a.push_back(AnyValue(depth + 1));
        return a;
      }
      default: {
        json o = json::object();
        for (size_t i = Pick(4); i > 0; --i) o[Name()] = AnyValue(depth + 1);
        return o;
      }
    }
  }
  std::string Name() {
    static const char* kNames[] = {"run_id", "kind", "spec", "machine", "events", "seq", "payload", "name",
                                   "from_seq", "terminal", "sha256", "by", "state", "tag", "x", ""};
    return kNames[Pick(std::size(kNames))];
  }
  std::string Text() {
    switch (Pick(4)) {
      case 0: return std::string(Pick(2) ? 70000 : 300, 'a' + static_cast<char>(Pick(26)));  // huge
      case 1: return std::string("\xff\xfe\xc3(\x80", 5);                                   // invalid UTF-8
      case 2: return "r" + std::to_string(rng_());                                        // made-up id
      default: return "sim1";
    }
  }
  // JSON nested deeper than anything may walk (a request nested 100,000
  // levels deep overflowed the server's stack): objects or arrays, closed or
  // left open.
  std::string Deep() {
    static const size_t kDepths[] = {129, 3000, 100000};
    const size_t depth = kDepths[Pick(std::size(kDepths))];
    const bool objects = Pick(2) == 0;
    std::string s;
    s.reserve(depth * 6 + 1);
    for (size_t i = 0; i < depth; ++i) s += objects ? R"({"a":)" : "[";
    s += "1";
    if (Pick(4) != 0) s.append(depth, objects ? '}' : ']');
    return s;
  }
  // Flips, drops or inserts bytes.
  std::string MutateBytes(std::string s) {
    for (size_t n = 1 + Pick(4); n > 0; --n) {
      if (s.empty() || Pick(3) == 0) s.insert(s.begin() + static_cast<long>(s.empty() ? 0 : Pick(s.size())),
                                               static_cast<char>(rng_()));
      else if (Pick(2) == 0) s[Pick(s.size())] ^= static_cast<char>(1 + Pick(255));
      else s.erase(Pick(s.size()), 1);
    }
    return s;
  }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

const char* kVerbs[] = {"ping",         "submit",      "show",           "manifest", "events", "runs",
                        "cancel",       "machine.add", "machine.remove", "machine.show", "machine.list",
                        "workers",      "verify",      "import",         "signal",   "blob",   "nosuchverb"};

// A client request that is almost right: a real verb, arguments with fields
// flipped, dropped or added. Never a valid submit on a real machine.
std::string ClientBody(Mutator& m) {
  json args = {{"run_id", "r" + std::to_string(m.Pick(50))},
               {"kind", m.Pick(2) ? "probe" : "serve"},
               {"spec", {{"machine", "nosuch"}, {"model", "/m"}, {"tp", 2}}},
               {"events", json::array({{{"seq", 1}, {"type", "RunSubmitted"}, {"payload", json::object()}}})},
               {"name", m.Pick(2) ? "stop" : "watched_run_finished"},
               {"payload", json::object()},
               {"sha256", std::string(64, '0')}};
  for (size_t n = 1 + m.Pick(4); n > 0; --n) {
    switch (m.Pick(3)) {
      case 0: args[m.Name()] = m.AnyValue(); break;       // flip or add
      case 1: args.erase(m.Name()); break;                // drop
      default:                                            // deeper
        if (args.contains("spec") && args["spec"].is_object()) args["spec"][m.Name()] = m.AnyValue();
    }
    if (args.contains("spec") && args["spec"].is_object()) args["spec"]["machine"] = "nosuch";
  }
  proto::ClientRequest req;
  req.set_verb(kVerbs[m.Pick(std::size(kVerbs))]);
  // Removing the harness's machine is a valid request, not a malformed one
  // (and the probe at the end needs it).
  if (req.verb() == "machine.remove" && args.contains("name") && args["name"] == "sim1") args["name"] = "nosuch";
  std::string text = m.Pick(10) == 0 ? m.Text() : args.dump(-1, ' ', false, json::error_handler_t::replace);
  if (m.Pick(12) == 0)  // deep nesting, in a spec or in any field
    text = m.Pick(2) ? R"({"kind":"probe","spec":{"machine":"nosuch","x":)" + m.Deep() + "}}"
                     : "{\"" + m.Name() + "\":" + m.Deep() + "}";
  req.set_args_json(text);
  std::string body = req.SerializeAsString();
  return m.Pick(8) == 0 ? m.MutateBytes(body) : body;
}

std::string WorkerBody(Mutator& m, const std::vector<std::string>& task_ids) {
  proto::WorkerToBroker msg;
  switch (m.Pick(4)) {
    case 0: {
      auto* r = msg.mutable_ready();
      r->set_worker_id(m.Pick(2) ? "fuzz" : m.Text());
      r->add_task_kinds(m.Pick(2) ? "nothing.real" : m.Text());
      r->set_capacity(static_cast<int32_t>(m.rng()()));
      break;
    }
    case 1: msg.mutable_progress()->set_task_id(task_ids[m.Pick(task_ids.size())]); break;
    case 2: msg.set_heartbeat(true); break;
    default: {
      auto* r = msg.mutable_result();
      r->set_task_id(task_ids[m.Pick(task_ids.size())]);
      r->set_run_id("r" + std::to_string(m.Pick(50)));
      r->set_attempt(static_cast<int32_t>(m.Pick(3)));
      r->set_ok(m.Pick(2) == 0);
      r->set_error(m.Pick(4) ? "failed" : std::string("\xff bad", 5));
      r->set_result_json(m.Pick(8) == 0 ? m.Deep()
                                        : m.AnyValue().dump(-1, ' ', false, json::error_handler_t::replace));
      auto* b = r->add_blobs();
      b->set_name("b");
      b->set_data(m.Text());
    }
  }
  std::string body = msg.SerializeAsString();
  return m.Pick(6) == 0 ? m.MutateBytes(body) : body;
}

TEST(BrokerRobustness, TenThousandMutatedMessagesLeaveItServing) {
  // Our own serializer complains of the invalid UTF-8 it is made to send: quiet.
  google::protobuf::LogSilencer quiet;
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  // Real task ids to answer for falsely: those of a finished probe run.
  CliResult first = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string run = first.json().value("run_id", "");
  std::vector<std::string> task_ids = {run + ".t1", run + ".t2", "x.t1", ""};

  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 0);
  sock.set(zmq::sockopt::sndhwm, 0);
  sock.connect(wire::IpcEndpointFor(h.DataDir()));
  Mutator m(20261201);
  int sent = 0;
  for (int i = 0; i < kMessages; ++i) {
    std::vector<std::string> frames;
    switch (m.Pick(10)) {
      case 0: frames = {std::string(wire::kWorkerHeader)}; break;                       // too few
      case 1: frames = {"NPC1", "a", "b", "c"}; break;                                  // too many
      case 2: frames = {m.MutateBytes("NPC1"), ClientBody(m)}; break;                   // unknown header
      case 3: case 4: case 5: frames = {std::string(wire::kWorkerHeader), WorkerBody(m, task_ids)}; break;
      default: frames = {std::string(wire::kClientHeader), ClientBody(m)};
    }
    std::vector<std::string_view> views(frames.begin(), frames.end());
    wire::SendFrames(sock, views);
    ++sent;
    // Drain answers as they come, so neither side's queue grows without bound.
    while (wire::RecvFrames(sock, /*dontwait=*/true)) {
    }
  }
  ASSERT_EQ(sent, kMessages);
  // Every message has been handled once a request sent after them is answered
  // (one peer's messages are handled in order).
  proto::ClientRequest ping;
  ping.set_verb("ping");
  ping.set_args_json("{}");
  const std::string body = ping.SerializeAsString();
  wire::SendFrames(sock, {wire::kClientHeader, body});
  bool answered = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    auto frames = wire::RecvFrames(sock, /*dontwait=*/true);
    if (!frames) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    proto::ClientResponse r;
    if (frames->size() == 2 && r.ParseFromString((*frames)[1]) && r.ok() &&
        r.body_json().find("\"server\":\"npuprof\"") != std::string::npos)
      answered = true;
  }
  ASSERT_TRUE(answered) << "no answer to a ping sent after the mutated messages";
  EXPECT_EQ(::kill(h.server_pid(), 0), 0) << "the server process is gone";
  CliResult probe = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  EXPECT_EQ(probe.exit_code, 0) << probe.err;
  CliResult verify = h.Cli({"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
  EXPECT_EQ(h.Cli({"show", run}).json().value("status", ""), "ok");
  h.Stop();
}

}  // namespace
}  // namespace npuprof::testing
