// The one-command first launch (workers/handlers/launch_in_one.h): its
// output parser over good and malformed outputs, and the command run locally
// with /bin/sh in a runtime dir: the first run publishes the record, writes
// the scripts and starts the played service; a re-delivered run with the
// same record adopts it and leaves the scripts alone; a run whose record is
// not the one in force prints that record and changes nothing; a stdin
// shorter than announced writes nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/launch_in_one.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;

TEST(LaunchInOne, ParsesBothFormsAndSkipsAnEnvScriptsBanner) {
  auto o = ParseLaunchInOne("own-record\nstarted 123 alive\n");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->own_record);
  EXPECT_EQ(o->start_line, "started 123 alive\n");
  o = ParseLaunchInOne("Welcome to CANN\nown-record\nadopted 9 dead\n");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->own_record);
  EXPECT_EQ(o->start_line, "adopted 9 dead\n");
  o = ParseLaunchInOne("other-record\n{\"port\": 1}\n");
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->own_record);
  EXPECT_EQ(o->record, "{\"port\": 1}\n");
  for (const char* bad : {"", "own-record", "started 1 alive\n", "xown-record\n", "own-records\n", "\xff\xfe\n"}) {
    auto b = ParseLaunchInOne(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), Code::kCorruption);
    EXPECT_NE(b.status().message().find("not own-record or other-record"), std::string::npos);
  }
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Launched {
  ssh::testing::LocalRun run;
  Result<LaunchInOneOutput> out = Status::Internal("not run");
};

Launched RunLaunch(const std::string& rt, uint32_t attempt, const std::string& rec, const std::string& serve,
                   const std::string& start, size_t announced_extra = 0, LaunchTexts from = LaunchTexts::kStdin) {
  Launched l;
  const auto argv =
      LaunchInOneArgv(rt, attempt, rec.size(), serve.size(), start.size() + announced_extra, 1 << 20, "r1/service-1",
                      from);
  if (from == LaunchTexts::kStdin) {
    l.run = ssh::testing::RunLocalArgv(argv, rec + serve + start);
  } else {
    // As the command shell runs it: the texts exported by the command itself, nothing on stdin.
    auto script = ssh::BuildRemoteScriptChecked("", LaunchInOneEnv(rec, serve, start), argv);
    EXPECT_TRUE(script.ok());
    l.run = ssh::testing::RunLocalArgv({"sh", "-c", *script}, "");
  }
  l.out = ParseLaunchInOne(l.run.out);
  return l;
}

class LaunchInOneFrom : public ::testing::TestWithParam<LaunchTexts> {};

bool NoTempFiles(const std::string& rt) {
  for (const auto& e : fs::directory_iterator(rt))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

TEST_P(LaunchInOneFrom, StartsOnceAdoptsOnRedeliveryAndYieldsToTheRecordInForce) {
  const LaunchTexts from = GetParam();
  npuprof::testing::TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  const std::string rec = "{\"port\": 8000}\n";
  const std::string serve = "exec sleep 60\n";
  // The played _start.sh: the marker's assignment (so it is judged by marker), its pid, then a sleep.
  const std::string start = "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\nprintf '%s' $$ > pid\nexec sleep 60\n";

  Launched first = RunLaunch(rt, 1, rec, serve, start, 0, from);
  ASSERT_EQ(first.run.status, 0) << first.run.err;
  ASSERT_TRUE(first.out.ok()) << first.run.out;
  ASSERT_TRUE(first.out->own_record);
  std::istringstream words(first.out->start_line);
  std::string how, state;
  pid_t pid = 0;
  words >> how >> pid >> state;
  ASSERT_GT(pid, 0) << first.out->start_line;
  EXPECT_EQ(how, "started");
  EXPECT_EQ(state, "alive");
  EXPECT_EQ(Slurp(rt + "/launch.json"), rec);
  EXPECT_EQ(Slurp(rt + "/_serve.sh"), serve);
  EXPECT_EQ(Slurp(rt + "/_start.sh"), start);
  struct stat st{};
  ASSERT_EQ(stat((rt + "/_start.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((rt + "/launch.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(fs::exists(rt + "/.started"));
  EXPECT_TRUE(NoTempFiles(rt));
  // The texts (user env values) are not handed down to the service.
  const std::string environ = Slurp("/proc/" + std::to_string(pid) + "/environ");
  EXPECT_NE(environ.find("NPUPROF_SERVICE=r1/service-1"), std::string::npos);
  EXPECT_EQ(environ.find("NPUPROF_LAUNCH_"), std::string::npos);

  // Re-delivered with the same record: adopted, and the scripts are not rewritten.
  Launched again = RunLaunch(rt, 2, rec, "exec false\n", start, 0, from);
  ASSERT_TRUE(again.out.ok()) << again.run.out << again.run.err;
  EXPECT_TRUE(again.out->own_record);
  EXPECT_EQ(again.out->start_line, "adopted " + std::to_string(pid) + " alive\n");
  EXPECT_EQ(Slurp(rt + "/_serve.sh"), serve);
  EXPECT_TRUE(NoTempFiles(rt));

  // Another attempt's record in force: printed, nothing else done.
  Launched other = RunLaunch(rt, 3, "{\"port\": 9000}\n", serve, start, 0, from);
  ASSERT_EQ(other.run.status, 0) << other.run.err;
  ASSERT_TRUE(other.out.ok()) << other.run.out;
  EXPECT_FALSE(other.out->own_record);
  EXPECT_EQ(other.out->record, rec);
  EXPECT_TRUE(NoTempFiles(rt));

  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(StdinAndEnv, LaunchInOneFrom, ::testing::Values(LaunchTexts::kStdin, LaunchTexts::kEnv));

TEST(LaunchInOne, AnEnvTextOfAnotherSizeThanAnnouncedWritesNothing) {
  npuprof::testing::TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  Launched l = RunLaunch(rt, 1, "{}\n", "s\n", "t\n", /*announced_extra=*/5, LaunchTexts::kEnv);
  EXPECT_EQ(l.run.status, 5) << l.run.out << l.run.err;
  EXPECT_EQ(l.run.out, "");
  EXPECT_FALSE(fs::exists(rt + "/launch.json"));
  EXPECT_TRUE(NoTempFiles(rt));
}

TEST(LaunchInOne, AStdinShorterThanAnnouncedWritesNothing) {
  npuprof::testing::TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  Launched l = RunLaunch(rt, 1, "{}\n", "s\n", "t\n", /*announced_extra=*/5);
  EXPECT_EQ(l.run.status, 5) << l.run.out << l.run.err;
  EXPECT_EQ(l.run.out, "");
  EXPECT_FALSE(fs::exists(rt + "/launch.json"));
  EXPECT_FALSE(fs::exists(rt + "/.started"));
  EXPECT_TRUE(NoTempFiles(rt));
}

}  // namespace
}  // namespace npuprof::workers::service
