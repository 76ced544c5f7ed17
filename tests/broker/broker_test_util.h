// Helpers for the broker integration tests: a machine whose npu-smi is slow
// on its first call (so a kill lands mid-task), event queries, polling.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {

using nlohmann::json;

// Adds machine `name` (same sshd and target as sim1) whose env script puts a
// wrapper first on PATH: the first `npu-smi` call touches `started` and sleeps
// sleep_s before running the simulator's; later calls run it at once.
// Returns the file that appears once the slow call has begun.
inline std::string AddSlowMachine(NpuprofHarness& h, const std::string& name, int sleep_s) {
  namespace fs = std::filesystem;
  const std::string dir = h.Dir() + "/slow-" + name;
  fs::create_directories(dir + "/bin");
  const std::string started = dir + "/started";
  {
    std::ofstream w(dir + "/bin/npu-smi");
    w << "#!/bin/sh\n"
      << "if mkdir '" << dir << "/first' 2>/dev/null; then\n"
      << "  : > '" << started << "'\n"
      << "  sleep " << sleep_s << "\n"
      << "fi\n"
      << "exec '" << h.SimRoot() << "/bin/npu-smi' \"$@\"\n";
  }
  fs::permissions(dir + "/bin/npu-smi", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
  {
    std::ofstream e(dir + "/env.sh");
    e << ". '" << h.SimRoot() << "/set_env.sh'\n"
      << "export PATH='" << dir << "/bin':\"$PATH\"\n";
  }
  // Workers pool one SSH session per (host, port, user, key, known_hosts) and
  // run commands with the env script of the machine that opened it; a copy of
  // known_hosts keeps this machine's session (and env script) its own.
  fs::copy_file(h.sshd().known_hosts_file(), dir + "/known_hosts", fs::copy_options::overwrite_existing);
  CliResult add = h.Cli({"machine", "add", name, "--host", "127.0.0.1", "--port", std::to_string(h.sshd().port()),
                         "--user", h.sshd().user(), "--identity", h.sshd().identity_file(), "--known-hosts",
                         dir + "/known_hosts", "--env-script", dir + "/env.sh", "--runtime-base",
                         h.Dir() + "/runtime"});
  EXPECT_EQ(add.exit_code, 0) << add.err;
  return started;
}

template <typename Pred>
bool PollUntil(Pred pred, int timeout_s, int every_ms = 150) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
  }
  return pred();
}

inline bool WaitForFile(const std::string& path, int timeout_s) {
  return PollUntil([&] { return std::filesystem::exists(path); }, timeout_s, 50);
}

// The run's events (`npuprof events RUN --json`), [] when unavailable.
inline json Events(NpuprofHarness& h, const std::string& run_id) {
  CliResult r = h.Cli({"events", run_id, "--json"}, 20);
  json j = r.json();
  if (!j.is_object() || !j.contains("events")) return json::array();
  return j["events"];
}

inline std::vector<json> EventsOfType(const json& events, const std::string& type) {
  std::vector<json> out;
  for (const auto& e : events)
    if (e.value("type", "") == type) out.push_back(e);
  return out;
}

inline std::string TypesOf(const json& events) {
  std::string s;
  for (const auto& e : events) s += e.value("type", "?") + " ";
  return s;
}

// `npuprof show RUN` once the run has ended (status no longer "running").
inline std::optional<json> WaitFinished(NpuprofHarness& h, const std::string& run_id, int timeout_s) {
  json last;
  const bool done = PollUntil(
      [&] {
        CliResult r = h.Cli({"show", run_id}, 20);
        last = r.json();
        return last.is_object() && last.value("status", "running") != "running";
      },
      timeout_s, 200);
  if (!done) return std::nullopt;
  return last;
}

// pid of the worker holding task_id per `npuprof workers`, or 0.
inline uint32_t WorkerHolding(NpuprofHarness& h, const std::string& task_id) {
  json j = h.Cli({"workers"}, 10).json();
  if (!j.is_object()) return 0;
  for (const auto& w : j.value("workers", json::array()))
    for (const auto& t : w.value("tasks", json::array()))
      if (t == task_id) return w.value("pid", 0u);
  return 0;
}

inline std::string SubmitProbe(NpuprofHarness& h, const std::string& machine, const std::string& run_id = "") {
  std::vector<std::string> args = {"submit", "probe", "--machine", machine};
  if (!run_id.empty()) {
    args.push_back("--run-id");
    args.push_back(run_id);
  }
  CliResult r = h.Cli(args, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return r.json().is_object() ? r.json().value("run_id", "") : "";
}

}  // namespace npuprof::testing
