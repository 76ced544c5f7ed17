// The profiler controls and the workload where the target's python3 cannot
// run npuprof's HTTP program (workers/profiling/target_http.h): the target's
// env script puts a `python3` first on PATH that refuses that program (exit
// 127, as a missing interpreter, and a line in a log per refusal) and runs
// every other Python program (the simulator's tools, the readiness probe,
// analyse) with the real one. It does not answer npuprof's question which
// interpreter it is (interpreter_command.h: exit 1), so every program keeps
// starting it by name. The run must take the direct-tcpip path for
// each exchange, send every request exactly once (the simulator's own
// request log) and end as it does on a target with python3.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

// Puts the refusing python3 first on PATH once set_env.sh is sourced (no
// connection was opened yet: machine add does not connect); returns the log
// it writes a line "refused" to per refusal.
std::string RefuseTheProgram(NpuprofHarness& h) {
  const std::string bin = h.SimRoot() + "/no-http-program-bin";
  const std::string refusals = h.SimRoot() + "/refusals.log";
  std::filesystem::create_directories(bin);
  {
    std::ofstream py(bin + "/python3");
    py << "#!/bin/sh\n"
          "case \"$*\" in *npuprof-target-http*) echo refused >> '" << refusals << "'; "
          "echo 'python3: not found' >&2; exit 127 ;; *X_OK*) exit 1 ;; esac\n"
          "exec /usr/bin/python3 \"$@\"\n";
  }
  EXPECT_EQ(chmod((bin + "/python3").c_str(), 0755), 0);
  std::ofstream env(h.SimRoot() + "/set_env.sh", std::ios::app);
  env << "\nexport PATH='" << bin << "':\"$PATH\"\n";
  return refusals;
}

int Refusals(const std::string& log_path) {
  std::ifstream log(log_path);
  int refused = 0;
  for (std::string line; std::getline(log, line);) refused += line == "refused";
  return refused;
}

// Requests the service's API server saw, over every instance.
size_t Served(const NpuprofHarness& h) {
  size_t served = 0;
  for (const auto& t : h.SimTruthFiles()) served += t.value("requests_log", json::array()).size();
  return served;
}

TEST(TargetHttpFallbackE2E, ATargetWithoutPython3ForTheProgramProfilesOverDirectTcpipSendingEachRequestOnce) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, 2).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());

  const std::string refusals = RefuseTheProgram(h);

  CliResult r = h.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "qwen",
                       "--tp", "2", "--tag", "nohttp", "--mode", "enforce_eager", "--request-kind", "text",
                       "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                       "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                       "--profile-control-timeout", "30", "--request-timeout", "30", "--wait"},
                      170);
  const json m = r.json();
  ASSERT_TRUE(m.is_object()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok") << m["workload_status"].dump();

  // Each of the four exchanges (start, wave, follow-up, stop) tried the program first.
  EXPECT_EQ(Refusals(refusals), 4);

  // The service saw the wave and the follow-up once each: 4 + 1 requests.
  EXPECT_EQ(Served(h), 5u);
  int sessions = 0;
  for (const auto& t : h.SimTruthFiles())
    sessions += static_cast<int>(t.value("profile_sessions", json::array()).size());
  EXPECT_EQ(sessions, 1);  // one profile window: started once, stopped once
  EXPECT_TRUE(h.LiveServicePids().empty());
}

// memory.infer: the clock read with `date` around a direct-tcpip request.
TEST(TargetHttpFallbackE2E, MemoryProfilesInferenceFallsBackAndStillReadsTheTargetsClock) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--export-delay", "0.5"}).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  const std::string refusals = RefuseTheProgram(h);
  CliResult r = h.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "2", "--wait"}, 200);
  const json m = r.json();
  ASSERT_TRUE(m.is_object()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["inference"].value("http_status", 0), 200) << m["inference"].dump();
  EXPECT_EQ(Refusals(refusals), 1);
  EXPECT_EQ(Served(h), 1u);  // the one inference request, once
  // The activation was cut on the target's clock: `date` read it around the request.
  int cut = 0;
  for (const auto& dev : m["report"]["devices"])
    for (const auto& c : dev["components"])
      if (c.value("key", "") == "activation_peak" && c.value("source", "") == "series") {
        EXPECT_EQ(c["evidence"][0]["clock"], "target") << c.dump();
        ++cut;
      }
  EXPECT_EQ(cut, 2) << m["report"].dump();  // tp 2: both devices
  EXPECT_TRUE(h.LiveServicePids().empty());
}

}  // namespace
}  // namespace npuprof::testing
