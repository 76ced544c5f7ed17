// The crash matrix for five run kinds: probe, serve, torch-profile,
// memory-profile (standalone, with its msprof export) and sweep (two
// memory-profile points; every child exactly once), and for a torch-profile
// and a memory-profile that span two simulated hosts ("torch-profile-2node",
// "memory-profile-2node": tp 1, dp 2, one rank per node; each node's service
// launched once, each node's rank analysed once, each node's msprof data
// exported once).
//
// For each kind, one clean run records the global positions of the run's
// events (run once per build and shared by the kind's shards:
// clean_run_cache.h). Then, for every committed decision of that run (position K of its
// last event, relative to the fresh store; the events of one decision are
// committed atomically, so a crash after any of them is a crash after all of
// them), a fresh installation (own sshd, simulated target, data
// dir) starts its server with NPUPROF_FAULT_CRASH_AFTER_GLOBAL_POS=K, the same
// run is submitted (--run-id), the server SIGKILLs itself right after the
// commit that reaches K, and a restarted server (no fault) must:
//   * end the run with the clean run's terminal status,
//   * serve a summary and a manifest equal to the clean run's once the
//     fields listed in kDroppedKeys are dropped and the installation's temp
//     dir is replaced by "<dir>",
//   * pass `npuprof verify RUN` (exit 0),
//   * have recorded RunRecovered exactly when the crash happened before the
//     run's RunFinished was committed,
//   * serve: show exactly one live vLLM service whenever the run is ready;
//   * every service kind: launch one vLLM in all (one instance in the
//     simulator's truth) and leave nothing running on the target;
//   * torch-profile: analyse() started once per rank (the simulator's
//     .sim_analyse_invocations); memory-profile: one `msprof --export`
//     (.sim_export_invocations; msprof's own export at the service's exit
//     is off for it), and none for the sweep and the two-node kind, whose
//     captures msprof exported itself.
// Serve runs are stopped (`npuprof stop RUN`) once ready, so the matrix also
// crashes the server during stopping. Each K is one fresh installation, so
// every K is independent of the others.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/crash/clean_run_cache.h"
#include "tests/support/build_paths.h"
#include "tests/support/npuprof_harness.h"
#include "tests/support/sshd_fixture.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Fields that legitimately differ between a clean run and a crashed and
// recovered one: times, the recovery count and sequence numbers (recovery
// adds RunRecovered/TaskRedispatched events), attempts, worker ids, pids,
// ports, HTTP round counts, readiness latency and what saw it, whether the launch was
// adopted by a re-dispatched attempt. Evidence ("evidence", "blobs") keeps
// its names but each hash becomes "<sha256>" (the blobs hold logs and
// npu-smi text with pids, ports and times).
const std::set<std::string>& DroppedKeys() {
  static const std::set<std::string> keys = {
      "created_at", "updated_at", "finished_at", "deadline", "time", "time_ms", "deadline_ms", "ready_at",
      "recoveries", "last_seq", "seq", "attempt", "attempts", "worker", "pid", "pgid", "pids", "port",
      "ready_after_ms", "rounds", "adopted", "alive_at_launch",
      // whether the start-up line or a plain probe round saw readiness (a
      // probe can come between the port answering and the line's write)
      "seen_by",
      // torch-profile: vLLM response ids/creation times and request latencies,
      // step times, analyse logs (times, pids), trace sizes (pids inside), and
      // whether analyse was re-attached after a restart.
      "created", "id", "latency_ms", "completed_at", "started_at", "log_tail", "size", "reattached", "launch",
      // the kernel summary's bytes read: kernel_details.csv holds start times
      // whose printed length varies (the figures themselves are compared)
      "bytes_read",
      // the wave's wall time (timing)
      "wall_ms", "benchmark_wall_ms",
      // the target's means for analyse() (a listing's `means`, analyse_limits):
      // free memory and disk move between two runs on one host, and a rank
      // dir's size with them (its files' timestamps); the limit chosen is compared
      "mem_available_bytes", "disk_free_bytes", "dir_bytes", "largest_rank_bytes", "total_rank_bytes",
      // a rank's kernel window on its host's clock (when the wave ran; the
      // kernel figures themselves are compared)
      "first_start_us", "last_end_us",
      // memory-profile evidence locators: which log line / CSV row / sample
      // time a figure was read from depends on timing (sampling, rank log
      // interleaving); the figures themselves are compared.
      "line", "row", "timestamp",
      // memory-profile: seconds the export task polled (0 when a re-dispatched
      // attempt finds the export already finished).
      "waited_s",
      // both flush waits: how long they polled and how often (a re-dispatched
      // wait after a restart starts polling again until the same deadline).
      // ("size" above also covers the byte totals of the rank dirs the
      // torch-profile flush wait saw: pids and paths inside.)
      "waited_ms", "polls",
      // memory-profile: the inference request's times on both clocks and the
      // series rows and window the activation peak was cut at (the peak and
      // level figures themselves are compared).
      "server_window_ms", "server_answered_ms", "target_clock", "window", "window_rows", "base_rows", "ready_us",
      "t_us",
      // multi-node: a clock measure's figures (each measure sees other round
      // trips; the machines measured are compared) and when it was taken.
      "offset_ms", "uncertainty_ms", "rtt_ms", "samples", "measured_at_ms",
      // multi-node: the RPC port the head's launch picked (like "port")
      "dp_rpc_port", "tasks", "link_total"};  // show's per-attempt link figures (a crash adds attempts)
  return keys;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

// The installation dir becomes "<dir>"; profile dir names (pids, times:
// vm_<pid>_<time>_ascend_pt, PROF_<n>_<time>_<id>) become "<profdir>"; the
// 14-digit export stamps in msprof CSV names (npu_mem_20261129160359.csv)
// become "<stamp>".
std::string NormaliseString(std::string s, const std::string& dir) {
  ReplaceAll(s, dir, "<dir>");
  // (a host's rank dirs are named after it: vm_..., or head_... on a simulated node)
  static const std::regex prof_dirs("[A-Za-z0-9-]+_[0-9]+_[0-9]+_ascend_pt|PROF_[0-9]+_[0-9]+_[A-Za-z0-9]+");
  static const std::regex stamps("_[0-9]{14}(_[0-9]+)?");  // with the collector's _N for equal names
  // vLLM log lines quoted as evidence: "(Worker_TP0 pid=8805) INFO 11-29 16:09:31 [...]".
  static const std::regex pids("pid=[0-9]+");
  static const std::regex log_times("[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}");
  s = std::regex_replace(std::regex_replace(s, prof_dirs, "<profdir>"), stamps, "_<stamp>");
  return std::regex_replace(std::regex_replace(s, pids, "pid=<pid>"), log_times, "<time>");
}

// Drops DroppedKeys() at any depth; replaces the installation dir (runtime
// dirs, model path, key and known_hosts paths live under it) by "<dir>" and
// the value after "--port" in any array (the service's argv) by "<port>".
// What the order of two nodes' answers decides in a multi-node run:
//   * a stop's own timing: every node is stopped at once, and whether a
//     node has already exited on its own (the other node's engine or head
//     gone) or still takes the signal when its stop comes is a race, so what
//     a stop saw (already gone or signalled, its log's last lines) may
//     differ between two runs; that every node ended stopped is compared;
//   * an analyse marker's task number (.npuprof_analyse.<run>.t<N>): the
//     nodes' analyses are numbered as each node's listing answers.
const std::set<std::string>& TwoNodeTimingKeys() {
  static const std::set<std::string> keys = {"already_gone", "signals", "stderr_tail", "marker"};
  return keys;
}

// What a one-node torch-profile's stop saw: a clean flush lists the ranks
// in the same decision that schedules the stop (they are analysed while the
// service stops), so a crash after that decision can come once the stop was
// delivered; the re-delivered stop then finds the service already gone
// (no signal sent, another log tail). That the service ended stopped is
// compared.
const std::set<std::string>& StopTimingKeys() {
  static const std::set<std::string> keys = {"already_gone", "signals", "stderr_tail"};
  return keys;
}

// The timing keys a kind's comparison drops beside DroppedKeys().
std::set<std::string> TimingKeys(const std::string& kind) {
  if (kind.size() > 6 && kind.compare(kind.size() - 6, 6, "-2node") == 0) return TwoNodeTimingKeys();
  if (kind == "torch-profile") return StopTimingKeys();
  return {};
}

json Normalise(const json& j, const std::string& dir, const std::set<std::string>& also_drop = {}) {
  if (j.is_object()) {
    // Keys that become equal once normalised (e.g. CSVs named by export
    // time) keep their distinct values, as a sorted array.
    std::map<std::string, std::vector<json>> merged;
    json out = json::object();
    for (const auto& [k, v] : j.items()) {
      if (DroppedKeys().count(k) || also_drop.count(k)) continue;
      if ((k == "evidence" || k == "blobs" || k == "files") && v.is_object()) {
        json names = json::object();
        for (const auto& [name, hash] : v.items()) names[NormaliseString(name, dir)] = "<sha256>";
        out[k] = names;
        continue;
      }
      if (k == "blob" && v.is_string()) {
        out[k] = "<sha256>";
        continue;
      }
      if (k == "analyse_limits" && v.is_array()) {
        // The reason (and a disk warning) quote the free memory and sizes.
        json limits = v;
        for (json& l : limits)
          if (l.is_object()) {
            l.erase("reason");
            l.erase("warning");
          }
        out[k] = Normalise(limits, dir, also_drop);
        continue;
      }
      merged[NormaliseString(k, dir)].push_back(Normalise(v, dir, also_drop));
    }
    for (auto& [k, vs] : merged) {
      if (vs.size() == 1) {
        out[k] = vs[0];
      } else {
        // Distinct values only: how many same-named CSVs an export leaves
        // depends on whether msprof's exports fell in the same second.
        std::map<std::string, json> distinct;
        for (auto& v : vs) distinct.emplace(v.dump(), v);
        json arr = json::array();
        for (auto& [d, v] : distinct) arr.push_back(v);
        out[k] = arr.size() == 1 ? arr[0] : arr;
      }
    }
    return out;
  }
  if (j.is_array()) {
    json out = json::array();
    for (size_t i = 0; i < j.size(); ++i) {
      // The ports in an argv (`vllm serve ... --port N`, a multi-node
      // `--data-parallel-rpc-port N`) are picked free ports.
      if (i > 0 && j[i - 1].is_string() && (j[i - 1] == "--port" || j[i - 1] == "--data-parallel-rpc-port"))
        out.push_back("<port>");
      else out.push_back(Normalise(j[i], dir, also_drop));
    }
    return out;
  }
  if (j.is_string()) return NormaliseString(j.get<std::string>(), dir);
  return j;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ProcessAlive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  const std::string s = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto p = s.rfind(')');
  return p != std::string::npos && p + 2 < s.size() && s[p + 2] != 'Z';
}

bool ServerGone(const NpuprofHarness& h) { return h.server_pid() <= 0 || !ProcessAlive(h.server_pid()); }

// A client run in the background, so that a server crashing while the client
// waits for its answer does not cost the client's whole answer timeout.
struct BgClient {
  pid_t pid = -1;
  std::string out_path, err_path;
};

BgClient Spawn(NpuprofHarness& h, std::vector<std::string> args) {
  static int counter = 0;
  BgClient c;
  const int n = counter++;
  c.out_path = fmt::format("{}/client-{}.out", h.Dir(), n);
  c.err_path = fmt::format("{}/client-{}.err", h.Dir(), n);
  auto dd = std::find(args.begin(), args.end(), "--");
  args.insert(dd, {"--data-dir", h.DataDir()});
  args.insert(args.begin(), NpuprofBinary());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int e = open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (o < 0 || e < 0 || in < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    dup2(in, 0);
    execv(argv[0], argv.data());
    _exit(127);
  }
  c.pid = pid;
  return c;
}

// Waits for a background client. Kills (and reaps) it when the server is gone
// or after timeout_s; *aborted says so.
CliResult Await(const NpuprofHarness& h, BgClient& c, int timeout_s, bool* aborted = nullptr) {
  CliResult r;
  if (aborted) *aborted = false;
  if (c.pid <= 0) return r;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (true) {
    const pid_t w = waitpid(c.pid, &status, WNOHANG);
    if (w == c.pid) {
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (ServerGone(h) || Clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      if (aborted) *aborted = true;
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c.pid = -1;
  r.out = Slurp(c.out_path);
  r.err = Slurp(c.err_path);
  return r;
}

bool IsTwoNode(const std::string& kind) { return kind.size() > 6 && kind.compare(kind.size() - 6, 6, "-2node") == 0; }

struct Scenario {
  std::string kind;
  int shard = 0;
  int shards = 1;
};

void PrintTo(const Scenario& sc, std::ostream* os) { *os << sc.kind << " shard " << sc.shard + 1 << "/" << sc.shards; }

std::string RunIdOf(const Scenario& sc) { return "crash-" + sc.kind; }

struct Outcome {
  bool crashed = false;
  uint64_t crash_pos = 0;  // the store's last global position when the server killed itself
  std::string status, state;
  json summary, manifest, events;
  int verify_exit = -1;
  std::string verify_text;
  size_t max_live_when_ready = 0;
  bool saw_ready = false;
  size_t truth_instances = 0;
  std::map<std::string, size_t> node_truth_instances;  // two-node kinds: node -> vLLM instances launched
  std::map<std::string, size_t> analyse_invocations;  // rank dir -> analyse() starts
  std::map<std::string, size_t> export_invocations;   // msprof output dir -> exports
  std::vector<pid_t> left_on_target;
  std::vector<std::string> problems;
  std::string phases;  // seconds per phase of Drive, for the log ("run1 6.1 restart 0.6 ...")
};


// make_model.py's dense 2-layer model, made once per process in a temp dir
// of its own (removed at exit); "" when make_model.py failed.
const std::string& PristineModel() {
  struct Model {
    std::string dir, path;
    Model() {
      char tmpl[] = "/tmp/npuprof-crash-model-XXXXXX";
      if (!mkdtemp(tmpl)) return;
      dir = tmpl;
      const CliResult r = RunCommand(
          {"/usr/bin/python3", SimDir() + "/make_model.py", "--out", dir + "/m", "--kind", "dense", "--layers", "2"}, 120);
      if (r.exit_code == 0) path = dir + "/m";
    }
    ~Model() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  };
  static const Model model;
  return model.path;
}

// A background client that waits on the server for a run to end (`watch
// RUN -q`), or with until for it to reach that state: one process that polls
// the server over its socket, instead of a `show` process per poll.
BgClient Watch(NpuprofHarness& h, const std::string& run, const std::string& until = "") {
  if (until.empty()) return Spawn(h, {"watch", run, "-q"});
  return Spawn(h, {"watch", run, "--until", until, "-q"});
}

// Whether a background client has exited; *code is its exit code then.
bool Exited(BgClient& c, int* code) {
  int status = 0;
  if (c.pid <= 0 || waitpid(c.pid, &status, WNOHANG) != c.pid) return false;
  c.pid = -1;
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

// One installation of a scenario: harness, model (service kinds), the submit argv.
class Installation {
 public:
  Status Start(const Scenario& sc, uint64_t crash_after_pos) {
    kind_ = sc.kind;
    serve_ = sc.kind == "serve";
    if (crash_after_pos > 0) h_.SetServerEnv({{"NPUPROF_FAULT_CRASH_AFTER_GLOBAL_POS", std::to_string(crash_after_pos)}});
    // Small simulator delays keep the matrix inside the CI budget.
    std::vector<std::string> sim_args = {"--startup-delay", "0.2", "--token-delay", "0.001", "--export-delay", "0.2"};
    // memory-profile runs `msprof --export` itself (msprof's own export at
    // the service's exit is off); the sweep and the two-node kind use msprof's.
    if (kind_ == "memory-profile") sim_args.insert(sim_args.end(), {"--set", "msprof_auto_export=false"});
    Status st = h_.Start(sim_args);
    if (!st.ok()) return st;
    if (IsTwoNode(kind_)) {
      // Two simulated hosts, each with its own sshd on its own loopback
      // address; every installation adds them in the same order, so their
      // addresses (in the argv and the manifest) are the same in each.
      for (const char* node : {"head", "worker"}) {
        std::vector<std::string> node_args = {"--devices", "2"};
        node_args.insert(node_args.end(), sim_args.begin(), sim_args.end());
        if (Status n = h_.AddNode(node, node_args); !n.ok()) return n;
      }
    }
    if (kind_ != "probe") {
      // The model every installation of this process uses, made once and
      // copied (`cp -a` keeps its sparse safetensors sparse) to the path
      // MakeModel would give it.
      const std::string& pristine = PristineModel();
      if (pristine.empty()) return Status::Internal("make_model.py failed");
      model_ = h_.Dir() + "/models/m0";
      std::error_code ec;
      std::filesystem::create_directories(h_.Dir() + "/models", ec);
      if (RunLocal({"/bin/cp", "-a", pristine, model_}) != 0) return Status::Internal("cannot copy the model");
    }
    return Status::Ok();
  }

  // No kind names its service's port: each service gets the default, a port
  // picked free on its own host by the launch. A port picked here would be
  // free on 127.0.0.1 only, while a two-node head binds 127.0.0.2, where
  // a parallel shard's head may hold it by the time the launch binds.
  std::vector<std::string> SubmitArgs(const std::string& run) const {
    if (kind_ == "probe") return {"submit", "probe", "--machine", "sim1", "--run-id", run};
    if (kind_ == "torch-profile-2node")
      return {"submit", "torch-profile", "--node", "head", "--node", "worker", "--tag", "crash", "--model", model_,
              "--served-model-name", "qwen", "--tp", "1", "--dp", "2", "--mode", "enforce_eager", "--request-kind",
              "text", "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
              "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
              "--profile-control-timeout", "30", "--request-timeout", "30", "--run-id", run};
    if (kind_ == "memory-profile-2node")
      return {"submit", "memory-profile", "--node", "head", "--node", "worker", "--model", model_, "--tp", "1", "--dp",
              "2", "--flush-seconds", "0", "--health-timeout", "60", "--run-id", run};
    if (kind_ == "torch-profile")
      return {"submit", "torch-profile", "--machine", "sim1", "--tag", "crash", "--model", model_, "--served-model-name", "qwen",
              "--tp", "2", "--mode", "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "4",
              "--prompt-tokens", "32", "--benchmark-total-requests", "4", "--benchmark-concurrency", "2",
              "--flush-seconds", "0", "--health-timeout", "60", "--profile-control-timeout", "30",
              "--request-timeout", "30", "--run-id", run};
    if (kind_ == "memory-profile")
      return {"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--flush-seconds",
              "0", "--health-timeout", "60", "--run-id", run};
    if (kind_ == "sweep")  // two memory-profile points, one after the other on NPU 0
      return {"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "1",
              "--flush-seconds", "0", "--health-timeout", "60", "--grid", "gpu-memory-utilization=0.8,0.9",
              "--run-id", run};
    return {"submit", "serve", "--machine", "sim1", "--model", model_, "--served-model-name", "m", "--tp", "2",
            "--health-timeout", "60", "--stop-grace", "5", "--run-id", run};
  }

  // Submits the run and follows it to its end; when crash_expected, the first
  // server must kill itself on the way and is restarted without the fault.
  Outcome Drive(const std::string& run, bool crash_expected) {
    Outcome o;
    auto t = Clock::now();
    const auto lap = [&](const char* name) {
      const auto now = Clock::now();
      o.phases += fmt::format("{}{} {:.2f}", o.phases.empty() ? "" : " ", name,
                              std::chrono::duration<double>(now - t).count());
      t = now;
    };
    Phase1(run, crash_expected, o);
    lap("run1");
    if (crash_expected) {
      if (!ServerGone(h_)) {
        // The run ended before reaching K: collect what it was (its status,
        // summary and events reach the failure's message) so that the
        // difference from the clean run shows.
        Collect(run, o);
        o.problems.push_back(fmt::format(
            "the server did not crash (the fault position was never reached): the run ended {} / {} after {} "
            "event(s){}",
            o.state, o.status, o.events.size(),
            o.summary.is_object() && o.summary.contains("error") ? ", error: " + o.summary["error"].dump() : ""));
        return o;
      }
      h_.WaitForServerExit(10);
      o.crashed = true;
      std::smatch m;
      const std::string log = Slurp(h_.Dir() + "/server.log");
      static const std::regex re("crashing after global position ([0-9]+)");
      if (std::regex_search(log, m, re)) o.crash_pos = std::stoull(m[1].str());
      else o.problems.push_back("no fault-injection line in server.log");
      h_.SetServerEnv({});
      Status st = h_.RestartServer();
      if (!st.ok()) {
        o.problems.push_back("restart failed: " + st.ToString());
        return o;
      }
    }
    lap("restart");
    Phase2(run, o);
    lap("run2");
    Collect(run, o);
    lap("collect");
    return o;
  }

  NpuprofHarness& h() { return h_; }

 private:
  void SawReady(Outcome& o) {
    o.saw_ready = true;
    o.max_live_when_ready = std::max(o.max_live_when_ready, h_.LiveServicePids().size());
  }

  // Until the server crashes (crash expected) or the run ends (clean run).
  // A `watch` client waits for the run's end (a serve run: for ready first,
  // then the stop is sent); should a watch end any other way than with the
  // run (exit 2: e.g. a call cut by the crash), `show` is polled instead.
  void Phase1(const std::string& run, bool crash_expected, Outcome& o) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    BgClient submit = Spawn(h_, SubmitArgs(run));
    BgClient stop, watch;
    bool submit_done = false, stop_sent = false, poll_show = false;
    while (Clock::now() < deadline) {
      if (ServerGone(h_)) break;
      if (!submit_done) {
        int status = 0;
        if (waitpid(submit.pid, &status, WNOHANG) != submit.pid) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        submit_done = true;
        submit.pid = -1;
        if (!crash_expected && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          o.problems.push_back("submit failed: " + Slurp(submit.err_path));
          return;
        }
      }
      if (!poll_show) {
        if (watch.pid <= 0) watch = Watch(h_, run, serve_ && !stop_sent ? "ready" : "");
        int code = 0;
        if (!Exited(watch, &code)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        if (code == 0 && serve_ && !stop_sent) {  // ready: stop it, then watch for the end
          SawReady(o);
          stop = Spawn(h_, {"stop", run});
          stop_sent = true;
          continue;
        }
        if (code == 0 || code == 1) {  // the run ended (ok, or not ok)
          if (crash_expected) AwaitServerGone(std::chrono::milliseconds(300));  // a last commit may crash it
          break;
        }
        poll_show = true;
      }
      BgClient show = Spawn(h_, {"show", run});
      bool aborted = false;
      CliResult r = Await(h_, show, 15, &aborted);
      const json j = r.json();
      if (!aborted && r.exit_code == 0 && j.is_object()) {
        if (j.value("status", "running") != "running") {
          if (crash_expected) AwaitServerGone(std::chrono::milliseconds(300));  // a last commit may crash it
          break;
        }
        if (serve_ && j.value("state", "") == "ready" && !stop_sent) {
          SawReady(o);
          stop = Spawn(h_, {"stop", run});
          stop_sent = true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (Clock::now() >= deadline) o.problems.push_back("phase 1 did not end within 120 s");
    if (submit.pid > 0) Await(h_, submit, 0);
    if (watch.pid > 0) Await(h_, watch, 0);
    if (stop.pid > 0) Await(h_, stop, 15);
  }

  // Until the server is gone or timeout (polled from 2 ms on).
  void AwaitServerGone(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    auto wait = std::chrono::milliseconds(2);
    while (!ServerGone(h_) && Clock::now() < until) {
      std::this_thread::sleep_for(wait);
      wait = std::min(wait * 2, std::chrono::milliseconds(50));
    }
  }

  // Until the run is terminal; a ready serve run is stopped.
  // A run of any other kind is waited for by one `watch` first.
  void Phase2(const std::string& run, Outcome& o) {
    const auto deadline = Clock::now() + std::chrono::seconds(150);
    if (!serve_) h_.Cli({"watch", run, "-q"}, 150);
    while (true) {
      CliResult r = h_.Cli({"show", run}, 30);
      const json j = r.json();
      if (r.exit_code == 0 && j.is_object()) {
        if (j.value("status", "running") != "running") return;
        if (serve_ && j.value("state", "") == "ready") {
          SawReady(o);
          CliResult s = h_.Cli({"stop", run, "--wait"}, 120);
          if (s.exit_code != 0 && s.exit_code != 1) o.problems.push_back("stop --wait: " + s.err);
          continue;
        }
      }
      if (Clock::now() > deadline) {
        o.problems.push_back("the run did not end within 150 s after the restart: " + r.out + r.err);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  }

  // The four clients run at once: they only read the ended run.
  void Collect(const std::string& run, Outcome& o) {
    BgClient show = Spawn(h_, {"show", run}), manifest = Spawn(h_, {"manifest", run}),
             events = Spawn(h_, {"events", run, "--json"}), verify = Spawn(h_, {"verify", run});
    o.summary = Await(h_, show, 180).json();
    o.manifest = Await(h_, manifest, 180).json();
    const json ev = Await(h_, events, 180).json();
    o.events = ev.is_object() ? ev.value("events", json::array()) : json::array();
    if (o.summary.is_object()) {
      o.status = o.summary.value("status", "");
      o.state = o.summary.value("state", "");
    }
    CliResult v = Await(h_, verify, 180);
    o.verify_exit = v.exit_code;
    o.verify_text = v.out + v.err;
    o.left_on_target = h_.TargetProcessesAfter(5);
    o.truth_instances = h_.SimTruthFiles().size();
    for (const std::string& node : h_.NodeNames()) o.node_truth_instances[node] = h_.SimTruthFiles(node).size();
    o.analyse_invocations = h_.InvocationLogs(".sim_analyse_invocations");
    o.export_invocations = h_.InvocationLogs(".sim_export_invocations");
  }

  NpuprofHarness h_;
  std::string kind_;
  bool serve_ = false;
  std::string model_;
};

// The remote effects that must happen once per run, whatever crashed when.
void ExpectEffectsOnce(const std::string& kind, const Outcome& o, const std::string& trace) {
  if (kind == "probe") return;
  if (IsTwoNode(kind)) {
    EXPECT_EQ(o.truth_instances, 0u) << "nothing launched on sim1\n" << trace;
    EXPECT_EQ(o.node_truth_instances.size(), 2u) << trace;
    for (const auto& [node, n] : o.node_truth_instances)
      EXPECT_EQ(n, 1u) << "vLLM instances launched on node " << node << "\n" << trace;
    if (kind == "torch-profile-2node") {
      EXPECT_EQ(o.analyse_invocations.size(), 2u) << "rank dirs analysed (one per node)\n" << trace;
      for (const auto& [dir, n] : o.analyse_invocations)
        EXPECT_EQ(n, 1u) << "analyse() starts in " << dir << "\n" << trace;
    } else {
      EXPECT_TRUE(o.export_invocations.empty()) << "msprof exported at each service's exit: not again\n" << trace;
    }
    return;
  }
  const size_t services = kind == "sweep" ? 2 : 1;  // a sweep: one per point
  EXPECT_EQ(o.truth_instances, services) << "vLLM instances launched in all\n" << trace;
  if (kind == "torch-profile") {
    EXPECT_EQ(o.analyse_invocations.size(), 2u) << "rank dirs analysed (tp=2)\n" << trace;
    for (const auto& [dir, n] : o.analyse_invocations) EXPECT_EQ(n, 1u) << "analyse() starts in " << dir << "\n" << trace;
  }
  if (kind == "memory-profile") {
    EXPECT_EQ(o.export_invocations.size(), services) << "msprof output dirs exported\n" << trace;
    for (const auto& [dir, n] : o.export_invocations) EXPECT_EQ(n, 1u) << "msprof exports of " << dir << "\n" << trace;
  }
  if (kind == "sweep") {
    EXPECT_TRUE(o.export_invocations.empty()) << "msprof exported at each service's exit: not again\n" << trace;
  }
}

// Crash points: the last event of each decision (consecutive events with the
// same cause and time belong to one decision, committed in one batch).
std::vector<size_t> DecisionEnds(const json& events) {
  std::vector<size_t> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const bool last = i + 1 == events.size() || events[i + 1].value("cause", "") != events[i].value("cause", "") ||
                      events[i + 1].value("time_ms", int64_t{0}) != events[i].value("time_ms", int64_t{0});
    if (last) out.push_back(i);
  }
  return out;
}

std::vector<uint64_t> GlobalPositions(const json& events) {
  std::vector<uint64_t> out;
  for (const auto& e : events) out.push_back(e.value("global_pos", uint64_t{0}));
  return out;
}

bool HasType(const json& events, const std::string& type) {
  return std::any_of(events.begin(), events.end(), [&](const json& e) { return e.value("type", "") == type; });
}

uint64_t PosOfType(const json& events, const std::string& type) {
  for (const auto& e : events)
    if (e.value("type", "") == type) return e.value("global_pos", uint64_t{0});
  return 0;
}

std::string EventTrace(const json& events) {
  std::string s;
  for (const auto& e : events)
    s += fmt::format("  {:>3} g{:<3} {:<20} {}\n", e.value("seq", 0), e.value("global_pos", 0),
                     e.value("type", ""), e.value("cause", ""));
  return s;
}

class CrashMatrix : public ::testing::TestWithParam<Scenario> {};

// The clean run of a scenario's kind: its terminal status, projections and
// event positions, each checked; *out is set only when every check passed.
void RunClean(const Scenario& sc, std::optional<CleanRun>* out) {
  const std::string run = RunIdOf(sc);
  Installation clean_inst;
  Status st = clean_inst.Start(sc, 0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Outcome clean = clean_inst.Drive(run, false);
  ASSERT_TRUE(clean.problems.empty()) << fmt::format("{}", fmt::join(clean.problems, "\n"));
  ASSERT_EQ(clean.verify_exit, 0) << clean.verify_text;
  ASSERT_FALSE(HasType(clean.events, "RunRecovered"));
  ASSERT_TRUE(clean.left_on_target.empty());
  ASSERT_EQ(clean.status, "ok") << clean.summary.dump(2) << EventTrace(clean.events);
  ASSERT_EQ(clean.state, "completed");
  if (sc.kind == "serve") {
    ASSERT_TRUE(clean.saw_ready);
    ASSERT_EQ(clean.max_live_when_ready, 1u);
  }
  ExpectEffectsOnce(sc.kind, clean, EventTrace(clean.events));
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the clean run must show every effect once";
  const std::string clean_dir = clean_inst.h().Dir();
  const std::set<std::string> also_drop = TimingKeys(sc.kind);
  *out = CleanRun{{"status", clean.status},
                  {"state", clean.state},
                  {"summary", Normalise(clean.summary, clean_dir, also_drop)},
                  {"manifest", Normalise(clean.manifest, clean_dir, also_drop)},
                  {"events", clean.events}};
}

CleanRunCache& TheCleanRunCache() {
  static CleanRunCache cache(std::string(build_paths::BinaryDir()) + "/tests/crash/clean-runs",
                             {NpuprofBinary(), "/proc/self/exe", SimDir()});
  return cache;
}

TEST_P(CrashMatrix, EveryCommittedEventIsASafeCrashPoint) {
  const Scenario sc = GetParam();
  const std::string run = RunIdOf(sc);
  const auto t0 = Clock::now();

  // The clean run (shared by the kind's shards: clean_run_cache.h).
  bool from_cache = false;
  const std::optional<CleanRun> clean_run = TheCleanRunCache().Get(
      sc.kind,
      [&]() {
        std::optional<CleanRun> out;
        RunClean(sc, &out);
        return out;
      },
      &from_cache);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(clean_run.has_value());
  struct {
    std::string status, state;
    json events;
  } clean{clean_run->value("status", ""), clean_run->value("state", ""), clean_run->value("events", json::array())};
  const json& clean_summary = (*clean_run)["summary"];
  const json& clean_manifest = (*clean_run)["manifest"];
  const std::set<std::string> also_drop = TimingKeys(sc.kind);
  if (std::getenv("CRASH_MATRIX_VERBOSE")) {
    std::cerr << "clean run events:\n" << EventTrace(clean.events) << "clean summary (normalised):\n"
              << clean_summary.dump(2) << std::endl;
  }
  const std::vector<uint64_t> positions = GlobalPositions(clean.events);
  ASSERT_FALSE(positions.empty());
  // Everything before the run in a fresh store (the machines stream: `machine
  // add sim1`); each crash installation is built the same way.
  const uint64_t base = positions.front() - 1;
  std::vector<uint64_t> offsets;
  for (uint64_t p : positions) offsets.push_back(p - base);
  const auto clean_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << fmt::format("[crash-matrix] {} clean run{}: {} events, base position {}, {:.1f} s\n", sc.kind,
                           from_cache ? " (run by another shard of this build)" : "", offsets.size(), base, clean_s);

  const std::vector<size_t> points = DecisionEnds(clean.events);
  std::cerr << fmt::format("[crash-matrix] {}: {} decisions to crash after\n", sc.kind, points.size());
  int covered = 0;
  for (size_t pi = 0; pi < points.size(); ++pi) {
    if (static_cast<int>(pi % sc.shards) != sc.shard) continue;
    const size_t i = points[pi];
    const uint64_t k = base + offsets[i];
    const auto tk = Clock::now();
    SCOPED_TRACE(fmt::format("{}: crash after global position {} (event {} of the clean run: {})", sc.kind, k,
                             i + 1, clean.events[i].value("type", "")));
    auto inst = std::make_unique<Installation>();
    const Status st = inst->Start(sc, k);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const double start_s = std::chrono::duration<double>(Clock::now() - tk).count();
    const Outcome o = inst->Drive(run, true);
    const std::string dir = inst->h().Dir();
    const std::string trace = EventTrace(o.events);
    EXPECT_TRUE(o.problems.empty()) << fmt::format("{}", fmt::join(o.problems, "\n")) << "\n" << trace;
    EXPECT_TRUE(o.crashed);
    // K was meant relative to the same fresh-store prefix.
    EXPECT_EQ(PosOfType(o.events, "RunSubmitted"), base + 1) << trace;
    EXPECT_EQ(o.status, clean.status) << o.summary.dump(2) << "\n" << trace;
    EXPECT_EQ(o.state, clean.state) << trace;
    const json s = Normalise(o.summary, dir, also_drop), m = Normalise(o.manifest, dir, also_drop);
    EXPECT_EQ(s, clean_summary) << "summary differs from the clean run's: " << json::diff(clean_summary, s).dump(2)
                                << "\n" << trace;
    EXPECT_EQ(m, clean_manifest) << "manifest differs from the clean run's: "
                                 << json::diff(clean_manifest, m).dump(2);
    EXPECT_EQ(o.verify_exit, 0) << o.verify_text << "\n" << trace;
    const uint64_t finished_pos = PosOfType(o.events, "RunFinished");
    EXPECT_GT(finished_pos, 0u) << trace;
    const bool crashed_before_end = finished_pos > o.crash_pos;
    EXPECT_EQ(HasType(o.events, "RunRecovered"), crashed_before_end)
        << "crash at " << o.crash_pos << ", RunFinished at " << finished_pos << "\n" << trace;
    EXPECT_TRUE(o.left_on_target.empty()) << o.left_on_target.size() << " process(es) left on the target";
    if (sc.kind == "serve") {
      EXPECT_TRUE(o.saw_ready) << trace;
      EXPECT_EQ(o.max_live_when_ready, 1u) << "live vLLM services while ready\n" << trace;
    }
    ExpectEffectsOnce(sc.kind, o, trace);
    ++covered;
    const auto td = Clock::now();
    inst.reset();  // stops the server, the target's processes and the sshds; removes the dir
    std::cerr << fmt::format(
        "[crash-matrix] {} K={} ({}): crashed at {}, recovered={}, {} -> {} in {:.1f} s (start {:.2f} {} stop {:.2f})\n",
        sc.kind, k, clean.events[i].value("type", ""), o.crash_pos, HasType(o.events, "RunRecovered"), o.state,
        o.status, std::chrono::duration<double>(Clock::now() - tk).count(), start_s, o.phases,
        std::chrono::duration<double>(Clock::now() - td).count());
    if (HasFailure() && std::getenv("CRASH_MATRIX_STOP_ON_FAILURE")) break;
  }
  RecordProperty("crash_points", covered);
  std::cerr << fmt::format("[crash-matrix] {} shard {}/{}: {} crash point(s) in {:.1f} s\n", sc.kind, sc.shard + 1,
                           sc.shards, covered, std::chrono::duration<double>(Clock::now() - t0).count());
}

// Serve runs take longer per crash point: their matrix is split into shards
// (crash points i with i % shards == shard), each a CTest test of its own.
INSTANTIATE_TEST_SUITE_P(Kinds, CrashMatrix,
                         ::testing::Values(Scenario{"probe", 0, 1}, Scenario{"serve", 0, 2}, Scenario{"serve", 1, 2},
                                           Scenario{"torch-profile", 0, 4}, Scenario{"torch-profile", 1, 4},
                                           Scenario{"torch-profile", 2, 4}, Scenario{"torch-profile", 3, 4},
                                           Scenario{"memory-profile", 0, 4}, Scenario{"memory-profile", 1, 4},
                                           Scenario{"memory-profile", 2, 4}, Scenario{"memory-profile", 3, 4},
                                           Scenario{"sweep", 0, 1}, Scenario{"torch-profile-2node", 0, 4},
                                           Scenario{"torch-profile-2node", 1, 4}, Scenario{"torch-profile-2node", 2, 4},
                                           Scenario{"torch-profile-2node", 3, 4}, Scenario{"memory-profile-2node", 0, 4},
                                           Scenario{"memory-profile-2node", 1, 4}, Scenario{"memory-profile-2node", 2, 4},
                                           Scenario{"memory-profile-2node", 3, 4}),
                         [](const ::testing::TestParamInfo<Scenario>& i) {
                           std::string k = i.param.kind;
                           std::replace(k.begin(), k.end(), '-', '_');
                           return fmt::format("{}_{}of{}", k, i.param.shard + 1, i.param.shards);
                         });

}  // namespace
}  // namespace npuprof::testing
