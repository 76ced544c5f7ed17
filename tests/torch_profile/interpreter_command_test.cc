// The remote-command layer's interpreter step (profiling/interpreter_command.h,
// RunWithInterpreterIn in workers/remote.h): the wrapped commands run in a
// local sh whose PATH starts with a counting `python3` shim (it logs each
// start and execs the real interpreter), as a pyenv host's would.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "workers/profiling/interpreter_command.h"
#include "workers/profiling/target_interpreter.h"
#include "workers/remote.h"

namespace npuprof::profiling {
namespace {

namespace fs = std::filesystem;
using ssh::testing::LocalRun;
using ssh::testing::RunLocalArgv;

class ShimHost : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("npuprof_interp_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "shim");
    real_ = fs::canonical("/usr/bin/python3").string();
    log_ = (dir_ / "starts.log").string();
    Write(dir_ / "shim" / "python3", "#!/bin/sh\necho start >> '" + log_ + "'\nexec '" + real_ + "' \"$@\"\n");
    path_ = (dir_ / "shim").string() + ":/usr/bin:/bin";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
    ASSERT_EQ(::chmod(p.c_str(), 0755), 0);
  }
  int Starts() const {
    std::ifstream f(log_);
    int n = 0;
    for (std::string l; std::getline(f, l);) ++n;
    return n;
  }
  LocalRun Run(const std::vector<std::string>& argv) { return RunLocalArgv(argv, "", path_); }
  // What RunWithInterpreterIn's runner does, locally.
  Result<ssh::ExecResult> Exec(const std::vector<std::string>& argv) {
    const LocalRun l = Run(argv);
    ssh::ExecResult r;
    r.exit_status = l.status;
    r.stdout_data = l.out;
    r.stderr_data = l.err;
    return r;
  }

  fs::path dir_;
  std::string real_, log_, path_;
};

const std::vector<std::string> kProgram = {"python3", "-c", "import sys; print('ran', sys.argv[1])", "it's x"};

TEST(InterpreterCommand, KnowsWhichCommandsStartPython) {
  EXPECT_TRUE(StartsPython({"python3", "-c", "pass"}));
  EXPECT_TRUE(StartsPython({"sh", "-c", "x=$(\"${NPUPROF_PYTHON:-python3}\" -c pass)"}));
  EXPECT_FALSE(StartsPython({"sh", "-c", "python3 -c pass"}));  // scripts must spell kPythonRef
  EXPECT_FALSE(StartsPython({"npu-smi", "info"}));
  EXPECT_FALSE(StartsPython({}));
}

TEST(InterpreterCommand, TakesItsLinesAndKeepsTheRestOfStderr) {
  std::string err = "warn\n\nnpuprof-python-resolved /opt/py/bin/python3.11\nTraceback\n";
  InterpreterNews n = TakeInterpreterNews(&err);
  EXPECT_EQ(err, "warn\nTraceback\n");
  ASSERT_TRUE(n.resolved);
  EXPECT_EQ(*n.resolved, "/opt/py/bin/python3.11");
  EXPECT_FALSE(n.gone);

  err = "\nnpuprof-python-gone\n\nnpuprof-python-resolved relative/python\n";
  n = TakeInterpreterNews(&err);
  EXPECT_EQ(err, "");
  EXPECT_TRUE(n.gone);
  EXPECT_FALSE(n.resolved);  // not absolute: refused

  err = "plain error";
  n = TakeInterpreterNews(&err);
  EXPECT_EQ(err, "plain error");
  EXPECT_FALSE(n.resolved);
}

TEST_F(ShimHost, AnUnknownMachineAsksTheShimOnceAndTheProgramStartsTheInterpreter) {
  const LocalRun r = Run(InterpreterArgv(kProgram, std::nullopt));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "ran it's x\n");
  EXPECT_EQ(Starts(), 1);  // the resolver only
  std::string err = r.err;
  const InterpreterNews n = TakeInterpreterNews(&err);
  ASSERT_TRUE(n.resolved) << r.err;
  EXPECT_EQ(*n.resolved, real_);
  EXPECT_EQ(err, "");
}

TEST_F(ShimHost, AKnownInterpreterNeverStartsTheShim) {
  LocalRun r = Run(InterpreterArgv(kProgram, real_));
  EXPECT_EQ(r.out, "ran it's x\n");
  EXPECT_EQ(r.err, "");
  // A script spelling kPythonRef, and a detached child of it, get it too.
  r = Run(InterpreterArgv({"sh", "-c",
                           "a=$(\"${NPUPROF_PYTHON:-python3}\" -c 'print(1)'); "
                           "sh -c '\"${NPUPROF_PYTHON:-python3}\" -c \"print(2)\"' & wait; echo \"$a\""},
                          real_));
  EXPECT_EQ(r.out, "2\n1\n");
  EXPECT_EQ(Starts(), 0);
}

TEST_F(ShimHost, AGoneInterpreterIsToldAndResolvedAgainInTheSameCommand) {
  const LocalRun r = Run(InterpreterArgv(kProgram, (dir_ / "gone" / "python3").string()));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "ran it's x\n");
  std::string err = r.err;
  const InterpreterNews n = TakeInterpreterNews(&err);
  EXPECT_TRUE(n.gone);
  ASSERT_TRUE(n.resolved);
  EXPECT_EQ(*n.resolved, real_);
  EXPECT_EQ(Starts(), 1);
}

TEST_F(ShimHost, WithoutAnyPython3TheProgramFailsAsBefore) {
  fs::create_directories(dir_ / "nopy");
  fs::create_symlink("/bin/sh", dir_ / "nopy" / "sh");  // sh only: no python3 on PATH
  const LocalRun r = RunLocalArgv(InterpreterArgv({"sh", "-c", "\"${NPUPROF_PYTHON:-python3}\" -c pass"}, std::nullopt),
                                  "", (dir_ / "nopy").string());
  EXPECT_EQ(r.status, 127);
  std::string err = r.err;
  EXPECT_FALSE(TakeInterpreterNews(&err).resolved);
}

TEST_F(ShimHost, TheCacheLearnsOnceAndForgetsAPathThatNoLongerStarts) {
  TargetInterpreters cache;
  const std::string key = InterpreterKey("u@h:22", "");
  auto run = [this](const std::vector<std::string>& argv) { return Exec(argv); };

  auto r = workers::RunWithInterpreterIn(cache, key, kProgram, run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "ran it's x\n");
  EXPECT_EQ(r->stderr_data, "");
  EXPECT_EQ(cache.Get(key), real_);
  r = workers::RunWithInterpreterIn(cache, key, kProgram, run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "ran it's x\n");
  EXPECT_EQ(Starts(), 1);

  // An executable file that does not start the program (exit 127, nothing
  // printed): forgotten, and the command runs once more as python3.
  const std::string broken = (dir_ / "broken-python").string();
  Write(broken, "#!/bin/sh\nexit 127\n");
  cache.Put(key, broken);
  r = workers::RunWithInterpreterIn(cache, key, kProgram, run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_EQ(r->stdout_data, "ran it's x\n");
  EXPECT_EQ(cache.Get(key), real_);
  EXPECT_EQ(Starts(), 2);

  // A removed one: told by the wrapper, replaced within the one command.
  cache.Put(key, (dir_ / "removed").string());
  r = workers::RunWithInterpreterIn(cache, key, kProgram, run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "ran it's x\n");
  EXPECT_EQ(cache.Get(key), real_);
  EXPECT_EQ(Starts(), 3);
}

}  // namespace
}  // namespace npuprof::profiling
