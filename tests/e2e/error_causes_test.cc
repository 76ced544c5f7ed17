// Errors that name their cause, end to end against the simulated target over
// the loopback sshd: a machine env script that exits or fails (its own
// status and stderr, from machine check and from a task), one that does not
// exist (named when npu-smi is then not found), an npu-smi that never exits
// (a timeout said as one), and a runtime file system that is full (named as
// such, nothing of the launch left behind).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/npuprof_harness.h"
#include "tests/support/tmpfs_mount.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Adds machine `name` on sim1's sshd and target with its own env script
// (`env_lines`, or `env_path` as given when env_lines is empty) and runtime
// base; a copy of known_hosts keeps its SSH session (and so its env
// script) its own in the workers' pool.
void AddMachine(NpuprofHarness& h, const std::string& name, const std::vector<std::string>& env_lines,
                std::string env_path = "", std::string runtime_base = "", std::vector<std::string> extra = {}) {
  const std::string dir = h.Dir() + "/machine-" + name;
  fs::create_directories(dir);
  if (!env_lines.empty()) {
    env_path = dir + "/env.sh";
    std::ofstream e(env_path);
    for (const auto& l : env_lines) e << l << "\n";
  }
  if (runtime_base.empty()) runtime_base = dir + "/runtime";
  fs::copy_file(h.sshd().known_hosts_file(), dir + "/known_hosts", fs::copy_options::overwrite_existing);
  std::vector<std::string> args = {"machine", "add", name, "--host", "127.0.0.1", "--port", std::to_string(h.sshd().port()),
                                   "--user", h.sshd().user(), "--identity", h.sshd().identity_file(), "--known-hosts",
                                   dir + "/known_hosts", "--env-script", env_path, "--runtime-base", runtime_base};
  args.insert(args.end(), extra.begin(), extra.end());
  CliResult add = h.Cli(args);
  ASSERT_EQ(add.exit_code, 0) << add.err;
}

// The error of a run that failed, from `--wait`'s final summary.
std::string FailedRunError(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json j = r.json();
  EXPECT_TRUE(j.is_object()) << r.out;
  if (!j.is_object()) return "";
  EXPECT_EQ(j.value("status", ""), "failed") << j.dump(2);
  return j.value("error", "");
}

TEST(ErrorCauses, AnEnvScriptThatFailsIsNamedWithItsStatusAndStderr) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string sim_env = ". '" + h.SimRoot() + "/set_env.sh'";
  AddMachine(h, "exits", {sim_env, "echo 'set_env: the Ascend driver 23.0.3 is not installed here' >&2", "exit 1"});
  AddMachine(h, "fails", {sim_env, "echo 'set_env: warning: no CANN kernels' >&2", "false"});
  const std::string exits_env = h.Dir() + "/machine-exits/env.sh", fails_env = h.Dir() + "/machine-fails/env.sh";

  // machine check used to say ok with python3: false; a probe blamed npu-smi.
  CliResult check = h.Cli({"machine", "check", "exits"});
  EXPECT_NE(check.exit_code, 0) << check.out << check.err;
  const std::string check_text = check.out + check.err;
  EXPECT_NE(check_text.find("the env script '" + exits_env + "' exited 1 on"), std::string::npos) << check_text;
  EXPECT_NE(check_text.find("the Ascend driver 23.0.3 is not installed here"), std::string::npos) << check_text;

  std::string why = FailedRunError(h.Cli({"submit", "probe", "--machine", "exits", "--wait"}));
  EXPECT_NE(why.find("the env script '" + exits_env + "' exited 1 on"), std::string::npos) << why;
  EXPECT_NE(why.find("its stderr: set_env: the Ascend driver 23.0.3 is not installed here"), std::string::npos) << why;
  EXPECT_EQ(why.find("npu-smi info exited"), std::string::npos) << why;

  why = FailedRunError(h.Cli({"submit", "probe", "--machine", "fails", "--wait"}));
  EXPECT_NE(why.find("the env script '" + fails_env + "' returned 1 on"), std::string::npos) << why;
  EXPECT_NE(why.find("set_env: warning: no CANN kernels"), std::string::npos) << why;

  // The machine with a good script is unaffected.
  EXPECT_EQ(h.Cli({"submit", "probe", "--machine", "sim1", "--wait"}).exit_code, 0);
}

TEST(ErrorCauses, AMissingEnvScriptIsNamedWhenNpuSmiIsNotFound) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string missing = h.Dir() + "/no-such-toolkit/set_env.sh";
  AddMachine(h, "noenv", {}, missing);

  const std::string why = FailedRunError(h.Cli({"submit", "probe", "--machine", "noenv", "--wait"}));
  EXPECT_NE(why.find("npu-smi is not on PATH"), std::string::npos) << why;
  EXPECT_NE(why.find("the machine's env script '" + missing + "' does not exist on"), std::string::npos) << why;

  CliResult check = h.Cli({"machine", "check", "noenv"});
  EXPECT_NE(check.exit_code, 0) << check.out << check.err;
  const std::string check_text = check.out + check.err;
  EXPECT_NE(check_text.find("the env script '" + missing + "' does not exist on"), std::string::npos) << check_text;
}

TEST(ErrorCauses, AnNpuSmiThatNeverExitsFailsSayingItTimedOut) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string bin = h.SimRoot() + "/bin/npu-smi";
  fs::remove(bin);
  std::ofstream(bin) << "#!/bin/sh\nexec sleep 600\n";
  ::chmod(bin.c_str(), 0755);
  // The machine's own bound (`machine add --npu-smi-timeout`; 45 s when not
  // given, workers/remote.h) keeps the wait short.
  AddMachine(h, "hung", {". '" + h.SimRoot() + "/set_env.sh'"}, "", "", {"--npu-smi-timeout", "3"});
  const std::string why = FailedRunError(h.Cli({"submit", "probe", "--machine", "hung", "--wait"}, 120));
  EXPECT_NE(why.find("npu-smi info timed out after 3 s"), std::string::npos) << why;
  EXPECT_EQ(why.find("exited -1"), std::string::npos) << why;
}

TEST(ErrorCauses, AFullRuntimeFileSystemIsNamedAndTheLaunchLeavesNothingBehind) {
  EnterPrivateMountNamespace();  // before sshd starts: it must see the mount
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string base = h.Dir() + "/tiny-runtime";
  fs::create_directories(base);
  TmpfsMount m(1, base);
  if (!m.ok()) GTEST_SKIP() << "cannot mount a tmpfs for this test: " << m.error;
  AddMachine(h, "tiny", {". '" + h.SimRoot() + "/set_env.sh'"}, "", base);
  // Room for the launch record, none for the scripts after it.
  m.Fill("filler", 4096);
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  const std::string why = FailedRunError(h.Cli({"submit", "serve", "--machine", "tiny", "--model", model, "--tp", "1",
                                                "--devices", "0", "--health-timeout", "60", "--wait"}));
  EXPECT_NE(why.find("no space left on the target's file system holding " + base), std::string::npos) << why;
  EXPECT_EQ(why.find("sftp status"), std::string::npos) << why;
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(base))
    if (e.is_regular_file() && e.path().filename() != "filler") left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << ::testing::PrintToString(left);
  EXPECT_TRUE(h.LiveServicePids().empty());
}

}  // namespace
}  // namespace npuprof::testing
