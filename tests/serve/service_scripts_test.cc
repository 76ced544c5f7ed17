// The generated _serve.sh / _start.sh and the helper scripts, run locally
// with a fake `vllm` that prints what it received: every token arrives
// exactly as given, nothing is interpreted by the shell.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "workers/handlers/service_scripts.h"
#include "workers/ssh/shell_quote.h"

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

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/npuprof-serve-scripts-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

json Record(const std::string& dir) {
  return json{{"run_id", "r1"},
              {"launch_no", 1},
              {"runtime_dir", dir + "/rt"},
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
  std::vector<std::string> want = {"vllm", "serve", "/d/my model's dir", "--host", "0.0.0.0", "--port", "18123",
                                   "--served-model-name", "srv", "--tensor-parallel-size", "2",
                                   "--compilation-config", "{\"cudagraph_mode\": \"PIECEWISE\"}", "$HOME"};
  EXPECT_EQ(argv, want);
  r["dp"] = 2;
  r["served_model_name"] = nullptr;
  argv = ServeArgv(r);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--data-parallel-size"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--served-model-name"), 0);
}

TEST(ServiceScripts, ServeScriptPassesEveryTokenVerbatim) {
  TempDir t;
  fs::create_directories(t.path + "/rt");
  fs::create_directories(t.path + "/bin");
  // The env script puts the fake vllm first on PATH, as the Ascend one would.
  std::ofstream(t.path + "/env.sh") << "export PATH=" << ssh::ShellQuote(t.path + "/bin") << ":$PATH\n";
  std::ofstream(t.path + "/bin/vllm") << "#!/bin/sh\necho \"DEV=$ASCEND_RT_VISIBLE_DEVICES\"\necho \"X=$X_VAL\"\n"
                                         "for a in \"$@\"; do echo \"ARG=$a\"; done\n";
  fs::permissions(t.path + "/bin/vllm", fs::perms::owner_all);
  json r = Record(t.path);
  auto script = ServeScript(r);
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  std::ofstream(t.path + "/rt/_serve.sh") << *script;
  const std::string out = Shell("bash " + ssh::ShellQuote(t.path + "/rt/_serve.sh"));
  std::string want = "DEV=4,5\nX=" + r["env"]["X_VAL"].get<std::string>() + "\n";
  for (size_t i = 1; i < ServeArgv(r).size(); ++i) want += "ARG=" + ServeArgv(r)[i] + "\n";
  EXPECT_EQ(out, want);
  EXPECT_FALSE(fs::exists(t.path + "/pwned"));
}

TEST(ServiceScripts, StartOrAdoptStartsOnceInItsOwnProcessGroup) {
  TempDir t;
  const std::string rt = t.path + "/rt";
  fs::create_directories(rt);
  json r = Record(t.path);
  r["runtime_dir"] = rt;
  std::ofstream(rt + "/_serve.sh") << "exec sleep 30\n";
  auto start = StartScript(r);
  ASSERT_TRUE(start.ok());
  std::ofstream(rt + "/_start.sh") << *start;
  auto cmd = [&](const std::vector<std::string>& argv) { return Shell(ssh::BuildCommand(argv)); };
  const std::string first = cmd(StartOrAdoptArgv(rt));
  const std::string second = cmd(StartOrAdoptArgv(rt));
  ASSERT_EQ(first.rfind("started ", 0), 0u) << first;
  ASSERT_EQ(second.rfind("adopted ", 0), 0u) << second;
  const int64_t pid = std::atoll(first.c_str() + 8);
  EXPECT_EQ(first.substr(8), second.substr(8));
  EXPECT_EQ(getpgid(static_cast<pid_t>(pid)), pid);  // its own process group
  auto st = ParseGroupStatus(cmd(GroupStatusArgv(pid)));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->leader_alive);
  EXPECT_GE(st->members, 1);
  cmd(SignalGroupArgv("TERM", pid));
  for (int i = 0; i < 50 && st.ok() && st->any_alive(); ++i) {
    usleep(100000);
    st = ParseGroupStatus(cmd(GroupStatusArgv(pid)));
  }
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->any_alive());
}

TEST(ServiceScripts, ParseGroupStatus) {
  auto g = ParseGroupStatus("leader=gone members=3\n");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->leader_alive);
  EXPECT_EQ(g->members, 3);
  EXPECT_FALSE(ParseGroupStatus("garbage").ok());
}

}  // namespace
}  // namespace npuprof::workers::service
