// Safe on a shared NPU host, end to end (`npuprof server` + local workers,
// loopback sshd, simulated target): the default runtime base is private under
// the SSH user's home, vLLM listens on loopback, files planted in the runtime
// base (another user's launch record, symbolic links) are not followed — the
// launch fails clearly, says the service was never launched and stops
// nothing — and a pid file naming a process that is not the service's never
// gets that process signalled.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::perms Mode(const std::string& p) { return fs::symlink_status(p).permissions() & fs::perms::all; }

class SharedHostE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
    ASSERT_FALSE(model_.empty());
    base_ = h_.Dir() + "/runtime";
    fs::create_directories(base_);
    fs::permissions(base_, fs::perms::owner_all);
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    if (sleeper_ > 0) {
      kill(sleeper_, SIGKILL);
      waitpid(sleeper_, nullptr, 0);
    }
    h_.Stop();
    std::error_code ec;
    for (const auto& d : home_dirs_) {
      fs::remove_all(d, ec);
      // The base and its parent too when this test made them and nothing else is in them.
      for (fs::path up = fs::path(d).parent_path(); made_base_ && up.filename() != ".cache"; up = up.parent_path())
        if (!fs::remove(up, ec)) break;
    }
  }
  // A serve run with a chosen id on device 0, waited for; returns its summary.
  json Serve(const std::string& run_id, const std::string& machine = "sim1") {
    runs_.push_back(run_id);
    CliResult r = h_.Cli({"submit", "serve", "--machine", machine, "--model", model_, "--served-model-name", "m",
                          "--devices", "0", "--run-id", run_id, "--health-timeout", "60", "--wait"});
    json s = h_.Cli({"show", run_id}).json();
    EXPECT_TRUE(s.is_object()) << r.out << r.err;
    return s;
  }
  json Events(const std::string& run) {
    json ev = h_.Cli({"events", run, "--json"}).json();
    return ev.is_array() ? ev : ev.value("events", json::array());
  }
  bool StopWasScheduled(const std::string& run) {
    for (const auto& e : Events(run))
      if (e.value("type", "") == "TaskScheduled" && e["payload"].value("kind", "") == "service.stop") return true;
    return false;
  }
  // Expects the run failed at launch, before anything started, with `reason` in its error.
  void ExpectNeverLaunched(const json& s, const std::string& reason) {
    EXPECT_EQ(s.value("status", ""), "failed") << s.dump(2);
    const std::string err = s.value("error", "");
    EXPECT_NE(err.find(reason), std::string::npos) << err;
    EXPECT_NE(err.find("the service was never launched"), std::string::npos) << err;
    EXPECT_EQ(err.find("may still be running"), std::string::npos) << err;
    EXPECT_FALSE(StopWasScheduled(s.value("run_id", "")));
    EXPECT_EQ(s["devices_lease"].value("phase", ""), "released");
    EXPECT_TRUE(h_.LiveServicePids().empty());
    EXPECT_TRUE(h_.SimTruthFiles().empty());  // no vLLM ever started
  }

  NpuprofHarness h_;
  std::string model_, base_;
  std::vector<std::string> runs_, home_dirs_;
  pid_t sleeper_ = -1;
  bool made_base_ = false;
};

TEST_F(SharedHostE2E, DefaultRuntimeBaseIsPrivateUnderTheHomeAndVllmListensOnLoopback) {
  // The same target as sim1, added without --runtime-base.
  CliResult add = h_.Cli({"machine", "add", "home1", "--host", "127.0.0.1", "--port", std::to_string(h_.sshd().port()),
                          "--user", h_.sshd().user(), "--identity", h_.sshd().identity_file(), "--known-hosts",
                          h_.sshd().known_hosts_file(), "--env-script", h_.SimRoot() + "/set_env.sh"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(add.json().value("runtime_base", ""), "~/.cache/npuprof/runtime") << add.out;
  const std::string home = h_.sshd().home_dir();  // the target user's $HOME over SSH
  const std::string run = "shared-host-home-" + std::to_string(getpid());
  const std::string run_dir = home + "/.cache/npuprof/runtime/" + run;
  made_base_ = !fs::exists(home + "/.cache/npuprof");
  home_dirs_.push_back(run_dir);
  json s = Serve(run, "home1");
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  const std::string rt = s["service"].value("runtime_dir", "");
  EXPECT_EQ(rt, run_dir + "/service-1");  // resolved on the target, recorded absolute
  EXPECT_EQ(Mode(run_dir), fs::perms::owner_all);
  EXPECT_EQ(Mode(rt), fs::perms::owner_all);
  EXPECT_EQ(Mode(rt + "/launch.json"), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(Mode(rt + "/_serve.sh"), fs::perms::owner_all);
  EXPECT_EQ(Mode(rt + "/_start.sh"), fs::perms::owner_all);
  EXPECT_EQ(Mode(rt + "/stdout.log"), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_NE(ReadAll(rt + "/_serve.sh").find(" --host 127.0.0.1 "), std::string::npos) << ReadAll(rt + "/_serve.sh");
  // The service carries its marker (what stop checks before signalling).
  const pid_t pid = s["service"].value("pid", 0);
  const std::string env = ReadAll("/proc/" + std::to_string(pid) + "/environ");
  EXPECT_NE(env.find(std::string("\0NPUPROF_SERVICE=", 17) + run + "/service-1" + std::string("\0", 1)),
            std::string::npos);
  CliResult stop = h_.Cli({"stop", run, "--wait"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_EQ(h_.Cli({"show", run}).json().value("status", ""), "ok");
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(SharedHostE2E, PlantedLaunchRecordsAndSymlinksAreNotFollowed) {
  if (getuid() != 0) GTEST_SKIP() << "planting a file owned by another user needs root";
  const std::string elsewhere = h_.Dir() + "/elsewhere";
  fs::create_directories(elsewhere);
  const std::string bait = json{{"port", 1}, {"devices", {0}}, {"argv", {"vllm", "serve", "/x"}}}.dump();
  std::ofstream(elsewhere + "/launch.json") << bait;

  // 1. Another user's launch.json in the run's runtime dir.
  {
    const std::string rt = base_ + "/planted-owner/service-1";
    fs::create_directories(rt);
    fs::permissions(base_ + "/planted-owner", fs::perms::owner_all);
    fs::permissions(rt, fs::perms::owner_all);
    std::ofstream(rt + "/launch.json") << bait;
    ASSERT_EQ(chown((rt + "/launch.json").c_str(), 65534, 65534), 0);
    json s = Serve("planted-owner");
    ExpectNeverLaunched(s, "launch.json is owned by uid 65534");
    EXPECT_FALSE(fs::exists(rt + "/_serve.sh"));
    EXPECT_FALSE(fs::exists(rt + "/.started"));
  }
  // 2. The run's dir is a symbolic link to somewhere else.
  {
    fs::create_directory_symlink(elsewhere, base_ + "/planted-link");
    json s = Serve("planted-link");
    ExpectNeverLaunched(s, base_ + "/planted-link is a symbolic link");
    EXPECT_FALSE(fs::exists(elsewhere + "/service-1"));
  }
  // 3. launch.json is a symbolic link to a record somebody else wrote.
  {
    const std::string rt = base_ + "/planted-record-link/service-1";
    fs::create_directories(rt);
    fs::permissions(base_ + "/planted-record-link", fs::perms::owner_all);
    fs::create_symlink(elsewhere + "/launch.json", rt + "/launch.json");
    json s = Serve("planted-record-link");
    ExpectNeverLaunched(s, "launch.json is a symbolic link");
    EXPECT_FALSE(fs::exists(rt + "/_serve.sh"));
  }
  // Nothing was written through any link.
  EXPECT_EQ(ReadAll(elsewhere + "/launch.json"), bait);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(elsewhere)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"launch.json"});
  CliResult v = h_.Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// A launch record of the user's own that another process edited (a device
// id that is text) is bytes from the target: the launch refuses it naming
// the file and the key, starts nothing and says so, and the run ends failed
// with the devices released (before, the start scripts' builder threw).
TEST_F(SharedHostE2E, AnEditedLaunchRecordIsRefusedNamingTheKeyAndNothingStarts) {
  const std::string run = "edited-record";
  const std::string rt = base_ + "/" + run + "/service-1";
  fs::create_directories(rt);
  fs::permissions(base_ + "/" + run, fs::perms::owner_all);
  fs::permissions(rt, fs::perms::owner_all);
  const json edited = {{"run_id", run}, {"launch_no", 1}, {"runtime_dir", rt}, {"model", model_},
                       {"tp", 1}, {"dp", 1}, {"devices", {"zero"}}, {"port", 18123},
                       {"env", json::object()}, {"extra_args", json::array()}};
  std::ofstream(rt + "/launch.json") << edited.dump();
  fs::permissions(rt + "/launch.json", fs::perms::owner_read | fs::perms::owner_write);
  json s = Serve(run);
  ExpectNeverLaunched(s, rt + "/launch.json does not read as a launch record");
  EXPECT_NE(s.value("error", "").find("devices"), std::string::npos) << s.dump(2);
  EXPECT_FALSE(fs::exists(rt + "/_serve.sh"));
  EXPECT_FALSE(fs::exists(rt + "/.started"));
}

TEST_F(SharedHostE2E, APidFileNamingAnotherProcessNeverGetsItSignalled) {
  // A process of the test's own in its own process group: what a stale pid
  // file names once the service is gone and the kernel reused its pid.
  sleeper_ = fork();
  if (sleeper_ == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(sleeper_, 0);
  setpgid(sleeper_, sleeper_);
  // The run's runtime dir as a launch that started, recorded that pid and died would leave it.
  const std::string run = "planted-pid";
  const std::string rt = base_ + "/" + run + "/service-1";
  fs::create_directories(rt + "/.started");
  fs::permissions(base_ + "/" + run, fs::perms::owner_all);
  fs::permissions(rt, fs::perms::owner_all);
  std::ofstream(rt + "/pid") << sleeper_ << "\n";
  std::ofstream(rt + "/launch.json")
      << json{{"run_id", run}, {"launch_no", 1}, {"runtime_dir", rt}, {"model", model_}, {"served_model_name", "m"},
              {"tp", 1}, {"dp", 1}, {"devices", {0}}, {"port", FreeLoopbackPort()}, {"env", json::object()},
              {"extra_args", json::array()}, {"wrap_script", nullptr}, {"argv", {"vllm", "serve", model_}}}
             .dump();
  json s = Serve(run);
  EXPECT_EQ(s.value("status", ""), "failed") << s.dump(2);
  EXPECT_NE(s.value("error", "").find("the pid now belongs to another process"), std::string::npos)
      << s.value("error", "");
  const json svc = s["service"];
  EXPECT_EQ(svc.value("pid", 0), sleeper_);
  EXPECT_EQ(svc.value("adopted", false), true);
  // The cleanup stop ran (forced), saw the pid is not the service's, and sent nothing.
  const json stop = svc.value("stop_result", json::object());
  EXPECT_EQ(stop.value("already_gone", false), true) << stop.dump();
  EXPECT_EQ(stop.value("signals", json::array()), json::array()) << stop.dump();
  EXPECT_NE(stop.value("not_ours", "").find("reused by another process"), std::string::npos) << stop.dump();
  EXPECT_EQ(waitpid(sleeper_, nullptr, WNOHANG), 0);  // still running, never signalled
  EXPECT_EQ(kill(sleeper_, 0), 0);
}

}  // namespace
}  // namespace npuprof::testing
