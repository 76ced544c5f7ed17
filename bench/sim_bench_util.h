// Helpers of the whole-installation benchmarks (run_overhead_bench.cc,
// scale_bench.cc): machine load, process memory, directory size, the
// per-task SSH counter lines workers write to server.log, and the SSH cost
// floor of one remote command on the harness's sshd. Header-only.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/npuprof_harness.h"
#include "tests/support/proc_memory.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::bench {

// Parses the bench's options; on --help or a bad value prints CLI11's
// message and exits (0 for --help).
inline void ParseOrExit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
}

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// "1.23 1.10 0.98" (1, 5, 15 minutes).
inline std::string LoadAvg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// A "Vm..." field of /proc/<pid>/status in kB (VmRSS, VmHWM); -1 if absent
// (tests/support/proc_memory.h says why).
inline int64_t ProcStatusKb(pid_t pid, const std::string& field) {
  const auto kb = testing::ProcStatusKb(pid, field);
  return kb.ok() ? *kb : -1;
}

struct DirSize {
  int64_t allocated = 0;  // what `du` reports (st_blocks * 512)
  int64_t apparent = 0;   // sum of file sizes (`du --apparent-size`)
};

inline DirSize SizeOfDir(const std::string& dir) {
  DirSize s;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    s.allocated += static_cast<int64_t>(st.st_blocks) * 512;
    s.apparent += static_cast<int64_t>(st.st_size);
  }
  return s;
}

// One "task_stats k=v ..." line of a worker (workers/worker_runtime.cc).
using Fields = std::map<std::string, std::string>;

inline std::vector<Fields> ReadTaskStats(const std::string& server_log, const std::string& tag = "task_stats ") {
  std::vector<Fields> out;
  std::ifstream f(server_log);
  std::string line;
  while (std::getline(f, line)) {
    const size_t p = line.find(tag);
    if (p == std::string::npos) continue;
    Fields kv;
    std::istringstream ss(line.substr(p + tag.size()));
    std::string tok;
    while (ss >> tok) {
      const size_t eq = tok.find('=');
      if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

inline int64_t Num(const Fields& f, const std::string& k) {
  auto it = f.find(k);
  return it == f.end() ? 0 : std::stoll(it->second);
}

// The SSH counters of all task_stats lines of one run, summed.
struct RunSsh {
  int tasks = 0;
  int64_t handler_ms = 0, handshakes = 0, exec = 0, fwd = 0, sftp_sessions = 0, sftp_ops = 0;
  int64_t payload_out = 0, payload_in = 0, wire_out = 0, wire_in = 0, ssh_ms = 0;
  std::map<std::string, int64_t> task_ssh_ms;  // per task id (attempts summed)
};

inline RunSsh SumRun(const std::vector<Fields>& lines, const std::string& run_id) {
  RunSsh r;
  for (const auto& f : lines) {
    auto it = f.find("run");
    if (it == f.end() || it->second != run_id) continue;
    ++r.tasks;
    r.handler_ms += Num(f, "handler_ms");
    r.handshakes += Num(f, "handshakes");
    r.exec += Num(f, "exec");
    r.fwd += Num(f, "fwd");
    r.sftp_sessions += Num(f, "sftp_sessions");
    r.sftp_ops += Num(f, "sftp_ops");
    r.payload_out += Num(f, "payload_out");
    r.payload_in += Num(f, "payload_in");
    r.wire_out += Num(f, "wire_out");
    r.wire_in += Num(f, "wire_in");
    r.ssh_ms += Num(f, "ssh_ms");
    if (auto t = f.find("task"); t != f.end()) r.task_ssh_ms[t->second] += Num(f, "ssh_ms");
  }
  return r;
}

// Per worker process: the highest cumulative handshake and session counts it reported.
inline std::map<std::string, std::pair<int64_t, int64_t>> WorkerHandshakes(const std::vector<Fields>& lines) {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const auto& f : lines) {
    auto it = f.find("worker_pid");
    if (it == f.end()) continue;
    auto& [hs, sessions] = out[it->second];
    hs = std::max(hs, Num(f, "worker_handshakes"));
    sessions = std::max(sessions, Num(f, "worker_sessions"));
  }
  return out;
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// What one remote command costs on this sshd and account when the target
// does nothing: median wall of `true` run the way workers run commands (the
// machine's env script sourced, on a reused session), and of an SFTP stat.
struct SshFloor {
  double exec_ms = 0;
  double sftp_ms = 0;
};

inline SshFloor MeasureSshFloor(testing::NpuprofHarness& h, int n = 9) {
  ssh::SshTarget t;
  t.host = "127.0.0.1";
  t.port = h.sshd().port();
  t.user = h.sshd().user();
  t.identity_file = h.sshd().identity_file();
  t.known_hosts_file = h.sshd().known_hosts_file();
  t.env_script = h.SimRoot() + "/set_env.sh";
  ssh::SshSession s(t);
  SshFloor floor;
  if (!s.Connect().ok()) return floor;
  const std::string script = ssh::BuildRemoteScript(t.env_script, {}, {"true"});
  std::vector<double> exec, sftp;
  for (int i = 0; i < n; ++i) {
    auto t0 = SteadyClock::now();
    if (s.Exec(script, std::chrono::seconds(30)).ok()) exec.push_back(SecondsSince(t0) * 1000);
    t0 = SteadyClock::now();
    if (s.Stat("/").ok()) sftp.push_back(SecondsSince(t0) * 1000);
  }
  floor.exec_ms = Median(exec);
  floor.sftp_ms = Median(sftp);
  return floor;
}

// Arguments of setup_target.py that set every simulated delay to zero.
inline std::vector<std::string> ZeroDelaySimArgs() {
  return {"--startup-delay", "0", "--token-delay", "0", "--export-delay", "0",
          "--set", "delays.prefill=0", "--set", "delays.analyse=0", "--set", "delays.msprof_startup=0"};
}

inline std::string HumanBytes(double b) {
  if (b >= 1 << 20) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

}  // namespace npuprof::bench
