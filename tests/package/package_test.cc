// The Debian package scripts/package.sh builds (here the package_build
// fixture runs the same cpack in the build dir), checked the ways CI allows:
//  * its control data: Depends names the package of every shared library the
//    binary links (dpkg-shlibdeps), Recommends/Suggests as decided in
//    packaging/packaging.cmake, the maintainer scripts;
//  * unpacked with `dpkg -x` into a temp root: the layout, a stripped binary,
//    `npuprof --help`, the completion, `systemd-analyze verify` of the unit
//    (where the tool exists), and `npuprof demo` run from there, which must
//    start the simulator unpacked under usr/share/npuprof;
//  * `cmake --install --prefix P`: the same tree, the unit naming P's binary;
//  * installed with `dpkg -i` when the test runs as root: the service user
//    and its dirs, `npuprof demo` from /usr/bin, an operator adding a machine
//    as docs/OPERATIONS.md says (key and known_hosts of user npuprof, server
//    run as npuprof, machine check, probe), then `dpkg -r` (the user and data
//    stay) and `dpkg --purge` (nothing of the package is left; the store and
//    keys in /var/lib/npuprof are kept, owned by root, and handed back by the
//    next install). Skipped, saying why, when not root or when npuprof is on
//    the machine already: the test only ever removes what it installed.
#include <algorithm>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "tests/package/run_util.h"
#include "tests/support/npuprof_harness.h"
#include "workers/poll_backoff.h"
#include "tests/support/build_paths.h"

namespace fs = std::filesystem;

namespace npuprof::testing {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// One control field of the package ("" when absent).
std::string ControlField(const std::string& deb, const std::string& field) {
  Ran r = RunOutput({"/usr/bin/dpkg-deb", "--field", deb, field});
  return r.exit_code == 0 ? std::string(Trim(r.output)) : "";
}

// Package names of a Depends-like field, without versions or alternatives.
std::set<std::string> PackageNames(const std::string& field) {
  std::set<std::string> out;
  std::string cur;
  bool in_name = true;
  for (char c : field + ",") {
    if (c == ',' || c == '|') {
      if (!cur.empty()) out.insert(cur);
      cur.clear();
      in_name = true;
    } else if (c == ' ' || c == '(') {
      if (!cur.empty()) in_name = false;
    } else if (in_name) {
      cur += c;
    }
  }
  return out;
}

// The sonames the binary needs (objdump -p: "  NEEDED   libzmq.so.5").
std::vector<std::string> NeededSonames(const std::string& binary) {
  std::vector<std::string> out;
  Ran r = RunOutput({"/usr/bin/objdump", "-p", binary});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const auto& l : Lines(r.output)) {
    std::istringstream in(l);
    std::string tag, name;
    if (in >> tag >> name && tag == "NEEDED") out.push_back(name);
  }
  return out;
}

// The installed packages that ship a file named soname ("pkg:arch: /path"),
// and the virtual packages they provide (shlibs files may name those, e.g.
// libspdlog1.10-fmt9, provided by libspdlog1.10).
std::set<std::string> PackagesShipping(const std::string& soname) {
  std::set<std::string> out;
  Ran r = RunOutput({"/usr/bin/dpkg-query", "--search", "*/" + soname});
  for (const auto& l : Lines(r.output)) {
    const size_t colon = l.find(':');
    if (colon != std::string::npos && l.find(": /") != std::string::npos) out.insert(l.substr(0, colon));
  }
  std::set<std::string> provided;
  for (const auto& p : out) {
    Ran prov = RunOutput({"/usr/bin/dpkg-query", "--show", "--showformat=${Provides}", p});
    if (prov.exit_code == 0) provided.merge(PackageNames(prov.output));
  }
  out.merge(provided);
  return out;
}

std::string MkTemp(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  return mkdtemp(tmpl.data()) ? tmpl : "";
}

// Runs `npuprof demo` with `binary` and checks it went through and started
// the simulator at sim_dir; removes the directory the demo kept.
void RunDemoFrom(const std::string& binary, const std::string& sim_dir) {
  unsetenv("NPUPROF_SIM_DIR");  // the binary must find its simulator itself
  setenv("NPUPROF_BIN", binary.c_str(), 1);
  NpuprofHarness runner;  // not started: only its way of running the binary
  CliResult r = runner.CliRaw({"demo"}, 1500);
  unsetenv("NPUPROF_BIN");
  const std::string err_tail = r.err.size() > 4000 ? r.err.substr(r.err.size() - 4000) : r.err;
  const nlohmann::json summary = r.json();
  const std::string target = summary.is_object() ? summary.value("target", "") : "";
  // The demo keeps <dir>/target, <dir>/data, ... in a fresh /tmp/npuprof-it-* dir.
  struct RemoveDemoDir {
    fs::path dir;
    ~RemoveDemoDir() {
      std::error_code ec;
      if (dir.filename().string().rfind("npuprof-it-", 0) == 0) fs::remove_all(dir, ec);
    }
  } remove_demo_dir{fs::path(target).parent_path()};
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << err_tail;
  ASSERT_TRUE(summary.is_object()) << r.out << err_tail;
  EXPECT_TRUE(summary.value("ok", false)) << summary.dump(2) << err_tail;
  const auto config = nlohmann::json::parse(ReadWhole(target + "/state/config.json"), nullptr, false);
  EXPECT_TRUE(config.is_object() && config.value("sim_dir", "") == sim_dir)
      << "the demo's target was not set up from " << sim_dir << ": " << (config.is_object() ? config.dump() : target);
  // The views it writes next to its exports, where its summary says.
  for (const char* key : {"memory_profile_report_html", "torch_profile_report_html", "memory_profile_compare_html"}) {
    const std::string html = ReadWhole(summary.value(key, std::string("/nonexistent")));
    EXPECT_NE(html.find("<html"), std::string::npos) << key << ": " << summary.value(key, "");
    if (std::string(key) == "memory_profile_report_html") {
      EXPECT_NE(html.find("<svg"), std::string::npos);
    }
  }
  const auto trace = nlohmann::json::parse(ReadWhole(summary.value("memory_profile_trace", "/nonexistent")),
                                           nullptr, false);
  EXPECT_TRUE(trace.is_object() && trace.contains("traceEvents")) << summary.value("memory_profile_trace", "");
  // The terminal tells the story in a few screens; the whole output of every
  // step is in steps/.
  const size_t lines = static_cast<size_t>(std::count(r.err.begin(), r.err.end(), '\n'));
  EXPECT_LE(lines, 320u) << "the demo's terminal output grew to " << lines << " lines";
  for (const char* key_line : {"== 1. The machine inventory", "busy: process listed on NPU 3",
                               "waiting for 2 device(s) on sim1", "workload gate: ok", "analysis gate: ok",
                               "Model weights", "KV cache reserve", "[Configuration differences]",
                               "gpu_memory_utilization", "(2 of 2 points ok)", "[Totals (sum over devices)]", "verified:",
                               "Open next:"})
    EXPECT_NE(r.err.find(key_line), std::string::npos) << "missing: " << key_line << "\n" << err_tail;
  EXPECT_EQ(r.err.find("\"armed_timers\""), std::string::npos) << "raw JSON on the terminal";
  size_t step_files = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(summary.value("steps_dir", "/nonexistent"), ec)) {
    (void)f;
    ++step_files;
  }
  EXPECT_GE(step_files, 15u) << "one file per step in " << summary.value("steps_dir", "");
}

class Package : public ::testing::Test {
 protected:
  void SetUp() override {
    deb_ = BuiltDeb();
    ASSERT_FALSE(deb_.empty()) << "no npuprof_*.deb in " << npuprof::build_paths::BinaryDir()
                               << " (the package_build fixture or scripts/package.sh writes it)";
  }
  std::string deb_;
};

TEST_F(Package, ControlDataDependsOnEveryLinkedLibrary) {
  EXPECT_EQ(ControlField(deb_, "Package"), "npuprof");
  const std::set<std::string> depends = PackageNames(ControlField(deb_, "Depends"));
  EXPECT_TRUE(depends.count("passwd")) << "maintainer scripts use useradd/userdel";
  const std::string binary = std::string(npuprof::build_paths::BinaryDir()) + "/cli/npuprof";
  const auto sonames = NeededSonames(binary);
  ASSERT_FALSE(sonames.empty());
  for (const auto& so : sonames) {
    const auto shipping = PackagesShipping(so);
    ASSERT_FALSE(shipping.empty()) << "no installed package ships " << so;
    bool named = false;
    for (const auto& p : shipping) named = named || depends.count(p);
    EXPECT_TRUE(named) << so << " comes from " << ::testing::PrintToString(shipping)
                       << ", none of them in Depends: " << ControlField(deb_, "Depends");
  }
  // The demo's needs: recommended, or only suggested (a system sshd on port 22).
  EXPECT_EQ(PackageNames(ControlField(deb_, "Recommends")), (std::set<std::string>{"openssh-client", "python3"}));
  EXPECT_EQ(PackageNames(ControlField(deb_, "Suggests")), (std::set<std::string>{"openssh-server"}));
  for (const char* script : {"postinst", "prerm", "postrm"}) {
    Ran r = RunOutput({"/usr/bin/dpkg-deb", "--info", deb_, script});
    EXPECT_EQ(r.exit_code, 0) << script << ": " << r.output;
    EXPECT_EQ(r.output.rfind("#!/bin/sh", 0), 0u) << script;
  }
}

class UnpackedPackage : public Package {
 protected:
  void SetUp() override {
    Package::SetUp();
    if (HasFatalFailure()) return;
    root_ = MkTemp("npuprof-pkg-root");
    ASSERT_FALSE(root_.empty());
    Ran r = RunOutput({"/usr/bin/dpkg-deb", "--extract", deb_, root_});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  std::string root_;
};

TEST_F(UnpackedPackage, LayoutBinaryHelpAndCompletion) {
  const std::string bin = root_ + "/usr/bin/npuprof";
  ASSERT_TRUE(fs::is_regular_file(bin));
  EXPECT_TRUE(fs::is_regular_file(root_ + "/usr/lib/systemd/system/npuprof.service"));
  EXPECT_TRUE(fs::is_regular_file(root_ + "/usr/share/doc/npuprof/OPERATIONS.md"));
  const std::string sim = root_ + "/usr/share/npuprof/sim";
  EXPECT_TRUE(fs::is_regular_file(sim + "/setup_target.py"));
  EXPECT_TRUE(fs::is_regular_file(sim + "/make_model.py"));
  for (const char* tool : {"npu-smi", "msprof", "vllm"}) {
    struct stat st{};
    ASSERT_EQ(stat((sim + "/bin/" + tool).c_str(), &st), 0) << tool;
    EXPECT_TRUE(st.st_mode & S_IXOTH) << tool << " is not executable";
  }
  EXPECT_FALSE(fs::exists(sim + "/tests")) << "the simulator's own unit tests are not shipped";
  for (const auto& e : fs::recursive_directory_iterator(root_))
    EXPECT_NE(e.path().filename(), "__pycache__") << e.path();

  Ran sections = RunOutput({"/usr/bin/objdump", "-h", bin});
  ASSERT_EQ(sections.exit_code, 0);
  EXPECT_EQ(sections.output.find(".debug_info"), std::string::npos) << "the packaged binary is not stripped";

  setenv("NPUPROF_BIN", bin.c_str(), 1);
  NpuprofHarness runner;
  CliResult help = runner.CliRaw({"--help"}, 30);
  CliResult completion = runner.CliRaw({"completion", "bash"}, 30);
  unsetenv("NPUPROF_BIN");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("demo"), std::string::npos) << help.out;
  ASSERT_EQ(completion.exit_code, 0) << completion.err;
  EXPECT_EQ(ReadWhole(root_ + "/usr/share/bash-completion/completions/npuprof"), completion.out);
}

TEST_F(UnpackedPackage, UnitRunsTheInstalledServerAndPassesSystemdAnalyzeVerify) {
  const std::string unit = ReadWhole(root_ + "/usr/lib/systemd/system/npuprof.service");
  const std::string exec = "ExecStart=/usr/bin/npuprof server --data-dir /var/lib/npuprof\n";
  ASSERT_NE(unit.find(exec), std::string::npos) << unit;
  for (const char* line : {"User=npuprof\n", "StateDirectory=npuprof\n", "Restart=on-failure\n",
                           "ProtectSystem=strict\n", "NoNewPrivileges=yes\n", "PrivateTmp=yes\n"})
    EXPECT_NE(unit.find(line), std::string::npos) << line;
  if (!fs::exists("/usr/bin/systemd-analyze")) GTEST_SKIP() << "systemd-analyze not installed (package systemd)";
  // verify wants ExecStart's binary to exist: point a copy at the unpacked one.
  std::string copy = unit;
  copy.replace(copy.find(exec), exec.size(),
               "ExecStart=" + root_ + "/usr/bin/npuprof server --data-dir /var/lib/npuprof\n");
  const std::string path = root_ + "/npuprof.service";
  std::ofstream(path) << copy;
  Ran r = RunOutput({"/usr/bin/systemd-analyze", "verify", "--man=no", path});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Trim(r.output), "") << "systemd-analyze verify warned";
}

TEST_F(UnpackedPackage, DemoRunsFromTheUnpackedBinaryWithItsSimulator) {
  RunDemoFrom(root_ + "/usr/bin/npuprof", root_ + "/usr/share/npuprof/sim");
}

// `cmake --install --prefix P` installs the tree the package holds, with the
// unit naming P's binary.
TEST(Install, PrefixGetsThePackagesLayoutAndAUnitForItsBinary) {
  const std::string prefix = MkTemp("npuprof-pkg-prefix");
  ASSERT_FALSE(prefix.empty());
  Ran r = RunOutput({npuprof::build_paths::CmakeCommand(), "--install", npuprof::build_paths::BinaryDir(), "--prefix", prefix, "--strip"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"bin/npuprof", "share/bash-completion/completions/npuprof", "share/npuprof/sim/setup_target.py",
                        "share/doc/npuprof/OPERATIONS.md"})
    EXPECT_TRUE(fs::is_regular_file(prefix + "/" + f)) << f;
  const std::string unit = ReadWhole(prefix + "/lib/systemd/system/npuprof.service");
  EXPECT_NE(unit.find("\nExecStart=" + prefix + "/bin/npuprof server --data-dir /var/lib/npuprof\n"), std::string::npos)
      << unit;
  fs::remove_all(prefix);
}

// --- dpkg -i (root only) -----------------------------------------------------

bool PackageInstalled() {
  Ran r = RunOutput({"/usr/bin/dpkg-query", "--show", "--showformat=${db:Status-Status}", "npuprof"});
  return r.exit_code == 0 && r.output != "not-installed" && !r.output.empty();
}

bool UserExists(const std::string& name) { return RunOutput({"/usr/bin/getent", "passwd", name}).exit_code == 0; }

// dpkg (or apt) run by someone else holds dpkg's lock: retry for a while.
Ran Dpkg(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/dpkg"};
  argv.insert(argv.end(), args.begin(), args.end());
  workers::PollBackoff backoff(std::chrono::seconds(5), std::chrono::milliseconds(200));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (true) {
    Ran r = RunOutput(argv);
    if (r.exit_code == 0 || r.output.find("frontend lock") == std::string::npos ||
        std::chrono::steady_clock::now() > deadline)
      return r;
    std::this_thread::sleep_for(backoff.Next());
  }
}

Ran AsServiceUser(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "npuprof", "--"});
  return RunOutput(argv);
}

// The server as the service user, the way the unit runs it (without
// systemd's sandbox): start-stop-daemon, pid file in `pidfile`.
Ran StartServiceServer(const std::string& pidfile, const std::string& log) {
  return RunOutput({"/usr/sbin/start-stop-daemon", "--start", "--background", "--chuid", "npuprof", "--make-pidfile",
                    "--pidfile", pidfile, "--output", log, "--exec", "/usr/bin/npuprof", "--", "server",
                    "--data-dir", "/var/lib/npuprof"});
}

void StopServiceServer(const std::string& pidfile) {
  if (fs::exists(pidfile))
    RunOutput({"/usr/sbin/start-stop-daemon", "--stop", "--pidfile", pidfile, "--remove-pidfile", "--retry",
               "TERM/30/KILL/5"});
}

// docs/OPERATIONS.md "The service user, its keys and known_hosts", step by
// step against a simulated target behind a loopback sshd: the key pair made
// as user npuprof, the target's host key scanned into its known_hosts, the
// machine added, checked and probed through a server running as npuprof.
void OperatorAddsAMachineAsTheServiceUser(const std::string& work, std::string* pidfile) {
  SshdFixture sshd;
  ASSERT_TRUE(sshd.Start().ok());
  const std::string port = std::to_string(sshd.port());
  Ran setup = RunOutput({"/usr/bin/python3", "/usr/share/npuprof/sim/setup_target.py", "--root", work + "/target"});
  ASSERT_EQ(setup.exit_code, 0) << setup.output;
  const std::string key = "/var/lib/npuprof/.ssh/id_ed25519";
  const std::string known_hosts = "/var/lib/npuprof/.ssh/known_hosts";
  Ran keygen = AsServiceUser({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "npuprof@test", "-f", key});
  ASSERT_EQ(keygen.exit_code, 0) << keygen.output;
  std::ofstream(sshd.dir() + "/authorized_keys", std::ios::app) << ReadWhole(key + ".pub");
  Ran scan = RunOutput({"/bin/sh", "-c",
                        "/usr/bin/ssh-keyscan -p \"$0\" -t ed25519 127.0.0.1 | "
                        "/usr/sbin/runuser -u npuprof -- /usr/bin/tee -a \"$1\"",
                        port, known_hosts});
  ASSERT_EQ(scan.exit_code, 0) << scan.output;

  *pidfile = work + "/server.pid";
  Ran start = StartServiceServer(*pidfile, work + "/server.log");
  ASSERT_EQ(start.exit_code, 0) << start.output;
  workers::PollBackoff backoff(std::chrono::seconds(1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Ran ping;
  while ((ping = AsServiceUser({"/usr/bin/npuprof", "ping", "--data-dir", "/var/lib/npuprof"})).exit_code != 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(backoff.Next());
  ASSERT_EQ(ping.exit_code, 0) << ping.output << ReadWhole(work + "/server.log");

  Ran add = AsServiceUser({"/usr/bin/npuprof", "machine", "add", "sim1", "--data-dir", "/var/lib/npuprof", "--host",
                           "127.0.0.1", "--port", port, "--user", sshd.user(), "--identity", key, "--known-hosts",
                           known_hosts, "--env-script", work + "/target/set_env.sh", "--runtime-base",
                           work + "/runtime"});
  ASSERT_EQ(add.exit_code, 0) << add.output;
  Ran check = AsServiceUser({"/usr/bin/npuprof", "machine", "check", "sim1", "--data-dir", "/var/lib/npuprof"});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  Ran probe = AsServiceUser(
      {"/usr/bin/npuprof", "submit", "probe", "--machine", "sim1", "--wait", "--data-dir", "/var/lib/npuprof"});
  EXPECT_EQ(probe.exit_code, 0) << probe.output;
  StopServiceServer(*pidfile);
  EXPECT_FALSE(fs::exists(*pidfile));
}

TEST_F(Package, DpkgInstallRunsDemoAndPurgeLeavesNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "dpkg -i needs root; the unpacked-package tests cover the rest";
  if (!fs::exists("/usr/bin/dpkg")) GTEST_SKIP() << "no dpkg";
  // Two runs of this test on one machine (two build dirs) take turns: an flock
  // on dpkg's database dir, which dpkg itself never flocks (it uses fcntl
  // locks on files inside), so nothing is created or left behind.
  const int lock = open("/var/lib/dpkg", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  workers::PollBackoff backoff(std::chrono::seconds(5), std::chrono::milliseconds(200));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(20);
  while (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      close(lock);
      FAIL() << "another run of this test held the lock for 20 min";
    }
    std::this_thread::sleep_for(backoff.Next());
  }
  if (PackageInstalled() || fs::exists("/usr/bin/npuprof") || fs::exists("/var/lib/npuprof") ||
      UserExists("npuprof")) {
    close(lock);
    GTEST_SKIP() << "npuprof (package, user or /var/lib/npuprof) exists on this machine already; "
                    "the test leaves it alone";
  }
  // Never leave the server, the package, its user or its data dir behind,
  // whatever fails.
  struct Uninstall {
    int lock;
    std::string work = MkTemp("npuprof-pkg-dpkg");
    std::string server_pidfile;
    ~Uninstall() {
      if (!server_pidfile.empty()) StopServiceServer(server_pidfile);
      if (PackageInstalled()) Dpkg({"--purge", "npuprof"});
      std::error_code ec;
      fs::remove_all("/var/lib/npuprof", ec);
      if (!work.empty()) fs::remove_all(work, ec);
      close(lock);
    }
  } uninstall{lock};
  ASSERT_FALSE(uninstall.work.empty());

  Ran in = Dpkg({"--install", deb_});
  ASSERT_EQ(in.exit_code, 0) << in.output;
  Ran user = RunOutput({"/usr/bin/getent", "passwd", "npuprof"});
  ASSERT_EQ(user.exit_code, 0) << "postinst made no user npuprof";
  EXPECT_NE(user.output.find(":/var/lib/npuprof:/usr/sbin/nologin"), std::string::npos) << user.output;
  struct stat ssh{};
  ASSERT_EQ(stat("/var/lib/npuprof/.ssh", &ssh), 0);
  EXPECT_EQ(ssh.st_mode & 0777, 0700u);
  if (fs::exists("/usr/bin/systemd-analyze")) {
    Ran v = RunOutput({"/usr/bin/systemd-analyze", "verify", "--man=no", "/usr/lib/systemd/system/npuprof.service"});
    EXPECT_EQ(v.exit_code, 0) << v.output;
  }

  RunDemoFrom("/usr/bin/npuprof", "/usr/share/npuprof/sim");
  OperatorAddsAMachineAsTheServiceUser(uninstall.work, &uninstall.server_pidfile);
  if (HasFatalFailure()) return;

  Ran rm = Dpkg({"--remove", "npuprof"});
  ASSERT_EQ(rm.exit_code, 0) << rm.output;
  EXPECT_FALSE(fs::exists("/usr/bin/npuprof"));
  EXPECT_FALSE(fs::exists("/usr/share/npuprof")) << "the demo's bytecode (or anything) was left: " << rm.output;
  EXPECT_TRUE(UserExists("npuprof")) << "remove deleted the user";

  // The store and keys the server and the operator left survive a purge,
  // handed to root.
  ASSERT_TRUE(fs::is_regular_file("/var/lib/npuprof/store/CURRENT"));
  const std::string current = ReadWhole("/var/lib/npuprof/store/CURRENT");
  Ran purge = Dpkg({"--purge", "npuprof"});
  ASSERT_EQ(purge.exit_code, 0) << purge.output;
  EXPECT_FALSE(UserExists("npuprof")) << "purge left the user";
  EXPECT_NE(RunOutput({"/usr/bin/getent", "group", "npuprof"}).exit_code, 0) << "purge left the group";
  EXPECT_EQ(ReadWhole("/var/lib/npuprof/store/CURRENT"), current);
  EXPECT_TRUE(fs::is_regular_file("/var/lib/npuprof/.ssh/id_ed25519"));
  struct stat home{};
  ASSERT_EQ(stat("/var/lib/npuprof", &home), 0);
  EXPECT_EQ(home.st_uid, 0u);
  EXPECT_EQ(home.st_mode & 0777, 0700u);
  EXPECT_NE(purge.output.find("kept /var/lib/npuprof"), std::string::npos) << purge.output;

  // Installing again hands the kept data to the new user; a purge with nothing
  // in the data dir deletes it.
  Ran again = Dpkg({"--install", deb_});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  struct stat kept{};
  ASSERT_EQ(stat("/var/lib/npuprof/store/CURRENT", &kept), 0);
  EXPECT_NE(kept.st_uid, 0u) << "the kept store still belongs to root";
  for (const auto& e : fs::directory_iterator("/var/lib/npuprof"))
    if (e.path().filename() != ".ssh") fs::remove_all(e.path());
  for (const auto& e : fs::directory_iterator("/var/lib/npuprof/.ssh")) fs::remove_all(e.path());
  Ran purge2 = Dpkg({"--purge", "npuprof"});
  ASSERT_EQ(purge2.exit_code, 0) << purge2.output;
  EXPECT_FALSE(fs::exists("/var/lib/npuprof")) << purge2.output;
}

}  // namespace
}  // namespace npuprof::testing
