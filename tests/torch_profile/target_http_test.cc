// HTTP asked on the target (workers/profiling/target_http.h): the digest's
// reader over well-formed and malformed outputs, the plan's argv limits, and
// the program itself run locally (no SSH) against a python3 HTTP server
// that records every request it received: what the digest reports is
// checked against what the server saw and sent.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/target_http_run.h"
#include "workers/profiling/chat_requests.h"
#include "workers/profiling/target_http.h"

namespace npuprof::profiling {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TargetHttpPlan PlanOf(size_t n, bool clock = false) {
  TargetHttpPlan p;
  p.port = 8000;
  p.max_body = 8;
  p.clock = clock;
  for (size_t i = 0; i < n; ++i) p.requests.push_back({.method = "POST", .path = "/x", .body = "b"});
  return p;
}

std::string Out(const std::string& line) { return std::string(kTargetHttpMagic) + "\n" + line + "\n"; }

TEST(TargetHttpOutput, ReadsAnswersErrorsAndTheClock) {
  // "aGVsbG8=" is "hello" (5 bytes of 5); "MDEyMzQ1Njc=" the first 8 of 20 (the cap).
  auto d = ParseTargetHttpOutput(
      Out(R"({"wall_ms":12,"clock":{"before_ns":100,"after_ns":250},"results":[)"
          R"({"status":200,"reason":"OK","latency_ms":7,"size":5,"body":"aGVsbG8="},)"
          R"({"status":503,"reason":"","latency_ms":1,"size":20,"body":"MDEyMzQ1Njc="},)"
          R"({"error":"ConnectionRefusedError: [Errno 111] Connection refused","latency_ms":0}]})"),
      0, "", PlanOf(3, true));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->has_value());
  const TargetHttpDigest& g = **d;
  EXPECT_EQ(g.wall_ms, 12);
  EXPECT_EQ(g.before_ns, 100);
  EXPECT_EQ(g.after_ns, 250);
  ASSERT_EQ(g.answers.size(), 3u);
  EXPECT_TRUE(g.answers[0].answered);
  EXPECT_EQ(g.answers[0].body, "hello");
  EXPECT_EQ(g.answers[0].latency_ms, 7);
  EXPECT_EQ(g.answers[1].status, 503);
  EXPECT_EQ(g.answers[1].body, "01234567");
  EXPECT_EQ(g.answers[1].size, 20u);
  EXPECT_FALSE(g.answers[2].answered);
  EXPECT_NE(g.answers[2].error.find("Connection refused"), std::string::npos);

  // An error becomes the direct path's kinds; an answer its response.
  auto e = workers::AsHttpResponse(g.answers[2], 8000);
  EXPECT_EQ(ssh::ErrorKindOf(e.status()), ssh::SshErrorKind::kChannelFailed) << e.status().ToString();
  EXPECT_EQ(ssh::ErrorKindOf(workers::AsHttpResponse({.error = "timeout: timed out"}, 1).status()),
            ssh::SshErrorKind::kTimeout);
  auto r = workers::AsHttpResponse(g.answers[1], 8000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  // A record of a body cut on the target says how large it was.
  EXPECT_EQ(RequestRecord(0, r, -1, 70000)["body_truncated_from"], 70000);
}

TEST(TargetHttpOutput, WithoutTheMagicLineTheProgramNeverStarted) {
  for (const char* out : {"", "python3: not found\n", "npuprof-target-http 2\n{}\n", "  File \"<string>\", line 1\n"}) {
    auto d = ParseTargetHttpOutput(out, 127, "sh: 1: python3: not found", PlanOf(1));
    ASSERT_TRUE(d.ok()) << out;
    EXPECT_FALSE(d->has_value()) << out;
  }
}

TEST(TargetHttpOutput, RefusesMalformedDigestsNamingWhatIsWrong) {
  const std::string ok_answer = R"({"status":200,"reason":"OK","latency_ms":1,"size":1,"body":"YQ=="})";
  const std::pair<std::string, const char*> bad[] = {
      {std::string(kTargetHttpMagic) + "\n", "is missing"},
      {Out(R"({"wall_ms":1,"results":[]})") + "more\n", "not one line"},
      {std::string(kTargetHttpMagic) + "\n{\"wall_ms\":1", "not one line"},
      {Out("{"), "not JSON"},
      {Out("[]"), "not an object"},
      {Out(R"({"wall_ms":1,"results":[],"extra":1})"), "not an object of"},
      {Out(R"({"results":[)" + ok_answer + "]}"), "'wall_ms'"},
      {Out(R"({"wall_ms":-1,"results":[)" + ok_answer + "]}"), "'wall_ms'"},
      {Out(R"({"wall_ms":1.5,"results":[)" + ok_answer + "]}"), "'wall_ms'"},
      {Out(R"({"wall_ms":1,"clock":{"before_ns":1,"after_ns":2},"results":[)" + ok_answer + "]}"),
       "'clock' it was not asked for"},
      {Out(R"({"wall_ms":1})"), "'results' list of 1"},
      {Out(R"({"wall_ms":1,"results":[]})"), "'results' list of 1"},
      {Out(R"({"wall_ms":1,"results":[)" + ok_answer + "," + ok_answer + "]}"), "'results' list of 1"},
      {Out(R"({"wall_ms":1,"results":[7]})"), "answer 0 is not an object"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"OK","size":1,"body":"YQ=="}]})"), "'latency_ms'"},
      {Out(R"({"wall_ms":1,"results":[{"error":5,"latency_ms":1}]})"), "{error: text, latency_ms}"},
      {Out(R"({"wall_ms":1,"results":[{"error":"x","latency_ms":1,"status":200}]})"), "{error: text, latency_ms}"},
      {Out(R"({"wall_ms":1,"results":[{"status":99,"reason":"","latency_ms":1,"size":1,"body":"YQ=="}]})"),
       "'status' (100-999)"},
      {Out(R"({"wall_ms":1,"results":[{"status":"200","reason":"","latency_ms":1,"size":1,"body":"YQ=="}]})"),
       "'status' (100-999)"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":-1,"body":""}]})"), "'size'"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"latency_ms":1,"size":1,"body":"YQ=="}]})"), "'reason'"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":1,"body":7}]})"), "'body'"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":1,"body":"Y Q=="}]})"),
       "not base64"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":0,"body":"YQ=="}]})"),
       "against size 0"},
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":3,"body":"YQ=="}]})"),
       "against size 3"},  // cut short of the cap (8)
      {Out(R"({"wall_ms":1,"results":[{"status":200,"reason":"","latency_ms":1,"size":99,"body":"MDEyMzQ1Njc4"}]})"),
       "the cap 8"},  // 9 bytes sent back, cap 8
      {Out(std::string("{\"wall_ms\":1,\"results\":[{\"error\":\"\xff\",\"latency_ms\":1}]}")), "not JSON"},
  };
  for (const auto& [text, why] : bad) {
    auto d = ParseTargetHttpOutput(text, 0, "Traceback\n", PlanOf(1));
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().code(), Code::kCorruption) << text;
    EXPECT_NE(d.status().message().find(why), std::string::npos) << text << " -> " << d.status().message();
    EXPECT_NE(d.status().message().find("may have been sent"), std::string::npos);
  }
  // Asked for the clock, a digest without it (or a clock running backwards) is refused.
  const std::string no_clock = Out(R"({"wall_ms":1,"results":[)" + ok_answer + "]}");
  EXPECT_FALSE(ParseTargetHttpOutput(no_clock, 0, "", PlanOf(1, true)).ok());
  EXPECT_FALSE(ParseTargetHttpOutput(Out(R"({"wall_ms":1,"clock":{"before_ns":5,"after_ns":4},"results":[)" +
                                         ok_answer + "]}"),
                                     0, "", PlanOf(1, true))
                   .ok());
}

TEST(TargetHttpArgv, CutsThePlanIntoArgvPiecesAndRefusesWhatCannotGo) {
  TargetHttpPlan p = PlanOf(0);
  p.requests.push_back({.path = "/v1/completions", .body = std::string(300 * 1024, 'a')});
  auto argv = TargetHttpArgv(p);
  ASSERT_TRUE(argv.has_value());
  ASSERT_GE(argv->size(), 9u);  // python3 -I -S -c PROGRAM + 400 KiB of base64 in 96 KiB pieces
  ASSERT_EQ(std::vector<std::string>(argv->begin(), argv->begin() + 4),
            (std::vector<std::string>{"python3", "-I", "-S", "-c"}));
  for (size_t i = 5; i < argv->size(); ++i) EXPECT_LE((*argv)[i].size(), kArgPieceBytes);
  p.clock = true;  // the clock as the target's own Python programs read it: -S, PYTHONPATH kept (no -I)
  EXPECT_EQ((*TargetHttpArgv(p))[1], "-S");
  EXPECT_EQ((*TargetHttpArgv(p))[2], "-c");
  p.clock = false;
  p.requests[0].body = std::string(kMaxPlanBytes, 'a');  // over the command line's room: the direct path
  EXPECT_FALSE(TargetHttpArgv(p).has_value());
  for (const char* path : {"", "x", "/a b", "/a\r\nX: y"}) {
    TargetHttpPlan q = PlanOf(1);
    q.requests[0].path = path;
    EXPECT_FALSE(TargetHttpArgv(q).has_value()) << path;
  }
  TargetHttpPlan many = PlanOf(500);  // a wave's answers, at 64 KiB each, fit the command's output
  many.max_body = 64 * 1024 + 1;
  EXPECT_TRUE(TargetHttpArgv(many).has_value());
  many = PlanOf(600);  // they might not: the direct path
  many.max_body = 64 * 1024 + 1;
  EXPECT_FALSE(TargetHttpArgv(many).has_value());
  TargetHttpPlan q = PlanOf(10);
  q.concurrency = 3;
  q.timeout = std::chrono::seconds(5);
  EXPECT_EQ(TargetHttpDeadline(q), std::chrono::seconds(4 * 5 + 30));
}

// A free TCP port on 127.0.0.1 (bound to 0 and closed again).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The played service: answers every POST after 0.3 s with {"path", "body"}
// (or 100 KiB of 'x' on /big, 404 on /missing), and appends
// {"path", "body", "inflight"} per request to LOG (inflight: the requests
// it was holding at once, this one included).
struct Service {
  npuprof::testing::TempDir t;
  int port = FreePort();
  pid_t pid = -1;
  std::string log = t.path + "/requests.jsonl";
  Service() {
    const std::string py =
        "import http.server, json, sys, threading, time\n"
        "lock = threading.Lock(); n = [0]\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    protocol_version = 'HTTP/1.1'\n"
        "    def log_message(self, *a): pass\n"
        "    def do_POST(self):\n"
        "        body = self.rfile.read(int(self.headers.get('Content-Length', '0'))).decode()\n"
        "        with lock:\n"
        "            n[0] += 1; held = n[0]\n"
        "        time.sleep(0.3)\n"
        "        with lock:\n"
        "            n[0] -= 1\n"
        "            open(sys.argv[1], 'a').write(json.dumps({'path': self.path, 'body': body, 'inflight': held}) + '\\n')\n"
        "        out = b'x' * 100000 if self.path == '/big' else json.dumps({'path': self.path, 'body': body}).encode()\n"
        "        self.send_response(404 if self.path == '/missing' else 200)\n"
        "        self.send_header('Content-Length', str(len(out))); self.end_headers(); self.wfile.write(out)\n"
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[2])), H).serve_forever()\n";
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      const std::string port_s = std::to_string(port);
      char* const envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
      char* const argv[] = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(py.c_str()),
                            const_cast<char*>(log.c_str()), const_cast<char*>(port_s.c_str()), nullptr};
      execve("/usr/bin/python3", argv, envp);
      _exit(127);
    }
    setpgid(pid, pid);
    // Serving once its port accepts a connection.
    for (int i = 0; i < 1500; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
      if (up) break;
      usleep(20000);
    }
  }
  ~Service() {
    if (pid > 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  std::vector<json> Seen() const {
    std::vector<json> out;
    std::ifstream f(log);
    for (std::string line; std::getline(f, line);) out.push_back(json::parse(line));
    return out;
  }
};

Result<std::optional<TargetHttpDigest>> RunLocally(const TargetHttpPlan& plan, const std::string& path_env = "") {
  auto argv = TargetHttpArgv(plan);
  if (!argv) return Status::Invalid("no argv");
  const auto r = ssh::testing::RunLocalArgv(*argv, "", path_env);
  return ParseTargetHttpOutput(r.out, r.status, r.err, plan);
}

TEST(TargetHttpProgram, SendsEveryRequestOnceAtTheConcurrencyAndReportsWhatTheServiceAnswered) {
  Service svc;
  TargetHttpPlan plan;
  plan.port = svc.port;
  plan.concurrency = 3;
  plan.timeout = std::chrono::seconds(30);
  plan.max_body = 1000;
  for (int i = 0; i < 7; ++i)
    plan.requests.push_back(
        {.path = "/v1/completions", .content_type = "application/json", .body = "{\"i\":" + std::to_string(i) + "}"});
  plan.requests.push_back({.path = "/big", .body = "big"});
  plan.requests.push_back({.path = "/missing", .body = ""});
  auto d = RunLocally(plan);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->has_value());
  const auto seen = svc.Seen();
  ASSERT_EQ(seen.size(), plan.requests.size());  // each request once
  std::multiset<std::string> bodies;
  int most = 0;
  for (const auto& s : seen) {
    bodies.insert(s["body"].get<std::string>());
    most = std::max(most, s["inflight"].get<int>());
  }
  for (const auto& r : plan.requests) EXPECT_EQ(bodies.count(r.body), 1u) << r.body;
  EXPECT_LE(most, 3);  // never more than the concurrency at once
  EXPECT_GE(most, 2);  // and several at once (each answer takes 0.3 s)
  const auto& a = (*d)->answers;
  for (int i = 0; i < 7; ++i) {  // in input order, each with its own answer
    ASSERT_TRUE(a[i].answered) << a[i].error;
    EXPECT_EQ(a[i].status, 200);
    EXPECT_EQ(json::parse(a[i].body)["body"], plan.requests[i].body);
    EXPECT_EQ(a[i].size, a[i].body.size());
    EXPECT_GE(a[i].latency_ms, 250);
  }
  EXPECT_EQ(a[7].size, 100000u);  // the body counted whole, sent back up to the cap
  EXPECT_EQ(a[7].body, std::string(1000, 'x'));
  EXPECT_EQ(a[8].status, 404);
  EXPECT_GE((*d)->wall_ms, 900);  // three rounds of 0.3 s at least
  EXPECT_FALSE((*d)->before_ns.has_value());
}

TEST(TargetHttpProgram, AClosedPortIsAnErrorPerRequestAndTheClockIsRead) {
  TargetHttpPlan plan;
  plan.port = FreePort();  // nobody listens
  plan.clock = true;
  plan.requests.push_back({.path = "/v1/completions", .body = "{}"});
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto d = RunLocally(plan);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->has_value());
  EXPECT_FALSE((*d)->answers[0].answered);
  EXPECT_NE((*d)->answers[0].error.find("Connection"), std::string::npos) << (*d)->answers[0].error;
  ASSERT_TRUE((*d)->before_ns.has_value());
  EXPECT_GE(*(*d)->before_ns, now_ns - 60'000'000'000);  // this machine's clock (same host)
  EXPECT_LE(*(*d)->before_ns, *(*d)->after_ns);
}

// What the program imports before its first request (python3 -X importtime
// on its own argv): no base64, no socket.py, no threading for one request
// at a time (each is milliseconds of its start: docs/PERFORMANCE.md run
// 61); threading where several requests go at once.
std::string ImportsOf(const TargetHttpPlan& plan) {
  auto argv = TargetHttpArgv(plan);
  EXPECT_TRUE(argv.has_value());
  if (!argv) return "";
  argv->insert(argv->begin() + 1, {"-X", "importtime"});
  const auto r = ssh::testing::RunLocalArgv(*argv, "");
  EXPECT_TRUE(ParseTargetHttpOutput(r.out, r.status, r.err, plan).ok()) << r.out << r.err;
  return r.err;
}
bool Imported(const std::string& importtime, const std::string& module) {
  std::istringstream lines(importtime);
  for (std::string line; std::getline(lines, line);) {
    const auto bar = line.rfind('|');
    if (bar == std::string::npos) continue;
    std::string name = line.substr(bar + 1);
    name.erase(0, name.find_first_not_of(' '));
    if (name == module) return true;
  }
  return false;
}

TEST(TargetHttpProgram, StartsWithoutTheModulesItDoesNotNeed) {
  Service svc;
  TargetHttpPlan one;
  one.port = svc.port;
  one.requests.push_back({.path = "/v1/completions", .content_type = "application/json", .body = "{}"});
  const std::string alone = ImportsOf(one);
  ASSERT_TRUE(Imported(alone, "json")) << alone;  // the listing is read right
  for (const char* m : {"base64", "socket", "threading", "random", "http.client"})
    EXPECT_FALSE(Imported(alone, m)) << m << " imported:\n" << alone;
  TargetHttpPlan two = one;
  two.concurrency = 2;
  two.requests.push_back(one.requests[0]);
  EXPECT_TRUE(Imported(ImportsOf(two), "threading"));
  EXPECT_EQ(svc.Seen().size(), 3u);  // every request sent
}

TEST(TargetHttpProgram, ATargetWithoutPython3NeverStartsItAndNothingIsSent) {
  Service svc;
  npuprof::testing::TempDir bin;
  for (const char* tool : {"sh", "cat"}) fs::create_symlink(std::string("/usr/bin/") + tool, bin.path + "/" + tool);
  TargetHttpPlan plan;
  plan.port = svc.port;
  plan.requests.push_back({.path = "/start_profile"});
  auto d = RunLocally(plan, bin.path);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->has_value());
  EXPECT_TRUE(svc.Seen().empty());
}

}  // namespace
}  // namespace npuprof::profiling
