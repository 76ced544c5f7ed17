// The target's interpreter resolved once per machine
// (workers/profiling/target_interpreter.h): the path's check, the digest's
// `exe` read strictly, and RunTargetHttpWith's cache and fallback, first
// with a scripted runner (which argv each call got), then with the program
// run locally behind a counting `python3` shim first on PATH (a version
// manager's shim): only the first exchange goes through it, and a cached
// path that no longer exists falls back to it once.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "workers/profiling/image_prep.h"
#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/target_http_run.h"
#include "workers/profiling/target_http.h"
#include "workers/profiling/target_interpreter.h"

namespace npuprof::profiling {
namespace {

using workers::RemoteArgvRunner;
using workers::RunTargetHttpWith;

TEST(TargetInterpreterPath, AcceptsAbsolutePathsAndRefusesTheRestNamingWhy) {
  const std::vector<std::string> good = {"/usr/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3",
                                        "/opt/conda/envs/vllm env/bin/python3.10", "/opt/\xff\xfe/python3", "/p"};
  for (const std::string& ok : good) {
    auto r = CheckInterpreterPath(ok);
    ASSERT_TRUE(r.ok()) << ok << ": " << r.status().ToString();
    EXPECT_EQ(*r, ok);
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"python3", "not absolute"},
      {"usr/bin/python3", "not absolute"},
      {"/usr/bin/", "ends in '/'"},
      {"/usr/../bin/python3", "component '..'"},
      {"/usr/./bin/python3", "component '.'"},
      {"/usr//bin/python3", "component ''"},
      {"/usr/bin/python3\n", "control byte 0x0a"},
      {std::string("/usr/bin/py\0thon", 15), "control byte 0x00"},
      {"/usr/bin/py\x7fthon", "control byte 0x7f"},
      {"/" + std::string(kMaxInterpreterPathBytes, 'p'), "at most 1024"},
  };
  for (const auto& [path, why] : bad) {
    auto r = CheckInterpreterPath(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << path << ": " << r.status().message();
  }
}

TEST(TargetInterpreterCache, KeysByMachineAndForgetsOnlyThePathItWasToldOf) {
  TargetInterpreters c;
  const std::string a = InterpreterKey("u@10.0.0.1:22", "/opt/set_env.sh");
  const std::string b = InterpreterKey("u@10.0.0.1:22", "");  // another env script: another PATH
  EXPECT_NE(a, b);
  c.Put(a, "/usr/bin/python3");
  EXPECT_EQ(c.Get(a), "/usr/bin/python3");
  EXPECT_FALSE(c.Get(b).has_value());
  c.Forget(a, "/other/python3");  // another exchange put a newer path meanwhile: kept
  EXPECT_EQ(c.Get(a), "/usr/bin/python3");
  c.Forget(a, "/usr/bin/python3");
  EXPECT_FALSE(c.Get(a).has_value());
}

TargetHttpPlan OneRequest(bool report) {
  TargetHttpPlan p;
  p.port = 8000;
  p.max_body = 8;
  p.report_interpreter = report;
  p.requests.push_back({.method = "POST", .path = "/start_profile"});
  return p;
}

std::string Digest(const std::string& exe_json) {
  return std::string(kTargetHttpMagic) + "\n" + R"({"wall_ms":3,)" + exe_json +
         R"("results":[{"status":200,"reason":"OK","latency_ms":2,"size":0,"body":""}]})" + "\n";
}

std::string ExeField(const std::string& path) { return "\"exe\":\"" + Base64(path) + "\","; }

TEST(TargetInterpreterDigest, TheExeIsReadWhenAskedAndOnlyThen) {
  auto d = ParseTargetHttpOutput(Digest(ExeField("/usr/bin/python3")), 0, "", OneRequest(true));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->interpreter, "/usr/bin/python3");
  // "" (unknown, or not executable there) and a path that fails the check
  // leave it unknown; the answers stand.
  for (const std::string& none : {std::string("\"exe\":\"\","), ExeField("python3"), ExeField("/a/../python3")}) {
    d = ParseTargetHttpOutput(Digest(none), 0, "", OneRequest(true));
    ASSERT_TRUE(d.ok()) << none << ": " << d.status().ToString();
    EXPECT_FALSE((*d)->interpreter.has_value()) << none;
    EXPECT_EQ((*d)->answers.at(0).status, 200);
  }
  const std::vector<std::pair<std::string, bool>> corrupt = {
      {"", true},                               // asked, missing
      {ExeField("/usr/bin/python3"), false},    // not asked, present
      {"\"exe\":\"not base64!\",", true},       // not base64
      {"\"exe\":7,", true},                     // not text
  };
  for (const auto& [field, asked] : corrupt) {
    d = ParseTargetHttpOutput(Digest(field), 0, "", OneRequest(asked));
    ASSERT_FALSE(d.ok()) << field;
    EXPECT_EQ(d.status().code(), Code::kCorruption) << d.status().ToString();
    EXPECT_NE(d.status().message().find("'exe'"), std::string::npos) << d.status().message();
  }
}

// A runner that answers each call from a script and records the argv.
struct Scripted {
  std::vector<ssh::ExecResult> answers;
  std::vector<std::vector<std::string>> calls;
  RemoteArgvRunner runner() {
    return [this](const std::vector<std::string>& argv, std::chrono::milliseconds) -> Result<ssh::ExecResult> {
      calls.push_back(argv);
      if (calls.size() > answers.size()) return Status::Internal("unexpected call");
      return answers[calls.size() - 1];
    };
  }
};

ssh::ExecResult Exit(int status, std::string out = "", std::string err = "") {
  ssh::ExecResult r;
  r.exit_status = status;
  r.stdout_data = std::move(out);
  r.stderr_data = std::move(err);
  return r;
}

bool AsksExe(const std::vector<std::string>& argv) {
  const std::string plan = argv.back();
  return plan.find("\"exe\":true") != std::string::npos;
}

TEST(TargetInterpreterRun, TheFirstExchangeAsksPython3AndTheNextOnesStartThePathItReported) {
  TargetInterpreters cache;
  Scripted s;
  s.answers = {Exit(0, Digest(ExeField("/root/.pyenv/versions/3.11.7/bin/python3"))), Exit(0, Digest(""))};
  auto first = RunTargetHttpWith(s.runner(), cache, "m", OneRequest(false));
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().ToString();
  auto second = RunTargetHttpWith(s.runner(), cache, "m", OneRequest(false));
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status().ToString();
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0][0], "python3");
  EXPECT_TRUE(AsksExe(s.calls[0]));
  EXPECT_EQ(s.calls[1][0], "/root/.pyenv/versions/3.11.7/bin/python3");
  EXPECT_FALSE(AsksExe(s.calls[1]));
  EXPECT_EQ(cache.Get("m"), "/root/.pyenv/versions/3.11.7/bin/python3");
  EXPECT_FALSE(cache.Get("other machine").has_value());
}

TEST(TargetInterpreterRun, APathThatNoLongerStartsFallsBackToPython3AndAsksAgain) {
  for (const int gone : {127, 126}) {
    TargetInterpreters cache;
    cache.Put("m", "/old/bin/python3");
    Scripted s;
    s.answers = {Exit(gone, "", "sh: /old/bin/python3: not found"), Exit(0, Digest(ExeField("/new/bin/python3")))};
    auto r = RunTargetHttpWith(s.runner(), cache, "m", OneRequest(false));
    ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
    ASSERT_EQ(s.calls.size(), 2u);
    EXPECT_EQ(s.calls[0][0], "/old/bin/python3");
    EXPECT_EQ(s.calls[1][0], "python3");
    EXPECT_TRUE(AsksExe(s.calls[1]));
    EXPECT_EQ(cache.Get("m"), "/new/bin/python3");
  }
}

TEST(TargetInterpreterRun, NoRetryOnceTheProgramStartedNorWhenPython3ItselfCannotRun) {
  {  // started, then its digest is cut: the requests may have been sent, never again
    TargetInterpreters cache;
    cache.Put("m", "/usr/bin/python3");
    Scripted s;
    s.answers = {Exit(-1, std::string(kTargetHttpMagic) + "\n")};
    auto r = RunTargetHttpWith(s.runner(), cache, "m", OneRequest(false));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kCorruption);
    EXPECT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(cache.Get("m"), "/usr/bin/python3");
  }
  {  // no python3 at all: the caller's direct path, nothing cached
    TargetInterpreters cache;
    Scripted s;
    s.answers = {Exit(127, "", "python3: not found")};
    auto r = RunTargetHttpWith(s.runner(), cache, "m", OneRequest(false));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value());
    EXPECT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(cache.size(), 0u);
  }
  {  // the link failed: its error, no second try here (the task's retry policy decides)
    TargetInterpreters cache;
    cache.Put("m", "/usr/bin/python3");
    int calls = 0;
    const RemoteArgvRunner fail = [&](const std::vector<std::string>&, std::chrono::milliseconds) {
      ++calls;
      return Result<ssh::ExecResult>(Status::Unavailable("connection_lost: gone"));
    };
    auto r = RunTargetHttpWith(fail, cache, "m", OneRequest(false));
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(calls, 1);
  }
}

// The program run locally (no SSH) behind a `python3` first on PATH that
// counts its starts and runs /usr/bin/python3, as a pyenv shim does.
struct ShimmedLocal {
  npuprof::testing::TempDir bin;
  std::string log = bin.path + "/starts.log";
  std::string path_env = bin.path + ":/usr/bin:/bin";
  ShimmedLocal() {
    std::ofstream py(bin.path + "/python3");
    py << "#!/bin/sh\necho start >> '" << log << "'\nexec /usr/bin/python3 \"$@\"\n";
    py.close();
    chmod((bin.path + "/python3").c_str(), 0755);
  }
  int Starts() const {
    std::ifstream f(log);
    int n = 0;
    for (std::string line; std::getline(f, line);) n += line == "start";
    return n;
  }
  RemoteArgvRunner runner() const {
    return [this](const std::vector<std::string>& argv, std::chrono::milliseconds) -> Result<ssh::ExecResult> {
      const auto r = ssh::testing::RunLocalArgv(argv, "", path_env);
      return Exit(r.status, r.out, r.err);
    };
  }
};

TargetHttpPlan ToClosedPort() {
  TargetHttpPlan p;
  p.port = 1;  // nobody listens: an error per request, the program still runs to its end
  p.timeout = std::chrono::seconds(5);
  p.requests.push_back({.method = "POST", .path = "/start_profile"});
  return p;
}

TEST(TargetInterpreterLocal, OnlyTheFirstExchangeGoesThroughTheShimAndAGonePathFallsBackOnce) {
  ShimmedLocal shim;
  TargetInterpreters cache;
  for (int i = 0; i < 3; ++i) {
    auto r = RunTargetHttpWith(shim.runner(), cache, "m", ToClosedPort());
    ASSERT_TRUE(r.ok() && r->has_value()) << i << ": " << r.status().ToString();
    EXPECT_FALSE((*r)->answers.at(0).answered);
  }
  EXPECT_EQ(shim.Starts(), 1);
  EXPECT_EQ(cache.Get("m"), "/usr/bin/python3");  // what the shim ran, as sys.executable says

  // The cached path removed (here: replaced by one that does not exist).
  npuprof::testing::TempDir gone;
  cache.Put("m", gone.path + "/python3");
  auto r = RunTargetHttpWith(shim.runner(), cache, "m", ToClosedPort());
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ(shim.Starts(), 2);
  EXPECT_EQ(cache.Get("m"), "/usr/bin/python3");
}

}  // namespace
}  // namespace npuprof::profiling
