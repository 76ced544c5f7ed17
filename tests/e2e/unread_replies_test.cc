// A client that sends requests and never reads the replies
// (broker/peer_send_budget.h): 20,000 `events --json` requests for one run
// from one DEALER that reads nothing. ZeroMQ alone queued every reply (its
// high-water mark counts messages, not bytes) and the server grew by
// hundreds of MB; now what is queued for one peer stays under 64 MB and the
// server's resident memory (from /proc) grows by less than that plus a
// margin. Completion is observed on the metrics' request counter, never by
// waiting a fixed time.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <google/protobuf/stubs/logging.h>
#include <zmq.hpp>

#include "npuprof.pb.h"
#include "proto/wire.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kPeerCap = 64 * kMiB;   // docs/RELIABILITY.md, "Bounded memory per peer"
constexpr uint64_t kMargin = 48 * kMiB;     // allocator and ZeroMQ overhead around it
constexpr int kUnread = 20000;

// The body of GET /metrics, "" when not answered.
std::string Scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[8192];
  for (pollfd p{fd, POLLIN, 0}; ::poll(&p, 1, 20000) > 0;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t body = resp.find("\r\n\r\n");
  return resp.rfind("HTTP/1.1 200 ", 0) == 0 && body != std::string::npos ? resp.substr(body + 4) : "";
}

// npuprof_client_requests_total{verb="events",result="ok"}, -1 when not read.
double EventsAnswered(int port) {
  const std::string text = Scrape(port);
  const std::string series = "npuprof_client_requests_total{verb=\"events\",result=\"ok\"} ";
  const size_t at = text.find(series);
  if (at == std::string::npos) return text.empty() ? -1 : 0;
  return std::stod(text.substr(at + series.size()));
}

uint64_t RssBytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

std::string EventsRequest(const std::string& run) {
  proto::ClientRequest req;
  req.set_verb("events");
  req.set_args_json(json{{"run_id", run}}.dump());
  return req.SerializeAsString();
}

TEST(UnreadReplies, TwentyThousandUnreadRepliesKeepTheServerUnderItsBound) {
  google::protobuf::LogSilencer quiet;
  NpuprofHarness h;
  const int port = FreeLoopbackPort();
  h.SetServerEnv({{"NPUPROF_METRICS_LISTEN", "127.0.0.1:" + std::to_string(port)}});
  // 16 chips, some busy: a probe whose events are a few dozen KB.
  ASSERT_TRUE(h.Start({"--layout", "A3", "--busy", "0:proc", "--busy", "3:proc", "--busy", "5:proc", "--busy",
                       "9:proc"})
                  .ok());
  CliResult probe = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const std::string run = probe.json()["run_id"];
  const std::string body = EventsRequest(run);

  zmq::context_t ctx(1);
  // Warm-up by a client that reads: the server's allocations for these
  // answers made once before the baseline; and the size of one answer.
  size_t reply_bytes = 0;
  constexpr int kWarm = 300;
  {
    zmq::socket_t reader(ctx, zmq::socket_type::dealer);
    reader.set(zmq::sockopt::linger, 0);
    reader.connect(wire::IpcEndpointFor(h.DataDir()));
    for (int i = 0; i < kWarm; ++i) {
      wire::SendFrames(reader, {wire::kClientHeader, body});
      auto frames = wire::RecvFrames(reader, /*dontwait=*/false);
      ASSERT_TRUE(frames && frames->size() == 2);
      reply_bytes = (*frames)[1].size();
    }
  }
  // Without the bound the replies alone would be far over it: the test can fail.
  ASSERT_GT(reply_bytes * kUnread, 2 * (kPeerCap + kMargin)) << "answers of " << reply_bytes << " bytes are too small";
  const uint64_t baseline = RssBytes(h.server_pid());
  ASSERT_GT(baseline, 0u);

  zmq::socket_t sink(ctx, zmq::socket_type::dealer);
  sink.set(zmq::sockopt::linger, 0);
  sink.set(zmq::sockopt::sndhwm, 0);
  sink.set(zmq::sockopt::rcvhwm, 1);  // this process holds almost nothing: the server's queue is what grows
  sink.set(zmq::sockopt::rcvbuf, 4096);
  sink.connect(wire::IpcEndpointFor(h.DataDir()));
  for (int i = 0; i < kUnread; ++i) wire::SendFrames(sink, {wire::kClientHeader, body});

  // Every request handled (answered or its answer dropped): the counter says so.
  double answered = 0;
  auto delay = std::chrono::milliseconds(100);
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(300);
       std::chrono::steady_clock::now() < until && answered < kWarm + kUnread;
       delay = std::min(delay * 2, std::chrono::milliseconds(2000))) {
    std::this_thread::sleep_for(delay);
    answered = EventsAnswered(port);
  }
  ASSERT_GE(answered, kWarm + kUnread) << "the server did not handle every request";
  const uint64_t rss = RssBytes(h.server_pid());
  EXPECT_LT(rss, baseline + kPeerCap + kMargin)
      << "resident " << (rss >> 20) << " MB, " << (baseline >> 20) << " MB before " << kUnread << " unread answers of "
      << reply_bytes << " bytes";
  const std::string log = h.Log("server");
  EXPECT_NE(log.find("MB of messages it has not read (the cap is 64 MB per peer)"), std::string::npos);

  // The server still answers everyone else.
  EXPECT_EQ(h.Cli({"ping"}).exit_code, 0);
  EXPECT_EQ(h.Cli({"show", run}).exit_code, 0);
}

}  // namespace
}  // namespace npuprof::testing
