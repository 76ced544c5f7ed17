#include "tests/support/npuprof_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include "tests/support/build_paths.h"
#include "workers/poll_backoff.h"

namespace fs = std::filesystem;

namespace npuprof::testing {

nlohmann::json CliResult::json() const {
  auto j = nlohmann::json::parse(out, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

std::string NpuprofBinary() {
  if (const char* b = std::getenv("NPUPROF_BIN"); b && *b) return b;
  return std::string(npuprof::build_paths::BinaryDir()) + "/cli/npuprof";
}

std::string SimDir() {
  if (const char* d = std::getenv("NPUPROF_SIM_DIR"); d && *d) return d;
  // An installed npuprof (the package, `cmake --install`, or a package
  // unpacked anywhere) has the simulator at a fixed place relative to itself.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = (exe.parent_path() / npuprof::build_paths::SimDirFromBindir()).lexically_normal();
    if (fs::is_regular_file(installed / "setup_target.py", ec)) return installed.string();
  }
  return std::string(npuprof::build_paths::SourceDir()) + "/tests/sim";
}

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

// Alive and not a zombie: a killed process whose parent (often init, when it
// was started detached over SSH) has not reaped it yet holds nothing any more.
bool Running(pid_t pid) {
  if (!Alive(pid)) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t rp = stat.rfind(')');
  return rp != std::string::npos && rp + 2 < stat.size() && stat[rp + 2] != 'Z' && stat[rp + 2] != 'X';
}

// Runs argv with stdout/stderr captured; kills it (SIGKILL) after timeout.
CliResult RunCaptured(const std::vector<std::string>& argv, int timeout_s) {
  CliResult r;
  int out_pipe[2], err_pipe[2];
  // Close-on-exec: a process started meanwhile by another thread (a server
  // restarted while a client runs) must not inherit these pipes, or the
  // reader would wait for that process to end.
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    if (!out_open) fds[0].fd = -1;
    if (!err_open) fds[1].fd = -1;
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 500)));
    if (n <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t k = read(fds[i].fd, buf, sizeof(buf));
      if (k <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(k));
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Forks argv with stdout and stderr appended to log, stdin /dev/null and env
// added to the environment; the child's pid (-1 when fork failed).
pid_t SpawnWithLog(std::vector<std::string> argv, const std::string& log,
                   const std::vector<std::pair<std::string, std::string>>& env) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Sends sig to pid (a child of this process), waits up to 10 s for it to
// exit (then SIGKILL) and reaps it.
void SignalAndReap(pid_t pid, int sig) {
  kill(pid, sig);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  workers::PollBackoff backoff(std::chrono::milliseconds(20), std::chrono::milliseconds(1));
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(backoff.Next());
  }
}

// Until none of pids runs any more (zombies count as gone) or timeout.
void WaitUntilGone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  workers::PollBackoff backoff(std::chrono::milliseconds(20), std::chrono::milliseconds(1));
  while (std::any_of(pids.begin(), pids.end(), Running) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(backoff.Next());
}

// The identity of a file (inode and change time; {0, 0} when absent): a
// server that binds its ipc socket makes a new one, also where a killed
// server left its old socket file behind.
std::pair<ino_t, int64_t> FileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_ino, static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

size_t CountFrom(const std::string& text, size_t from, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle, from); p != std::string::npos; p = text.find(needle, p + needle.size())) ++n;
  return n;
}

// A command started in the background with its output in files; killed and
// reaped when dropped before Wait.
class BackgroundCommand {
 public:
  BackgroundCommand(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path)
      : out_path_(out_path), err_path_(err_path) {
    pid_ = fork();
    if (pid_ != 0) return;
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (o < 0 || e < 0 || in < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    dup2(in, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  ~BackgroundCommand() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  // Its exit (out and err read from the files); killed after timeout_s.
  CliResult Wait(int timeout_s) {
    CliResult r;
    if (pid_ < 0) return r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    workers::PollBackoff backoff(std::chrono::milliseconds(20), std::chrono::milliseconds(1));
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        r.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(backoff.Next());
    }
    pid_ = -1;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(out_path_);
    r.err = ReadFile(err_path_);
    return r;
  }

 private:
  pid_t pid_ = -1;
  std::string out_path_, err_path_;
};

}  // namespace

CliResult RunCommand(const std::vector<std::string>& argv, int timeout_s) { return RunCaptured(argv, timeout_s); }

NpuprofHarness::~NpuprofHarness() {
  Stop();
  const char* keep = std::getenv("NPUPROF_KEEP_TEST_DIR");
  if (!dir_.empty() && !(keep && std::string(keep) == "1")) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

Status NpuprofHarness::Start(const std::vector<std::string>& sim_args, int local_workers) {
  char tmpl[] = "/tmp/npuprof-it-XXXXXX";
  if (!mkdtemp(tmpl)) return Status::Io("mkdtemp failed");
  dir_ = tmpl;
  local_workers_ = local_workers;
  started_ = true;
  if (!link_set_) {
    auto from_env = TestLinkFromEnv(std::getenv("NPUPROF_TEST_RTT_MS"), std::getenv("NPUPROF_TEST_LINK_BYTES_PER_S"));
    if (!from_env.ok()) return from_env.status();
    link_ = *from_env;
  }
  // The simulated target is made while the sshd and the server start: the
  // three depend on nothing of each other until `machine add`.
  std::vector<std::string> setup = {"/usr/bin/python3", SimDir() + "/setup_target.py", "--root", SimRoot()};
  setup.insert(setup.end(), sim_args.begin(), sim_args.end());
  BackgroundCommand setup_cmd(setup, dir_ + "/setup_target.out", dir_ + "/setup_target.err");
  if (Status s = sshd_.Start(); !s.ok()) return s;
  if (Status s = StartRelay("sim1", sshd_); !s.ok()) return s;
  if (Status s = StartServer(); !s.ok()) return s;
  CliResult sr = setup_cmd.Wait(60);
  if (sr.exit_code != 0) return Status::Internal("setup_target.py failed: " + sr.err);
  CliResult add = Cli({"machine", "add", "sim1", "--host", "127.0.0.1", "--port", std::to_string(SshPort()),
                       "--user", sshd_.user(), "--identity", sshd_.identity_file(), "--known-hosts",
                       sshd_.known_hosts_file(), "--env-script", SimRoot() + "/set_env.sh", "--runtime-base",
                       dir_ + "/runtime"});
  if (add.exit_code != 0) return Status::Internal("machine add failed: " + add.err);
  return Status::Ok();
}

Status NpuprofHarness::AddTarget(const std::string& name, const std::vector<std::string>& sim_args) {
  std::vector<std::string> setup = {"/usr/bin/python3", SimDir() + "/setup_target.py", "--root", SimRoot(name)};
  setup.insert(setup.end(), sim_args.begin(), sim_args.end());
  CliResult sr = RunCaptured(setup, 60);
  if (sr.exit_code != 0) return Status::Internal("setup_target.py failed: " + sr.err);
  CliResult add = Cli({"machine", "add", name, "--host", "127.0.0.1", "--port", std::to_string(SshPort()),
                       "--user", sshd_.user(), "--identity", sshd_.identity_file(), "--known-hosts",
                       sshd_.known_hosts_file(), "--env-script", SimRoot(name) + "/set_env.sh", "--runtime-base",
                       dir_ + "/runtime-" + name});
  if (add.exit_code != 0) return Status::Internal("machine add failed: " + add.err);
  return Status::Ok();
}

Status NpuprofHarness::AddNode(const std::string& name, const std::vector<std::string>& sim_args) {
  if (!started_ || server_pid_ <= 0) return Status::Precondition("AddNode needs a started harness");
  if (name.empty() || name == "sim1" || NodeSshd(name) != nullptr)
    return Status::Invalid("AddNode: node name '" + name + "' is empty or already taken");
  const std::string address = fmt::format("127.0.0.{}", 2 + nodes_.size());
  auto sshd = std::make_unique<SshdFixture>();
  sshd->set_listen_address(address);
  const auto given = [&](const char* flag) {
    return std::find(sim_args.begin(), sim_args.end(), flag) != sim_args.end();
  };
  std::vector<std::string> setup = {"/usr/bin/python3", SimDir() + "/setup_target.py", "--root", SimRoot(name)};
  if (!given("--address")) setup.insert(setup.end(), {"--address", address});
  if (!given("--hostname")) setup.insert(setup.end(), {"--hostname", name});
  setup.insert(setup.end(), sim_args.begin(), sim_args.end());
  // The node's target is made while its sshd starts.
  BackgroundCommand setup_cmd(setup, dir_ + "/setup_target-" + name + ".out", dir_ + "/setup_target-" + name + ".err");
  if (Status s = sshd->Start(); !s.ok()) return s;
  SshdFixture& node_sshd = *sshd;
  nodes_.emplace_back(name, std::move(sshd));  // stopped by Stop() even when a step below fails
  if (Status s = StartRelay(name, node_sshd); !s.ok()) return s;
  CliResult sr = setup_cmd.Wait(60);
  if (sr.exit_code != 0) return Status::Internal("setup_target.py failed: " + sr.err);
  CliResult add = Cli({"machine", "add", name, "--host", address, "--port", std::to_string(SshPort(name)),
                       "--user", node_sshd.user(), "--identity", node_sshd.identity_file(), "--known-hosts",
                       node_sshd.known_hosts_file(), "--env-script", SimRoot(name) + "/set_env.sh",
                       "--runtime-base", dir_ + "/runtime-" + name});
  if (add.exit_code != 0) return Status::Internal("machine add failed: " + add.err);
  return Status::Ok();
}

Status NpuprofHarness::StartRelay(const std::string& machine, SshdFixture& sshd) {
  if (!link_) return Status::Ok();
  RelayOptions o;
  o.listen_address = sshd.listen_address();
  o.upstream_address = sshd.listen_address();
  o.upstream_port = sshd.port();
  o.delay_us = link_->one_way_us;
  o.bytes_per_s = link_->bytes_per_s;
  auto relay = std::make_unique<LatencyRelay>(o);
  if (Status s = relay->Start(); !s.ok()) return s;
  // The same host key answers at the relay's port: known_hosts names both.
  std::ofstream kh(sshd.known_hosts_file(), std::ios::app);
  kh << fmt::format("[{}]:{} {}\n", sshd.listen_address(), relay->port(), sshd.host_public_key());
  if (!kh.good()) return Status::Io("cannot append to " + sshd.known_hosts_file());
  relays_[machine] = std::move(relay);
  return Status::Ok();
}

LatencyRelay* NpuprofHarness::Relay(const std::string& machine) {
  // A node has its own; sim1 and AddTarget's machines share sim1's sshd.
  auto it = relays_.find(NodeSshd(machine) != nullptr ? machine : "sim1");
  return it == relays_.end() ? nullptr : it->second.get();
}

int NpuprofHarness::SshPort(const std::string& machine) {
  if (LatencyRelay* r = Relay(machine)) return r->port();
  SshdFixture* node = NodeSshd(machine);
  return node ? node->port() : sshd_.port();
}

std::string NpuprofHarness::NodeAddress(const std::string& name) const {
  for (const auto& [n, sshd] : nodes_)
    if (n == name) return sshd->listen_address();
  return "";
}

SshdFixture* NpuprofHarness::NodeSshd(const std::string& name) {
  for (auto& [n, sshd] : nodes_)
    if (n == name) return sshd.get();
  return nullptr;
}

std::vector<std::string> NpuprofHarness::NodeNames() const {
  std::vector<std::string> out;
  for (const auto& [n, sshd] : nodes_) out.push_back(n);
  return out;
}

Status NpuprofHarness::StartServer() {
  std::vector<std::string> argv = {NpuprofBinary(), "server", "--data-dir", DataDir(), "--local-workers",
                                   std::to_string(local_workers_)};
  for (const auto& ep : server_listen_) argv.insert(argv.end(), {"--listen", ep});
  const auto socket_before = FileIdentity(DataDir() + "/npuprof.sock");
  const size_t log_start = ReadFile(dir_ + "/server.log").size();
  local_worker_pids_.clear();
  server_pid_ = SpawnWithLog(argv, dir_ + "/server.log", server_env_);
  if (server_pid_ < 0) return Status::Io("fork failed");
  return WaitForServer(30, socket_before, log_start);
}

// Ready = a client's answer names every local worker. Each client is a
// process start (tens of ms of CPU), so none is started before the server
// can answer: its ipc socket is a new file and, with local workers, its log
// says as many "ready:" lines (both checks are file reads, polled from 2 ms
// on; after 2 s the clients are started regardless of the log, in case its
// wording changed). The clients themselves poll from 20 ms on.
Status NpuprofHarness::WaitForServer(int timeout_s, std::pair<ino_t, int64_t> socket_before, size_t log_start) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(timeout_s);
  workers::PollBackoff gate(std::chrono::milliseconds(50), std::chrono::milliseconds(2));
  workers::PollBackoff clients(std::chrono::milliseconds(100), std::chrono::milliseconds(20));
  const std::string log_path = dir_ + "/server.log";
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Alive(server_pid_)) return Status::Internal("npuprof server exited: " + ReadFile(log_path));
    const bool listening = FileIdentity(DataDir() + "/npuprof.sock") != socket_before;
    const bool workers_said = local_workers_ == 0 ||
                              static_cast<int>(CountFrom(ReadFile(log_path), log_start, " ready: ")) >= local_workers_;
    const bool give_up_on_log = std::chrono::steady_clock::now() - start > std::chrono::seconds(2);
    if (!(listening && workers_said) && !give_up_on_log) {
      std::this_thread::sleep_for(gate.Next());
      continue;
    }
    if (local_workers_ == 0) {
      if (Cli({"ping"}, 5).exit_code == 0) return Status::Ok();
    } else if (static_cast<int>(WorkerPids().size()) >= local_workers_) {
      local_worker_pids_ = DescendantPids(server_pid_);  // the local workers are the server's children
      return Status::Ok();
    }
    std::this_thread::sleep_for(clients.Next());
  }
  return Status::Timeout("npuprof server did not become ready: " + ReadFile(log_path));
}

CliResult NpuprofHarness::CliRaw(const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> argv = {NpuprofBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCaptured(argv, timeout_s);
}

CliResult NpuprofHarness::Cli(const std::vector<std::string>& args, int timeout_s) {
  std::vector<std::string> a = args;
  auto dd = std::find(a.begin(), a.end(), "--");
  a.insert(dd, {"--data-dir", DataDir()});
  return CliRaw(a, timeout_s);
}

Result<pid_t> NpuprofHarness::StartWorker(const std::vector<std::string>& args, const std::string& name,
                                          const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> argv = {NpuprofBinary(), "worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = SpawnWithLog(argv, dir_ + "/" + name + ".log", env);
  if (pid < 0) return Status::Io("fork failed");
  extra_workers_.push_back(pid);
  return pid;
}

void NpuprofHarness::StopWorker(pid_t pid) {
  auto it = std::find(extra_workers_.begin(), extra_workers_.end(), pid);
  if (it == extra_workers_.end()) return;
  extra_workers_.erase(it);
  SignalAndReap(pid, SIGTERM);
}

std::string NpuprofHarness::Log(const std::string& name) const { return ReadFile(dir_ + "/" + name + ".log"); }

void NpuprofHarness::KillServer(int sig) {
  if (server_pid_ <= 0) return;
  SignalAndReap(server_pid_, sig);
  server_pid_ = -1;
  // Local workers die with the server (PDEATHSIG): until they are gone.
  WaitUntilGone(local_worker_pids_, std::chrono::seconds(2));
}

Status NpuprofHarness::RestartServer() {
  if (server_pid_ > 0) KillServer(SIGKILL);
  return StartServer();
}

bool NpuprofHarness::WaitForServerExit(int timeout_s) {
  if (server_pid_ <= 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  workers::PollBackoff backoff(std::chrono::milliseconds(50), std::chrono::milliseconds(2));
  while (waitpid(server_pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(backoff.Next());
  }
  server_pid_ = -1;
  // Local workers die with the server (PDEATHSIG): until they are gone.
  WaitUntilGone(local_worker_pids_, std::chrono::seconds(2));
  return true;
}

std::vector<pid_t> NpuprofHarness::WorkerPids() {
  std::vector<pid_t> out;
  CliResult r = Cli({"workers"}, 10);
  auto j = r.json();
  if (!j.is_object()) return out;
  for (const auto& w : j.value("workers", nlohmann::json::array())) out.push_back(w.value("pid", 0));
  return out;
}

std::string NpuprofHarness::MakeModel(const std::vector<std::string>& args) {
  const std::string out = fmt::format("{}/models/m{}", dir_, model_count_++);
  std::vector<std::string> argv = {"/usr/bin/python3", SimDir() + "/make_model.py", "--out", out};
  argv.insert(argv.end(), args.begin(), args.end());
  CliResult r = RunCaptured(argv, 120);
  if (r.exit_code != 0) return "";
  return out;
}

Status NpuprofHarness::UpdateTarget(const std::vector<std::string>& args, const std::string& machine) {
  std::vector<std::string> argv = {"/usr/bin/python3", SimDir() + "/setup_target.py", "--root", SimRoot(machine),
                                   "--update"};
  argv.insert(argv.end(), args.begin(), args.end());
  CliResult r = RunCaptured(argv, 60);
  if (r.exit_code != 0) return Status::Internal("setup_target.py --update failed: " + r.err);
  return Status::Ok();
}

std::vector<nlohmann::json> NpuprofHarness::SimTruthFiles(const std::string& machine) const {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  const std::string dir = SimRoot(machine) + "/state/truth";
  if (!fs::exists(dir, ec)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto j = nlohmann::json::parse(ReadFile(f.string()), nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

std::vector<pid_t> NpuprofHarness::LiveServicePids(const std::string& machine) const {
  std::vector<pid_t> out;
  std::error_code ec;
  const std::string dir = SimRoot(machine) + "/state/instances";
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    auto j = nlohmann::json::parse(ReadFile(e.path().string()), nullptr, false);
    if (j.is_discarded()) continue;
    pid_t pid = j.value("main_pid", 0);
    if (Running(pid)) out.push_back(pid);
  }
  return out;
}

std::map<std::string, size_t> NpuprofHarness::InvocationLogs(const std::string& name) const {
  std::map<std::string, size_t> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->path().filename() != name) continue;
    std::ifstream in(it->path());
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += !line.empty();
    out[it->path().parent_path().string()] = n;
  }
  return out;
}

std::vector<pid_t> NpuprofHarness::TargetProcessesAfter(int timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<pid_t> left = TargetProcesses();
  workers::PollBackoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(10));
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(backoff.Next());
    left = TargetProcesses();
  }
  return left;
}

std::vector<pid_t> NpuprofHarness::TargetProcesses() const {
  std::vector<pid_t> out;
  if (dir_.empty()) return out;
  // <dir>/target and <dir>/target-<machine>: the marker's value starts with this.
  const std::string marker = "NPUPROF_SIM_ROOT=" + dir_ + "/target";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::string env = ReadFile(e.path().string() + "/environ");
    size_t pos = 0;
    while (pos < env.size()) {
      size_t end = env.find('\0', pos);
      if (end == std::string::npos) end = env.size();
      if (end - pos >= marker.size() && env.compare(pos, marker.size(), marker) == 0) {
        out.push_back(pid);
        break;
      }
      pos = end + 1;
    }
  }
  return out;
}

void NpuprofHarness::Stop() {
  if (!started_) return;
  started_ = false;
  for (pid_t pid : std::vector<pid_t>(extra_workers_)) StopWorker(pid);
  if (server_pid_ > 0) KillServer(SIGTERM);
  // Whatever still runs on the simulated target (services, ranks, msprof,
  // analyse jobs) carries the target's marker.
  for (int round = 0; round < 3; ++round) {
    auto pids = TargetProcesses();
    if (pids.empty()) break;
    for (pid_t p : pids) kill(p, SIGKILL);
    WaitUntilGone(pids, std::chrono::milliseconds(200));
  }
  for (auto& [name, relay] : relays_) relay->Stop();  // kept: their counts stay readable
  for (auto& [name, sshd] : nodes_) sshd->Stop();
  sshd_.Stop();
}

}  // namespace npuprof::testing
