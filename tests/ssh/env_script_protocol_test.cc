// The machine's env script, sourced by the command shell's driver and by
// BuildRemoteScript's prefix (workers/ssh/env_script_protocol.h): a script
// that exits or returns a status other than 0 is reported with its status
// and stderr (it used to be silent, and the command then ran without its
// environment); a good one and a missing one behave as before. The scripts
// run under local shells (dash as /bin/sh, and bash); no SSH involved.
#include "workers/ssh/env_script_protocol.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/ssh/command_shell_protocol.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh {
namespace {

using npuprof::testing::TempDir;

std::string WriteScript(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string p = dir + "/" + name;
  std::ofstream(p) << body;
  return p;
}

TEST(EnvScriptProtocol, FailuresAreFoundInTheDriverOutputOnlyWhenComplete) {
  const std::string n = "feedface";
  const std::string out = "rc noise\n\n" + n + ":env\nno toolkit here\nsecond line\n\n" + n + ":env-exit:1\n";
  auto f = FindEnvScriptFailure(out, n);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->exited);
  EXPECT_EQ(f->status, 1);
  EXPECT_EQ(f->stderr_tail, "no toolkit here\nsecond line");
  EXPECT_FALSE(FindEnvScriptFailure(out.substr(0, out.size() - 1), n)) << "cut before its newline";
  EXPECT_FALSE(FindEnvScriptFailure("\n" + n + ":env\n\n" + n + ":4242\n", n)) << "sourced fine: a ready line";
  auto ret = FindEnvScriptFailure("\n" + n + ":env\n\n" + n + ":env-status:3\n", n);
  ASSERT_TRUE(ret);
  EXPECT_FALSE(ret->exited);
  EXPECT_EQ(ret->status, 3);
  EXPECT_EQ(ret->stderr_tail, "");
  EXPECT_FALSE(FindEnvScriptFailure("\n" + n + ":env\n\n" + n + ":env-status:999\n", n)) << "no exit status";
  // Only the end of a long stderr is kept.
  auto big = FindEnvScriptFailure("\n" + n + ":env\n" + std::string(10000, 'x') + "END\n\n" + n + ":env-exit:2\n", n);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->stderr_tail.size(), kEnvScriptShownBytes);
  EXPECT_EQ(big->stderr_tail.substr(big->stderr_tail.size() - 3), "END");
}

TEST(EnvScriptProtocol, TheMessageNamesScriptStatusEndpointAndStderr) {
  EnvScriptFailure f{true, 1, "set_env: no driver"};
  EXPECT_EQ(DescribeEnvScriptFailure(f, "/opt/set_env.sh", "u@h:22"),
            "the env script '/opt/set_env.sh' exited 1 on u@h:22 before any command could run; its stderr: set_env: "
            "no driver");
  f = {false, 2, ""};
  EXPECT_EQ(DescribeEnvScriptFailure(f, "/opt/set_env.sh", "u@h:22"),
            "the env script '/opt/set_env.sh' returned 2 on u@h:22 (sourcing it must end with status 0), so no "
            "command ran; it printed nothing on stderr");
}

class EnvScriptShellTest : public ::testing::TestWithParam<std::string> {
 protected:
  // The driver on no frames: its output up to its end.
  testing::LocalRun Driver(const std::string& env) {
    return testing::RunLocalArgv({GetParam(), "-c", CommandShellDriver("feedface", env)}, "");
  }
  testing::LocalRun Prefixed(const std::string& env, const std::vector<std::string>& argv) {
    return testing::RunLocalArgv({GetParam(), "-c", BuildRemoteScript(env, {}, argv)}, "");
  }
  TempDir dir_;
};

TEST_P(EnvScriptShellTest, AScriptThatExitsIsReportedByDriverAndPrefix) {
  const std::string env = WriteScript(dir_.path, "env.sh", "echo out-noise\necho 'no Ascend driver' >&2\nexit 4\n");
  const testing::LocalRun d = Driver(env);
  EXPECT_FALSE(FindShellReady(d.out, "feedface")) << d.out;
  auto f = FindEnvScriptFailure(d.out, "feedface");
  ASSERT_TRUE(f) << d.out;
  EXPECT_TRUE(f->exited);
  EXPECT_EQ(f->status, 4);
  EXPECT_EQ(f->stderr_tail, "no Ascend driver");

  const testing::LocalRun p = Prefixed(env, {"echo", "ran"});
  EXPECT_EQ(p.out, "") << "the command did not run";
  auto g = FindEnvScriptFailureInStderr(p.err);
  ASSERT_TRUE(g) << p.err;
  EXPECT_TRUE(g->exited);
  EXPECT_EQ(g->status, 4);
  EXPECT_EQ(g->stderr_tail, "no Ascend driver");
}

TEST_P(EnvScriptShellTest, AScriptThatReturnsNonZeroIsReportedByDriverAndPrefix) {
  const std::string env = WriteScript(dir_.path, "env.sh", "export X=1\necho 'warning: old CANN' >&2\nfalse\n");
  const testing::LocalRun d = Driver(env);
  EXPECT_FALSE(FindShellReady(d.out, "feedface")) << d.out;
  auto f = FindEnvScriptFailure(d.out, "feedface");
  ASSERT_TRUE(f) << d.out;
  EXPECT_FALSE(f->exited);
  EXPECT_EQ(f->status, 1);
  EXPECT_EQ(f->stderr_tail, "warning: old CANN");

  const testing::LocalRun p = Prefixed(env, {"echo", "ran"});
  EXPECT_EQ(p.out, "");
  EXPECT_EQ(p.status, 125);
  auto g = FindEnvScriptFailureInStderr(p.err);
  ASSERT_TRUE(g) << p.err;
  EXPECT_FALSE(g->exited);
  EXPECT_EQ(g->status, 1);
}

TEST_P(EnvScriptShellTest, AGoodScriptAndAMissingOneLeaveCommandsAsBefore) {
  const std::string env = WriteScript(dir_.path, "env.sh", "export FROM_ENV=yes\necho noise\n");
  const testing::LocalRun d = Driver(env);
  EXPECT_TRUE(FindShellReady(d.out, "feedface")) << d.out;
  EXPECT_FALSE(FindEnvScriptFailure(d.out, "feedface"));
  const testing::LocalRun p = Prefixed(env, {"sh", "-c", "printf %s \"$FROM_ENV\""});
  EXPECT_EQ(p.out, "yes");
  EXPECT_EQ(p.status, 0);
  EXPECT_FALSE(FindEnvScriptFailureInStderr(p.err));

  const std::string missing = dir_.path + "/missing.sh";
  EXPECT_TRUE(FindShellReady(Driver(missing).out, "feedface"));
  const testing::LocalRun m = Prefixed(missing, {"echo", "ok"});
  EXPECT_EQ(m.out, "ok\n");
  EXPECT_EQ(m.status, 0);
}

INSTANTIATE_TEST_SUITE_P(Shells, EnvScriptShellTest, ::testing::Values("sh", "bash"));

}  // namespace
}  // namespace npuprof::ssh
