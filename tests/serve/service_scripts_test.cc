// The generated _serve.sh / _start.sh and the helper scripts, run locally
// with a fake `vllm` that prints what it received: every token arrives
// exactly as given, nothing is interpreted by the shell. The service marker
// decides what may be signalled; the runtime dir script creates private
// dirs and refuses links, foreign owners and writable dirs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "workers/handlers/service_runtime_dir.h"
#include "workers/handlers/service_scripts.h"
#include "workers/ssh/shell_quote.h"
#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;

std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

using TempDir = npuprof::testing::TempDir;

json Record(const std::string& dir) {
  return json{{"run_id", "r1"},
              {"launch_no", 1},
              {"runtime_dir", dir + "/r1/service-1"},
              {"model", dir + "/my model's dir"},
              {"served_model_name", "srv"},
              {"tp", 2},
              {"dp", 1},
              {"devices", {4, 5}},
              {"port", 18123},
              {"env", {{"X_VAL", "$(touch " + dir + "/pwned) `id` ; \"q\" 'q'"}}},
              {"extra_args", {"--compilation-config", "{\"cudagraph_mode\": \"PIECEWISE\"}", "$HOME"}},
              {"wrap_script", nullptr},
              {"env_script", dir + "/env.sh"}};
}

TEST(ServiceScripts, ServeArgv) {
  json r = Record("/d");
  auto argv = ServeArgv(r);
  std::vector<std::string> want = {"vllm", "serve", "/d/my model's dir", "--host", "127.0.0.1", "--port", "18123",
                                   "--served-model-name", "srv", "--tensor-parallel-size", "2",
                                   "--compilation-config", "{\"cudagraph_mode\": \"PIECEWISE\"}", "$HOME"};
  EXPECT_EQ(argv, want);
  r["dp"] = 2;
  r["served_model_name"] = nullptr;
  argv = ServeArgv(r);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--data-parallel-size"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--served-model-name"), 0);
  // The spec's host (a managed flag) replaces the loopback bind.
  r["host"] = "0.0.0.0";
  argv = ServeArgv(r);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--host"), 1);
  EXPECT_EQ(argv[4], "0.0.0.0");
  // A record written before the host was a spec field could carry it among
  // the extra args: then it is left to them, as it was.
  r.erase("host");
  r["extra_args"] = {"--host", "0.0.0.0"};
  argv = ServeArgv(r);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--host"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "127.0.0.1"), 0);
  EXPECT_EQ(argv.back(), "0.0.0.0");
  r["extra_args"] = {"--host=::1"};
  argv = ServeArgv(r);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--host"), 0);
  EXPECT_EQ(argv.back(), "--host=::1");
}

TEST(ServiceScripts, ServiceMarkerIsRunAndLaunch) {
  auto m = ServiceMarker("/home/u/.cache/npuprof/runtime/r20250101-ab/service-2/");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, "r20250101-ab/service-2");
  for (const char* bad : {"", "/", "/service-1", "/a/b", "/a/service-", "/a/service-1x", "/../service-1", "rt"})
    EXPECT_FALSE(ServiceMarker(bad).ok()) << bad;
}

TEST(ServiceScripts, ServeScriptPassesEveryTokenVerbatim) {
  TempDir t;
  fs::create_directories(t.path + "/r1/service-1");
  fs::create_directories(t.path + "/bin");
  // The env script puts the fake vllm first on PATH, as the Ascend one would.
  std::ofstream(t.path + "/env.sh") << "export PATH=" << ssh::ShellQuote(t.path + "/bin") << ":$PATH\n";
  std::ofstream(t.path + "/bin/vllm") << "#!/bin/sh\necho \"DEV=$ASCEND_RT_VISIBLE_DEVICES\"\necho \"X=$X_VAL\"\n"
                                         "for a in \"$@\"; do echo \"ARG=$a\"; done\n";
  fs::permissions(t.path + "/bin/vllm", fs::perms::owner_all);
  json r = Record(t.path);
  auto script = ServeScript(r);
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  std::ofstream(t.path + "/r1/service-1/_serve.sh") << *script;
  const std::string out = Shell("bash " + ssh::ShellQuote(t.path + "/r1/service-1/_serve.sh"));
  std::string want = "DEV=4,5\nX=" + r["env"]["X_VAL"].get<std::string>() + "\n";
  for (size_t i = 1; i < ServeArgv(r).size(); ++i) want += "ARG=" + ServeArgv(r)[i] + "\n";
  EXPECT_EQ(out, want);
  EXPECT_FALSE(fs::exists(t.path + "/pwned"));
}

TEST(ServiceScripts, StartOrAdoptStartsOnceInItsOwnProcessGroupWithTheMarker) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  json r = Record(t.path);
  r["runtime_dir"] = rt;
  std::ofstream(rt + "/_serve.sh") << "exec sleep 30\n";
  auto start = StartScript(r);
  ASSERT_TRUE(start.ok());
  EXPECT_NE(start->find("NPUPROF_SERVICE=r1/service-1"), std::string::npos) << *start;
  std::ofstream(rt + "/_start.sh") << *start;
  auto cmd = [&](const std::vector<std::string>& argv) { return Shell(ssh::BuildCommand(argv)); };
  const std::string first = cmd(StartOrAdoptArgv(rt, "r1/service-1"));
  const std::string second = cmd(StartOrAdoptArgv(rt, "r1/service-1"));
  ASSERT_EQ(first.rfind("started ", 0), 0u) << first;
  ASSERT_EQ(second.rfind("adopted ", 0), 0u) << second;
  EXPECT_NE(first.find(" alive"), std::string::npos) << first;
  const int64_t pid = std::atoll(first.c_str() + 8);
  EXPECT_EQ(first.substr(8), second.substr(8));
  EXPECT_EQ(getpgid(static_cast<pid_t>(pid)), pid);  // its own process group
  // The marker is in the service's environment; its logs are private.
  std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
  const std::string environ((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
  EXPECT_NE(environ.find(std::string("\0NPUPROF_SERVICE=r1/service-1\0", 30)), std::string::npos);
  EXPECT_EQ(fs::status(rt + "/stdout.log").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  // Another launch's marker does not adopt it.
  EXPECT_NE(cmd(StartOrAdoptArgv(rt, "r1/service-2")).find(" foreign"), std::string::npos);
  auto st = ParseGroupStatus(cmd(GroupStatusArgv(pid, "r1/service-1", rt)));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->leader_alive);
  EXPECT_GE(st->members, 1);
  auto sent = ParseGroupStatus(cmd(SignalGroupArgv("TERM", pid, "r1/service-1", rt)));
  ASSERT_TRUE(sent.ok());
  EXPECT_TRUE(sent->signalled);
  for (int i = 0; i < 50 && st.ok() && st->any_alive(); ++i) {
    usleep(100000);
    st = ParseGroupStatus(cmd(GroupStatusArgv(pid, "r1/service-1", rt)));
  }
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->any_alive());
}

TEST(ServiceScripts, TheScriptsComeOnStdinAreWrittenOnlyBeforeTheStartAndWholeOrNotAtAll) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  const std::string serve = "exec sleep 30 # it's $HOME `x` \xff\n", start = "#!/bin/sh\nexec sh _serve.sh\n";
  auto write = [&](const std::string& a, const std::string& b) {
    return ssh::testing::RunLocalArgv(WriteScriptsArgv(rt, a.size(), b.size()), a + b);
  };
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  // _serve.sh cannot be written (a directory is in its place): exit 7.
  fs::create_directories(rt + "/_serve.sh");
  EXPECT_EQ(write(serve, start).status, kScriptsNotWrittenExit);
  fs::remove(rt + "/_serve.sh");
  // Fewer bytes than announced (a cut stdin): not written whole, exit 7.
  EXPECT_EQ(ssh::testing::RunLocalArgv(WriteScriptsArgv(rt, serve.size(), start.size()), serve).status,
            kScriptsNotWrittenExit);
  auto ok = write(serve, start);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(read(rt + "/_serve.sh"), serve);
  EXPECT_EQ(read(rt + "/_start.sh"), start);
  EXPECT_EQ(fs::status(rt + "/_serve.sh").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status(rt + "/_start.sh").permissions() & fs::perms::all, fs::perms::owner_all);
  // Once started, the scripts stay as they are.
  fs::create_directories(rt + "/.started");
  ASSERT_EQ(write("exec sleep 1\n", start).status, 0);
  EXPECT_EQ(read(rt + "/_serve.sh"), serve);
}

TEST(ServiceScripts, PublishRecordWritesPrivatelyTheFirstWriterWinsAndPrintsTheRecordInForce) {
  TempDir t;
  const std::string rt = t.path + "/rt";
  fs::create_directories(rt);
  auto publish = [&](const std::string& dir, uint32_t attempt, const std::string& text, size_t max) {
    return ssh::testing::RunLocalArgv(PublishRecordArgv(dir, attempt, max), text);
  };
  const std::string a = "{\"who\": \"first\", \"q\": \"it's $HOME `x`\"}\n";
  EXPECT_EQ(publish(rt, 1, a, 1 << 20).out, a);
  EXPECT_EQ(fs::status(rt + "/launch.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(publish(rt, 2, "{\"who\": \"second\"}\n", 1 << 20).out, a);  // the record in force
  EXPECT_FALSE(fs::exists(rt + "/launch.json.tmp-1"));
  EXPECT_FALSE(fs::exists(rt + "/launch.json.tmp-2"));
  EXPECT_EQ(publish(rt, 3, "{}", 5).out, a.substr(0, 5));  // at most max bytes
  // A symlink in the record's place is no record: nothing is printed.
  const std::string rt2 = t.path + "/rt2";
  fs::create_directories(rt2);
  fs::create_symlink(rt + "/launch.json", rt2 + "/launch.json");
  auto refused = publish(rt2, 1, "{}", 1 << 20);
  EXPECT_EQ(refused.status, 6);
  EXPECT_EQ(refused.out, "");
}

// A process of the test's own, in its own process group, without the marker:
// what a pid file names once the service is gone and its pid was reused.
// empty_env: started with no environment at all (reads like a process
// caught mid-exec, until the check gives up on it).
pid_t StartForeignSleeper(bool empty_env = false) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
    char* const no_env[] = {nullptr};
    if (empty_env) execve("/bin/sleep", argv, no_env);
    else execv("/bin/sleep", argv);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

bool Alive(pid_t pid) {
  if (waitpid(pid, nullptr, WNOHANG) != 0) return false;
  return kill(pid, 0) == 0;
}

TEST(ServiceScripts, APidWithoutTheMarkerIsNeverSignalled) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  std::ofstream(rt + "/_start.sh") << "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
  const pid_t foreign = StartForeignSleeper();
  ASSERT_GT(foreign, 0);
  fs::create_directory(rt + "/.started");
  std::ofstream(rt + "/pid") << foreign << "\n";
  auto cmd = [&](const std::vector<std::string>& argv) { return Shell(ssh::BuildCommand(argv)); };
  EXPECT_EQ(cmd(StartOrAdoptArgv(rt, "r1/service-1")), "adopted " + std::to_string(foreign) + " foreign\n");
  auto st = ParseGroupStatus(cmd(GroupStatusArgv(foreign, "r1/service-1", rt)));
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->leader_alive);
  EXPECT_TRUE(st->leader_foreign);
  EXPECT_EQ(st->members, 0);
  EXPECT_FALSE(st->any_alive());
  for (const char* sig : {"INT", "TERM", "KILL"}) {
    auto sent = ParseGroupStatus(cmd(SignalGroupArgv(sig, foreign, "r1/service-1", rt)));
    ASSERT_TRUE(sent.ok());
    EXPECT_FALSE(sent->signalled) << sig;
  }
  EXPECT_TRUE(Alive(foreign));  // nothing was sent (kill(2) delivers before it returns)
  // A runtime dir whose _start.sh predates markers is judged by pid alone, as before.
  std::ofstream(rt + "/_start.sh", std::ios::trunc) << "echo $$ > pid\nexec bash _serve.sh\n";
  st = ParseGroupStatus(cmd(GroupStatusArgv(foreign, "r1/service-1", rt)));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->leader_alive);
  EXPECT_EQ(cmd(StartOrAdoptArgv(rt, "r1/service-1")), "adopted " + std::to_string(foreign) + " alive\n");
  kill(foreign, SIGKILL);
  waitpid(foreign, nullptr, 0);
}

TEST(ServiceScripts, AProcessWithNoEnvironmentIsNotOurs) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  const pid_t bare = StartForeignSleeper(/*empty_env=*/true);
  ASSERT_GT(bare, 0);
  auto st = ParseGroupStatus(Shell(ssh::BuildCommand(GroupStatusArgv(bare, "r1/service-1", rt))));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->leader_foreign);
  EXPECT_FALSE(st->any_alive());
  kill(bare, SIGKILL);
  waitpid(bare, nullptr, 0);
}

struct Ran {
  int rc = -1;
  std::string out, err;
};

Ran RunScript(const std::vector<std::string>& argv, const std::string& err_file) {
  Ran r;
  FILE* f = popen((ssh::BuildCommand(argv) + " 2>" + ssh::ShellQuote(err_file)).c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int status = pclose(f);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  return r;
}

fs::perms Mode(const std::string& p) { return fs::symlink_status(p).permissions() & fs::perms::all; }

TEST(RuntimeDir, CreatesPrivateDirsAndReportsTheEntries) {
  TempDir t;
  const std::string base = t.path + "/home/.cache/npuprof/runtime";
  auto below = ComponentsBelow(base, base + "/r1/service-1");
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(*below, (std::vector<std::string>{"r1", "service-1"}));
  Ran r = RunScript(RuntimeDirArgv(true, base, *below, {"launch.json", ".started", "pid"}), t.path + "/err");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const std::string& d : {t.path + "/home", base, base + "/r1", base + "/r1/service-1"})
    EXPECT_EQ(Mode(d), fs::perms::owner_all) << d;
  auto rep = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString() << r.out;
  EXPECT_TRUE(rep->exists);
  EXPECT_EQ(rep->uid, static_cast<int64_t>(getuid()));
  EXPECT_EQ(rep->Entry("launch.json").type, "absent");
  // Entries as npuprof leaves them, and as nobody else may.
  const std::string rt = base + "/r1/service-1";
  std::ofstream(rt + "/launch.json") << "{}";
  fs::create_directory(rt + "/.started");
  fs::create_symlink(t.path + "/elsewhere", rt + "/pid");
  r = RunScript(RuntimeDirArgv(false, base, *below, {"launch.json", ".started", "pid"}), t.path + "/err");
  ASSERT_EQ(r.rc, 0) << r.err;
  rep = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->Entry("launch.json").type, "file");
  EXPECT_EQ(rep->Entry(".started").type, "dir");
  EXPECT_EQ(rep->Entry("pid").type, "symlink");
  EXPECT_FALSE(UntrustedFile(*rep, rt, "launch.json", "a launch record").has_value());
  auto why = UntrustedFile(*rep, rt, "pid", "the service's pid file");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("symbolic link"), std::string::npos) << *why;
  // Check mode creates nothing.
  auto other = ComponentsBelow(base, base + "/r2/service-1");
  r = RunScript(RuntimeDirArgv(false, base, *other, {"pid"}), t.path + "/err");
  ASSERT_EQ(r.rc, 0) << r.err;
  rep = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->exists);
  EXPECT_EQ(rep->missing, base + "/r2");
  EXPECT_FALSE(fs::exists(base + "/r2"));
}

TEST(RuntimeDir, RefusesLinksWritableDirsAndOtherOwners) {
  TempDir t;
  const std::string base = t.path + "/base";
  fs::create_directories(base);
  fs::permissions(base, fs::perms::owner_all);
  fs::create_directories(t.path + "/elsewhere");
  // A link planted where the run's dir goes: refused, nothing made through it.
  fs::create_directory_symlink(t.path + "/elsewhere", base + "/r1");
  Ran r = RunScript(RuntimeDirArgv(true, base, {"r1", "service-1"}, {"launch.json"}), t.path + "/err");
  EXPECT_EQ(r.rc, 5);
  auto refusal = RuntimeDirRefusal(r.err);
  ASSERT_TRUE(refusal.has_value()) << r.err;
  EXPECT_NE(refusal->find(base + "/r1 is a symbolic link"), std::string::npos) << *refusal;
  EXPECT_TRUE(fs::is_empty(t.path + "/elsewhere"));
  // A base others may write to.
  const std::string open_base = t.path + "/open";
  fs::create_directories(open_base);
  fs::permissions(open_base, fs::perms::all);
  r = RunScript(RuntimeDirArgv(true, open_base, {"r1"}, {}), t.path + "/err");
  EXPECT_EQ(r.rc, 5);
  ASSERT_TRUE(RuntimeDirRefusal(r.err).has_value()) << r.err;
  EXPECT_NE(RuntimeDirRefusal(r.err)->find("writable by group or others (mode 777)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(open_base + "/r1"));
  // A file where a dir goes.
  std::ofstream(base + "/r2") << "x";
  r = RunScript(RuntimeDirArgv(true, base, {"r2", "service-1"}, {}), t.path + "/err");
  EXPECT_EQ(r.rc, 5);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  if (getuid() != 0) GTEST_SKIP() << "another owner needs root to plant";
  // A run dir, and a launch record, owned by another user.
  fs::create_directories(base + "/r3/service-1");
  ASSERT_EQ(chown((base + "/r3").c_str(), 65534, 65534), 0);
  r = RunScript(RuntimeDirArgv(true, base, {"r3", "service-1"}, {}), t.path + "/err");
  EXPECT_EQ(r.rc, 5);
  EXPECT_NE(r.err.find("owned by uid 65534, not by you"), std::string::npos) << r.err;
  fs::create_directories(base + "/r4/service-1");
  fs::permissions(base + "/r4", fs::perms::owner_all);
  fs::permissions(base + "/r4/service-1", fs::perms::owner_all);
  std::ofstream(base + "/r4/service-1/launch.json") << "{}";
  ASSERT_EQ(chown((base + "/r4/service-1/launch.json").c_str(), 65534, 65534), 0);
  r = RunScript(RuntimeDirArgv(true, base, {"r4", "service-1"}, {"launch.json"}), t.path + "/err");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rep = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(rep.ok());
  auto why = UntrustedFile(*rep, base + "/r4/service-1", "launch.json", "a launch record");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("owned by uid 65534"), std::string::npos) << *why;
}

TEST(RuntimeDir, ComponentsAndReportParsing) {
  EXPECT_FALSE(ComponentsBelow("/b", "/c/r1").ok());
  EXPECT_FALSE(ComponentsBelow("/b", "/b/../r1").ok());
  EXPECT_FALSE(ComponentsBelow("rel", "rel/x").ok());
  EXPECT_TRUE(ComponentsBelow("/b/", "/b").ok());
  EXPECT_EQ(ComponentsBelow("/", "/x/y")->size(), 2u);
  EXPECT_FALSE(ParseRuntimeDirReport("garbage").ok());
  EXPECT_FALSE(ParseRuntimeDirReport("uid 0 root\n").ok());  // neither dir ok nor missing
  auto rep = ParseRuntimeDirReport("uid 1000 alice\ndir ok\nentry absent - pid\nentry file 1000 launch.json\n");
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->user, "alice");
  EXPECT_EQ(rep->Entry("launch.json").uid, 1000);
  EXPECT_EQ(rep->Entry("pid").type, "absent");
  EXPECT_EQ(rep->Entry("never-asked").type, "absent");
  EXPECT_FALSE(RuntimeDirRefusal("some other error").has_value());
}

TEST(ServiceScripts, ParseGroupStatus) {
  auto g = ParseGroupStatus("leader=gone members=3\n");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->leader_alive);
  EXPECT_EQ(g->members, 3);
  g = ParseGroupStatus("leader=foreign members=0 signalled=no\n");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->leader_foreign);
  EXPECT_FALSE(g->leader_alive);
  EXPECT_FALSE(g->signalled);
  EXPECT_FALSE(ParseGroupStatus("garbage").ok());
}


// A service's port is picked below the kernel's ephemeral range, where no
// outgoing connection takes it before the service binds it, and it is free.
TEST(ServiceScripts, AServicesPortIsPickedBelowTheEphemeralRangeAndIsFree) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  if (!(range >> lo >> hi) || lo <= 2048) GTEST_SKIP() << "no ephemeral range to stay below here";
  for (int i = 0; i < 5; ++i) {
    const std::string out = Shell(ssh::BuildCommand(FreePortArgv()));
    const int port = std::atoi(out.c_str());
    EXPECT_GE(port, std::max(1024, lo - 12000)) << out;
    EXPECT_LT(port, lo) << out;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << port;
    ::close(fd);
  }
  // Its program imports neither `random` nor `socket` (milliseconds of the
  // launch's start each: docs/PERFORMANCE.md run 61).
  std::vector<std::string> timed = FreePortArgv();
  timed.insert(timed.begin() + 1, {"-X", "importtime"});
  const auto listed = ssh::testing::RunLocalArgv(timed, "");
  EXPECT_GT(std::atoi(listed.out.c_str()), 0) << listed.out << listed.err;
  for (const char* m : {"| random", "| socket", "| hashlib"})
    EXPECT_EQ(listed.err.find(std::string(m) + "\n"), std::string::npos) << m << " imported:\n" << listed.err;
  auto head = ParseHeadPorts(Shell(ssh::BuildCommand(HeadPortsArgv(29500, true))), true);
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_LT(head->api, lo);
  EXPECT_NE(head->api, 29500);
}

// The head's port check, run here as the target runs it: a port nobody
// holds is free (the API port picked beside it), a port with a listener is
// busy, and a line that is not the check's is an error.
TEST(ServiceScripts, HeadPortsSeesAListenerAndPicksTheApiPort) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int held = ntohs(a.sin_port);
  auto busy = ParseHeadPorts(Shell(ssh::BuildCommand(HeadPortsArgv(held, true))), true);
  ASSERT_TRUE(busy.ok()) << busy.status().message();
  EXPECT_FALSE(busy->rpc_free) << "a listener on 127.0.0.1 holds the port for every interface";
  EXPECT_EQ(busy->rpc_why.rfind("busy:", 0), 0u) << busy->rpc_why;
  EXPECT_GT(busy->api, 0);
  ::close(fd);
  auto free_now = ParseHeadPorts(Shell(ssh::BuildCommand(HeadPortsArgv(held, false))), false);
  ASSERT_TRUE(free_now.ok()) << free_now.status().message();
  EXPECT_TRUE(free_now->rpc_free) << "the listener is gone";
  EXPECT_EQ(free_now->api, 0) << "no API port asked for";
  for (const char* bad : {"", "12345", "x free", "0 maybe", "0 busy:x", "0 free extra", "123456 free"})
    EXPECT_FALSE(ParseHeadPorts(bad, false).ok()) << bad;
  EXPECT_FALSE(ParseHeadPorts("0 free\n", true).ok()) << "an API port was asked for";
  EXPECT_TRUE(ParseHeadPorts("8000 busy:98\n", true).ok());
}

}  // namespace
}  // namespace npuprof::workers::service
