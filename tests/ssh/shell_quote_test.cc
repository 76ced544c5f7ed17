// ShellQuote/BuildCommand round-trip through a real /bin/sh, plus validators.
#include "workers/ssh/shell_quote.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace npuprof::ssh {
namespace {

// Runs /bin/sh -c <script> and returns its stdout (binary-safe).
std::string RunSh(const std::string& script) {
  int fds[2];
  if (pipe(fds) != 0) return "<pipe failed>";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return out;
}

std::vector<std::string> NastyStrings() {
  std::string all_bytes;
  for (int c = 1; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  return {"", "plain", "with space", "it's", "'", "''", "\"", "a\"b'c", "$HOME", "${HOME}",
          "`id`", "$(id)", "a\nb", "\n", "\t", "back\\slash", "\\", "*", "?", "[a]", "~",
          "~root", "-n", "-e", "--", ";", "a;b", "a|b", "a&b", "a>b", "<", "#comment", "!",
          "{a,b}", "%s", "=", "x=1", "'$(rm -rf /)'", "\"; rm -rf / #", "\x1b[31mred",
          "é ünïcödé 中文", all_bytes, std::string(10000, '\'')};
}

TEST(ShellQuote, RoundTripsThroughSh) {
  for (const auto& s : NastyStrings()) {
    std::string out = RunSh("printf '%s\\0' " + ShellQuote(s));
    ASSERT_EQ(out, s + std::string(1, '\0')) << "quoted: " << ShellQuote(s).substr(0, 200);
  }
}

TEST(ShellQuote, BuildCommandKeepsArgvBoundaries) {
  std::vector<std::string> argv = {"printf", "%s\\0"};
  std::string expected;
  for (const auto& s : NastyStrings()) {
    argv.push_back(s);
    expected += s + std::string(1, '\0');
  }
  EXPECT_EQ(RunSh(BuildCommand(argv)), expected);
}

TEST(ShellQuote, PlainWordsStayReadable) {
  EXPECT_EQ(ShellQuote("/usr/local/bin/npu-smi"), "/usr/local/bin/npu-smi");
  EXPECT_EQ(ShellQuote("a=b,c:d@e%f+g"), "a=b,c:d@e%f+g");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(ShellQuote, NulCannotEscapeQuoting) {
  // A NUL truncates the C string the shell sees; it is always inside a quote.
  std::string q = ShellQuote(std::string("a\0; touch /tmp/x", 16));
  EXPECT_EQ(q.front(), '\'');
  std::string truncated = q.substr(0, q.find('\0'));
  EXPECT_EQ(truncated, "'a");
}

TEST(ShellQuote, RemoteScriptSourcesEnvAndExports) {
  char dir_tmpl[] = "/tmp/npuprof-quote-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  std::string dir = dir_tmpl;
  std::string env = dir + "/env it's.sh";
  RunSh("printf 'export FROM_ENV=yes\\necho noise\\n' > " + ShellQuote(env));
  const std::string value = "it's \"q\" $HOME `id` \n end";
  std::string script = BuildRemoteScript(env, {{"VAL", value}},
                                         {"sh", "-c", "printf '%s|%s' \"$FROM_ENV\" \"$VAL\""});
  EXPECT_EQ(RunSh(script), "yes|" + value);
  // Missing env script: still runs.
  script = BuildRemoteScript(dir + "/missing.sh", {}, {"echo", "ok"});
  EXPECT_EQ(RunSh(script), "ok\n");
  RunSh("rm -rf " + ShellQuote(dir));
}

TEST(ShellQuote, RemoteScriptRejectsBadEnvNameAndRunsNothing) {
  std::string script = BuildRemoteScript("", {{"BAD;touch x", "v"}}, {"echo", "ran"});
  EXPECT_EQ(RunSh(script + "; echo rc=$?"), "");  // exit 2 before anything else
  auto checked = BuildRemoteScriptChecked("", {{"1X", "v"}}, {"echo"});
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(BuildRemoteScriptChecked("", {}, {}).ok());
}

TEST(Validate, EnvNames) {
  EXPECT_TRUE(ValidateEnvName("ASCEND_RT_VISIBLE_DEVICES").ok());
  EXPECT_TRUE(ValidateEnvName("_x1").ok());
  EXPECT_FALSE(ValidateEnvName("").ok());
  EXPECT_FALSE(ValidateEnvName("1A").ok());
  EXPECT_FALSE(ValidateEnvName("A-B").ok());
  EXPECT_FALSE(ValidateEnvName("A B").ok());
}

TEST(Validate, SafeNames) {
  EXPECT_TRUE(ValidateSafeName("tag", "qwen-7b_run.1").ok());
  for (std::string bad : std::vector<std::string>{"", ".", "..", "-rf", "a/b", "a b", "a'b", "$x", "a\nb",
                          std::string(129, 'a')}) {
    Status s = ValidateSafeName("tag", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("tag"), std::string::npos) << s.message();
  }
  Status s = ValidateSafeName("run name", "my run");
  EXPECT_NE(s.message().find("position 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("only letters, digits"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace npuprof::ssh
