// The target's interpreter resolved once per machine and used by every
// on-target Python program (workers/profiling/target_interpreter.h,
// interpreter_command.h), end to end: the simulated host's env script puts
// a `python3` first on PATH that plays a version manager's shim (it writes
// a line per start to a log: "tool" for the simulated host's own tools, "resolve" when npuprof asks it which
// interpreter it is, "http" for the HTTP program, "other" for anything
// else, and runs the interpreter a file names). With one worker, a whole
// torch-profile (preflight, port pick, readiness probes, the HTTP
// exchanges, the capture check, analyse() and the rank digests) starts the
// shim once, the next run not at all; once the interpreter it reported is
// removed, the next run's first Python command finds it gone, asks the
// shim once more and learns the new one. Every run sends each request
// exactly once (the simulator's request log).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Shim {
  std::string bin, log, real_file;
};

// The shim first on PATH once set_env.sh is sourced (no connection was
// opened yet: machine add does not connect); it runs what real_file names.
Shim InstallShim(NpuprofHarness& h) {
  Shim s{h.SimRoot() + "/shim-bin", h.SimRoot() + "/shim-starts.log", h.SimRoot() + "/shim-real"};
  fs::create_directories(s.bin);
  {
    std::ofstream py(s.bin + "/python3");
    py << "#!/bin/sh\n"
          "case \"$*\" in \"-S \"*/target/bin/*) echo tool >> '" << s.log << "' ;; *X_OK*) echo resolve >> '" << s.log << "' ;; *npuprof-target-http*) echo http >> '" << s.log
       << "' ;; *) printf 'other %s\\n' \"$(printf '%s' \"$*\" | head -c 120 | tr '\\n' ' ')\" >> '" << s.log << "' ;; esac\n"
          "read -r real < '" << s.real_file << "'\n"
          "exec \"$real\" \"$@\"\n";
  }
  EXPECT_EQ(chmod((s.bin + "/python3").c_str(), 0755), 0);
  std::ofstream env(h.SimRoot() + "/set_env.sh", std::ios::app);
  env << "\nexport PATH='" << s.bin << "':\"$PATH\"\n";
  return s;
}

// A link to the real interpreter at dir/python3 (sys.executable keeps the
// link's path), and the shim pointed at it.
std::string PointShimAt(const Shim& s, const std::string& dir) {
  fs::create_directories(dir);
  const std::string link = dir + "/python3";
  fs::create_symlink(fs::canonical("/usr/bin/python3"), link);
  std::ofstream(s.real_file, std::ios::trunc) << link << "\n";
  return link;
}

int Lines(const std::string& log, const std::string& what) {
  std::ifstream f(log);
  int n = 0;
  for (std::string line; std::getline(f, line);) n += what.empty() || line.substr(0, line.find(' ')) == what;
  return n;
}
// npuprof's programs' starts (not the simulated host's own tools, npu-smi
// and vllm, which are Python scripts there: a real host's are not).
int Starts(const std::string& log) { return Lines(log, "") - Lines(log, "tool"); }
std::string Log(const std::string& log) {
  std::ifstream f(log);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

size_t Served(const NpuprofHarness& h) {
  size_t served = 0;
  for (const auto& t : h.SimTruthFiles()) served += t.value("requests_log", json::array()).size();
  return served;
}

json Profile(NpuprofHarness& h, const std::string& model, const std::string& tag) {
  CliResult r = h.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "qwen",
                       "--tp", "2", "--tag", tag, "--mode", "enforce_eager", "--request-kind", "text",
                       "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                       "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                       "--profile-control-timeout", "30", "--request-timeout", "30", "--wait"},
                      170);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return r.json();
}

TEST(TargetInterpreterE2E, AWholeRunStartsTheShimOnceAndAGoneInterpreterIsAskedForAgain) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, 1).ok());  // one worker: one cache
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  const Shim shim = InstallShim(h);
  const std::string first = PointShimAt(shim, h.SimRoot() + "/py-a");

  json m = Profile(h, model, "one");
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok") << m["workload_status"].dump();
  // Every Python program of the run (preflight, port pick, readiness
  // probes, HTTP exchanges, capture check, analyse(), rank digests) went
  // through the resolved path: the shim started once, to be asked.
  EXPECT_EQ(Lines(shim.log, "resolve"), 1);
  EXPECT_EQ(Starts(shim.log), 1) << Log(shim.log);
  EXPECT_EQ(Served(h), 5u);  // the wave (4) and the follow-up (1), once each
  EXPECT_EQ(m["analysis_status"], "ok");  // analyse() and the rank digests ran (tp 2)
  ASSERT_EQ(m["remote_profile_dirs"].size(), 2u) << m.dump(2);
  for (const auto& d : m["remote_profile_dirs"]) {
    EXPECT_EQ(d["analysis_status"], "ok") << d.dump();
    EXPECT_TRUE(d["outputs"]["kernel_details_csv"]["exists"].get<bool>()) << d.dump();
  }

  m = Profile(h, model, "two");
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(Starts(shim.log), 1);  // none: the worker kept the path
  EXPECT_EQ(Served(h), 10u);

  // The interpreter it reported goes away; the shim now runs another one.
  fs::remove(first);
  PointShimAt(shim, h.SimRoot() + "/py-b");
  m = Profile(h, model, "three");
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok") << m["workload_status"].dump();
  EXPECT_EQ(Lines(shim.log, "resolve"), 2);  // the first Python command found it gone and asked once
  EXPECT_EQ(Starts(shim.log), 2);
  EXPECT_EQ(Served(h), 15u);              // and nothing was sent twice
  EXPECT_TRUE(h.LiveServicePids().empty());
}

}  // namespace
}  // namespace npuprof::testing
