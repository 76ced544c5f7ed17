#include "tests/support/sshd_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <thread>

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int FreeLoopbackPort() { return FreeLoopbackPort("127.0.0.1"); }

int FreeLoopbackPort(const std::string& address) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) return 0;
  a.sin_port = 0;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

bool PortAccepts(const std::string& address, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) return false;
  a.sin_port = htons(static_cast<uint16_t>(port));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

namespace {

// fork + exec without a shell. stdout/stderr appended to log_file. The child
// dies with us (PR_SET_PDEATHSIG) so a crashed test leaves no sshd behind.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_file) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);
  int in = ::open("/dev/null", O_RDONLY);
  int out = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
  ::execv(args[0], args.data());
  ::_exit(127);
}

bool ReadPpid(pid_t pid, pid_t* ppid) {
  std::string stat = ReadAll(fmt::format("/proc/{}/stat", pid));
  size_t rp = stat.rfind(')');
  if (rp == std::string::npos) return false;
  std::istringstream rest(stat.substr(rp + 1));
  std::string state;
  long pp = 0;
  if (!(rest >> state >> pp)) return false;
  if (state == "Z") return false;  // zombies are gone for our purposes
  *ppid = static_cast<pid_t>(pp);
  return true;
}

std::vector<std::pair<pid_t, pid_t>> AllProcs() {
  std::vector<std::pair<pid_t, pid_t>> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    pid_t ppid = 0;
    if (ReadPpid(pid, &ppid)) out.emplace_back(pid, ppid);
  }
  return out;
}

}  // namespace

int RunLocal(const std::vector<std::string>& argv, const std::string& log_file) {
  pid_t pid = Spawn(argv, log_file);
  if (pid < 0) return -1;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<pid_t> DescendantPids(pid_t root) {
  auto procs = AllProcs();
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    pid_t p = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, ppid] : procs) {
      if (ppid == p) {
        out.push_back(pid);
        frontier.push_back(pid);
      }
    }
  }
  return out;
}

std::string WriteEnvScript(const std::string& dir, const std::vector<std::string>& lines) {
  std::string path = dir + "/env.sh";
  std::ofstream f(path, std::ios::trunc);
  for (const auto& l : lines) f << l << "\n";
  return path;
}

SshdFixture::~SshdFixture() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string SshdFixture::log() const { return ReadAll(dir_ + "/sshd.log"); }

std::string SshdFixture::host_public_key() const {
  std::string pub = ReadAll(dir_ + "/host_ed25519_key.pub");
  std::istringstream in(pub);
  std::string type, key;
  in >> type >> key;
  return type + " " + key;
}

Status SshdFixture::Start() {
  if (pid_ > 0) return Status::Precondition("sshd already running");
  struct passwd* pw = ::getpwuid(::getuid());
  if (pw == nullptr) return Status::Internal("getpwuid failed");
  user_ = pw->pw_name;
  char tmpl[] = "/tmp/npuprof-sshd-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return Status::Io("mkdtemp failed");
  dir_ = tmpl;
  if (::getuid() == 0 && ::mkdir("/run/sshd", 0755) != 0 && errno != EEXIST) {
    return Status::Io(fmt::format("cannot create /run/sshd: {}", std::strerror(errno)));
  }
  const std::string keygen_log = dir_ + "/keygen.log";
  for (const char* name : {"host_ed25519_key", "client_ed25519"}) {
    if (RunLocal({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                  std::string("npuprof-test-") + name, "-f", dir_ + "/" + name},
                 keygen_log) != 0) {
      return Status::Internal("ssh-keygen failed: " + ReadAll(keygen_log));
    }
  }
  fs::copy_file(dir_ + "/client_ed25519.pub", dir_ + "/authorized_keys");
  // The target user's home is the fixture's own: the shells sshd starts must
  // not run the rc files of whoever runs the tests (a pyenv init there takes a
  // lock a killed test shell can leave behind, and every later login waits).
  if (::mkdir((dir_ + "/home").c_str(), 0700) != 0) {
    return Status::Io(fmt::format("cannot create {}/home: {}", dir_, std::strerror(errno)));
  }
  Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = FreeLoopbackPort(listen_address_);
    if (port_ == 0) return Status::Invalid("no free port on listen address " + listen_address_);
    s = WriteConfig();
    if (!s.ok()) return s;
    s = Launch();
    if (s.ok()) break;
  }
  if (!s.ok()) return s;
  std::ofstream kh(known_hosts_file(), std::ios::trunc);
  kh << fmt::format("[{}]:{} {}\n", listen_address_, port_, host_public_key());
  return Status::Ok();
}

Status SshdFixture::WriteConfig() {
  std::ofstream c(dir_ + "/sshd_config", std::ios::trunc);
  c << "ListenAddress " << listen_address_ << "\n"
    << "Port " << port_ << "\n"
    << "HostKey " << dir_ << "/host_ed25519_key\n"
    << "PidFile " << dir_ << "/sshd.pid\n"
    << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
    << "StrictModes no\n"
    << "PubkeyAuthentication yes\n"
    << "PasswordAuthentication no\n"
    << "KbdInteractiveAuthentication no\n"
    << "UsePAM no\n"
    << "PermitRootLogin prohibit-password\n"
    << "AllowTcpForwarding yes\n"
    << "MaxSessions 100\n"
    << "MaxStartups 100\n"
    << "UseDNS no\n"
    << "PrintMotd no\n"
    << "PrintLastLog no\n"
    << "SetEnv HOME=" << dir_ << "/home\n"
    << (sftp_subsystem_ ? "Subsystem sftp internal-sftp\n" : "")
    << "LogLevel VERBOSE\n";
  return c.good() ? Status::Ok() : Status::Io("cannot write sshd_config");
}

Status SshdFixture::Launch() {
  const std::string log_path = dir_ + "/sshd.log";
  const size_t log_start = log().size();
  pid_ = Spawn({"/usr/sbin/sshd", "-D", "-e", "-f", dir_ + "/sshd_config"}, log_path);
  if (pid_ < 0) return Status::Internal("fork failed");
  const std::string ready = fmt::format("Server listening on {} port {}", listen_address_, port_);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable("sshd exited at start: " + log().substr(log_start));
    }
    if (log().find(ready, log_start) != std::string::npos && PortAccepts(listen_address_, port_)) {
      return Status::Ok();
    }
    std::this_thread::sleep_for(10ms);
  }
  Stop();
  return Status::Timeout("sshd did not start listening within 10s: " + log().substr(log_start));
}

std::vector<pid_t> SshdFixture::ChildPids() const {
  std::vector<pid_t> out;
  if (pid_ <= 0) return out;
  for (const auto& [pid, ppid] : AllProcs()) {
    if (ppid == pid_) out.push_back(pid);
  }
  return out;
}

void SshdFixture::KillChildren(int sig) {
  for (pid_t p : ChildPids()) ::kill(p, sig);
}

void SshdFixture::Stop() {
  if (pid_ <= 0) return;
  // Leaves first, so each killed process is reaped by its (still living)
  // parent instead of becoming an orphan zombie; then the listener.
  std::vector<pid_t> desc = DescendantPids(pid_);
  for (auto it = desc.rbegin(); it != desc.rend(); ++it) ::kill(*it, SIGKILL);
  auto reap_deadline = std::chrono::steady_clock::now() + 500ms;
  for (pid_t p : desc) {
    while (fs::exists(fmt::format("/proc/{}", p)) &&
           std::chrono::steady_clock::now() < reap_deadline) {
      std::this_thread::sleep_for(2ms);
    }
  }
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + 3s;
  int st = 0;
  while (::waitpid(pid_, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  pid_ = -1;
}

Status SshdFixture::RestartWithNewHostKey() {
  Stop();
  std::error_code ec;
  fs::remove(dir_ + "/host_ed25519_key", ec);
  fs::remove(dir_ + "/host_ed25519_key.pub", ec);
  const std::string keygen_log = dir_ + "/keygen.log";
  if (RunLocal({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                "npuprof-test-host2", "-f", dir_ + "/host_ed25519_key"},
               keygen_log) != 0) {
    return Status::Internal("ssh-keygen failed: " + ReadAll(keygen_log));
  }
  Status s;
  for (int attempt = 0; attempt < 20; ++attempt) {  // same port; may be briefly busy
    s = Launch();
    if (s.ok()) return s;
    std::this_thread::sleep_for(100ms);
  }
  return s;
}

ssh::SshTarget SshdFixture::target() const {
  ssh::SshTarget t;
  t.host = listen_address_;
  t.port = port_;
  t.user = user_;
  t.identity_file = identity_file();
  t.known_hosts_file = known_hosts_file();
  t.host_key_policy = ssh::HostKeyPolicy::kStrict;
  return t;
}

}  // namespace npuprof::testing
