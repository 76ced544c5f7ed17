// SshdFixture: a real OpenSSH sshd on a loopback address (127.0.0.1 unless
// set_listen_address says another of 127.0.0.0/8, which Linux routes to the
// loopback interface too: several "hosts" on one machine) and a port free on
// that address, in a fresh temp dir, with its own ed25519 host key, a client
// key pair, authorized_keys and a known_hosts entry for [address]:port.
// Depends on nothing outside the temp dir except system binaries
// (/usr/sbin/sshd, ssh-keygen). Works as root (creates /run/sshd for
// privilege separation) and as a normal user (logs in as that user).
//
// Only processes it started (the listener) or found as its descendants are
// ever signalled. Destructor = Stop() + remove the temp dir.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::testing {

class SshdFixture {
 public:
  SshdFixture() = default;
  ~SshdFixture();
  SshdFixture(const SshdFixture&) = delete;
  SshdFixture& operator=(const SshdFixture&) = delete;

  // Before Start(): whether sshd_config has a `Subsystem sftp` line (default
  // yes). Without it sshd refuses SFTP, as minimal containers and hardened
  // hosts do.
  void set_sftp_subsystem(bool on) { sftp_subsystem_ = on; }
  // Before Start(): the IPv4 loopback address sshd listens on (default
  // 127.0.0.1). target(), known_hosts and the readiness check all use it.
  void set_listen_address(std::string address) { listen_address_ = std::move(address); }
  const std::string& listen_address() const { return listen_address_; }

  // Creates keys/config and starts sshd; returns once the port accepts TCP.
  Status Start();
  // Stops the listener and every descendant still running. Keeps the dir.
  void Stop();
  // Starts the listener again after Stop() (same port, keys and config):
  // the target comes back after being unreachable.
  Status Relaunch() { return pid_ > 0 ? Status::Ok() : Launch(); }
  // Stop, generate a new host key (known_hosts keeps the old one), start again
  // on the same port.
  Status RestartWithNewHostKey();

  int port() const { return port_; }
  const std::string& user() const { return user_; }
  const std::string& dir() const { return dir_; }
  // The target user's $HOME in sessions of this sshd (its own, empty: no rc files run).
  std::string home_dir() const { return dir_ + "/home"; }
  std::string identity_file() const { return dir_ + "/client_ed25519"; }
  std::string known_hosts_file() const { return dir_ + "/known_hosts"; }
  std::string host_public_key() const;  // "ssh-ed25519 AAAA..." of the current host key
  pid_t sshd_pid() const { return pid_; }
  std::string log() const;  // sshd's stderr so far

  // Per-connection sshd processes (direct children of the listener).
  std::vector<pid_t> ChildPids() const;
  void KillChildren(int sig);

  // Strict target for this sshd (env_script empty).
  ssh::SshTarget target() const;

 private:
  Status WriteConfig();
  Status Launch();

  std::string dir_;
  std::string user_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool sftp_subsystem_ = true;
  std::string listen_address_ = "127.0.0.1";
};

// Writes `lines` (one per line) to <dir>/env.sh and returns its path.
std::string WriteEnvScript(const std::string& dir, const std::vector<std::string>& lines);

// Runs argv locally (no shell), returns exit status; output goes to `log_file`.
int RunLocal(const std::vector<std::string>& argv, const std::string& log_file = "/dev/null");

// A loopback TCP port that was free a moment ago (on 127.0.0.1, or on the
// given IPv4 loopback address).
int FreeLoopbackPort();
int FreeLoopbackPort(const std::string& address);
// Whether address:port accepts a TCP connection now.
bool PortAccepts(const std::string& address, int port);

// Descendants of `root` from /proc; every pid comes after its parent.
std::vector<pid_t> DescendantPids(pid_t root);

}  // namespace npuprof::testing
