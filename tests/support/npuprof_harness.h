// NpuprofHarness: one complete local installation for integration tests —
// a real loopback sshd, a simulated Ascend target (tests/sim), an
// `npuprof server` child process with local workers, and the machine "sim1"
// in its inventory. Everything lives in one temp dir, removed at the end
// (kept when NPUPROF_KEEP_TEST_DIR=1).
//
// Multi-node: AddNode adds a simulated host with an sshd of its own on a
// loopback address of its own (127.0.0.2, 127.0.0.3, ...), so a deployment
// can span "machines" that differ in address, NPUs, state, truth and clock
// (tests/sim/README.md "Multi-node data parallel").
//
// Far targets: SetLink (or NPUPROF_TEST_RTT_MS in the environment,
// tests/support/link_env.h) puts every simulated host behind a latency relay
// of its own (latency_relay.h) on the host's address: the inventory names
// the relay's port, known_hosts holds the host key for that port too, and
// Relay(machine) counts the bytes and round trips of what went through.
//
// Cleanup signals only processes this harness started or that carry its
// simulated target's marker (NPUPROF_SIM_ROOT=<its root> in their
// environment, set by the target's env script): never anything by name.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tests/support/latency_relay.h"
#include "tests/support/link_env.h"
#include "tests/support/sshd_fixture.h"

namespace npuprof::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
  // stdout parsed (null when not JSON). Returns a fresh value: keep it in a
  // variable before iterating (`for (auto& e : r.json()["x"])` dangles).
  nlohmann::json json() const;
};

// Runs argv (this process's environment) and captures its output; killed
// after timeout_s (timed_out set).
CliResult RunCommand(const std::vector<std::string>& argv, int timeout_s);

// Path of the npuprof binary: $NPUPROF_BIN, else the one in the build tree.
std::string NpuprofBinary();
// The simulator: $NPUPROF_SIM_DIR, else the one installed with the running
// binary (<bindir>/../share/npuprof/sim), else tests/sim in the source tree.
std::string SimDir();

class NpuprofHarness {
 public:
  NpuprofHarness() = default;
  ~NpuprofHarness();
  NpuprofHarness(const NpuprofHarness&) = delete;
  NpuprofHarness& operator=(const NpuprofHarness&) = delete;

  // sim_args go to tests/sim/setup_target.py after --root.
  Status Start(const std::vector<std::string>& sim_args = {}, int local_workers = 2);
  void Stop();

  // Before Start(): every simulated host (sim1, AddTarget's behind the same
  // sshd, each AddNode) is reached through a relay holding each chunk
  // link.one_way_us each way (and capped to link.bytes_per_s when not 0).
  // Without a call the environment decides (link_env.h); unset = no relay.
  void SetLink(TestLink link) { link_ = link; link_set_ = true; }
  // The relay in front of `machine`'s sshd ("" or "sim1", or a node's name;
  // AddTarget's machines share sim1's); nullptr when there is none.
  LatencyRelay* Relay(const std::string& machine = "");
  // The port npuprof reaches `machine` at: its relay's, else its sshd's.
  int SshPort(const std::string& machine = "");

  // Runs `npuprof ARGS` with --data-dir inserted (before a "--" if present).
  CliResult Cli(const std::vector<std::string>& args, int timeout_s = 180);
  // Runs npuprof with exactly these args (no --data-dir added).
  CliResult CliRaw(const std::vector<std::string>& args, int timeout_s = 180);

  pid_t server_pid() const { return server_pid_; }
  void KillServer(int sig = SIGKILL);
  Status RestartServer();
  // Extra environment (NAME, VALUE) for every later server start (Start,
  // RestartServer), e.g. NPUPROF_FAULT_CRASH_BEFORE_DISPATCH; {} = none.
  void SetServerEnv(std::vector<std::pair<std::string, std::string>> env) { server_env_ = std::move(env); }
  // Extra endpoints (`--listen E` each, e.g. tcp://127.0.0.1:PORT: CURVE on)
  // for every later server start; {} = the ipc socket only.
  void SetServerListen(std::vector<std::string> endpoints) { server_listen_ = std::move(endpoints); }
  // Starts `npuprof worker ARGS` (no --data-dir added; env: extra
  // variables), output in Dir()/<name>.log. Stopped by StopWorker or Stop.
  Result<pid_t> StartWorker(const std::vector<std::string>& args, const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& env = {});
  // SIGTERM, then SIGKILL after 10 s; reaps it.
  void StopWorker(pid_t pid);
  // The text of Dir()/<name>.log ("server" = the server's log).
  std::string Log(const std::string& name) const;
  // Waits for the server to exit on its own (a fault injection crashing it)
  // and reaps it. False when it is still running after timeout_s.
  bool WaitForServerExit(int timeout_s);
  std::vector<pid_t> WorkerPids();

  std::string MakeModel(const std::vector<std::string>& make_model_args);
  // The first target is "sim1" (root <dir>/target); AddTarget adds more.
  std::string SimRoot(const std::string& machine = "") const {
    return machine.empty() || machine == "sim1" ? dir_ + "/target" : dir_ + "/target-" + machine;
  }
  // Another simulated target behind the same sshd (its own root, env script
  // and runtime base), added to the inventory as machine `name`.
  Status AddTarget(const std::string& name, const std::vector<std::string>& sim_args = {});
  // A simulated host for multi-node runs: its own target (root SimRoot(name):
  // NPUs, state, truth, clock) behind its own sshd listening on its own
  // loopback address (127.0.0.2 for the first node added, then 127.0.0.3,
  // ...), added to the inventory as machine `name` with --host that address
  // (runtime base Dir()/runtime-<name>). sim_args go to setup_target.py after
  // --root; `--address <its address>` and `--hostname <name>` are added unless
  // sim_args give them, e.g. {"--devices", "4", "--clock-offset-s", "3.2"}.
  // After Start(). Stop() stops every node's sshd and the processes its
  // target's marker names.
  Status AddNode(const std::string& name, const std::vector<std::string>& sim_args = {});
  // The node's address ("" when no node has that name), its sshd (nullptr
  // likewise), and the node names in the order added.
  std::string NodeAddress(const std::string& name) const;
  SshdFixture* NodeSshd(const std::string& name);
  std::vector<std::string> NodeNames() const;
  // Changes a target in place between runs: setup_target.py --update ARGS
  // (--fault, --clear-faults, --set DOTTED.KEY=JSON).
  Status UpdateTarget(const std::vector<std::string>& args, const std::string& machine = "");
  std::string DataDir() const { return dir_ + "/data"; }
  std::string Dir() const { return dir_; }
  // The ground-truth files of a target (default "sim1"; a node or AddTarget name), oldest name first.
  std::vector<nlohmann::json> SimTruthFiles(const std::string& machine = "") const;
  // Main pids of the target's service instances that still run (zombies excluded).
  std::vector<pid_t> LiveServicePids(const std::string& machine = "") const;
  // The simulator's invocation logs under this installation: every file
  // named `name` (".sim_analyse_invocations", ".sim_export_invocations") ->
  // its number of lines, keyed by the directory holding it.
  std::map<std::string, size_t> InvocationLogs(const std::string& name) const;
  // TargetProcesses() once it is empty or timeout_s passed (processes that are
  // stopping get that long to exit): what is still left.
  std::vector<pid_t> TargetProcessesAfter(int timeout_s) const;
  // Every live process carrying the marker of one of this harness's targets.
  std::vector<pid_t> TargetProcesses() const;
  SshdFixture& sshd() { return sshd_; }

 private:
  Status StartServer();
  // socket_before: the ipc socket's identity before the spawn; log_start:
  // where this start's lines begin in server.log.
  Status WaitForServer(int timeout_s, std::pair<ino_t, int64_t> socket_before, size_t log_start);
  // With a link: a relay for `machine` in front of `sshd`, on its address.
  Status StartRelay(const std::string& machine, SshdFixture& sshd);

  SshdFixture sshd_;
  std::vector<std::pair<std::string, std::unique_ptr<SshdFixture>>> nodes_;  // AddNode, in order
  std::optional<TestLink> link_;  // no value: no relays
  bool link_set_ = false;         // SetLink was called (else the environment decides)
  std::map<std::string, std::unique_ptr<LatencyRelay>> relays_;  // by machine ("sim1", node names)
  std::string dir_;
  pid_t server_pid_ = -1;
  std::vector<pid_t> local_worker_pids_;  // the running server's children, for KillServer to wait on
  std::vector<std::pair<std::string, std::string>> server_env_;
  std::vector<std::string> server_listen_;
  std::vector<pid_t> extra_workers_;
  int local_workers_ = 2;
  int model_count_ = 0;
  bool started_ = false;
};

}  // namespace npuprof::testing
