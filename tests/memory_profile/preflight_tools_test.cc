// memory.preflight's tool checks in one command (workers/handlers/
// preflight_tools.h), run in a local shell whose PATH holds only what a test
// target has: msprof missing; msprof whose --help fails; a Python that
// imports torch_npu or none. The help text keeps its bytes; the parser
// refuses every output that is not exactly the format.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "tests/ssh/local_shell.h"
#include "tests/support/fake_tools_bin.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/preflight_tools.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using ssh::testing::RunLocalArgv;
using TempDir = npuprof::testing::TempDir;

// A bin dir with the shell tools the command uses, and the given fakes.
std::string Bin(const std::string& root, const std::vector<std::pair<std::string, std::string>>& fakes) {
  return npuprof::testing::FakeToolsBin(root, {"sh", "base64", "head"}, fakes);
}

PreflightTools Check(const std::string& bin) {
  auto r = RunLocalArgv(PreflightToolsArgv(), "", bin);
  EXPECT_EQ(r.status, 0) << r.err;
  auto t = ParsePreflightTools(r.out);
  EXPECT_TRUE(t.ok()) << t.status().ToString() << "\n" << r.out;
  return t.ok() ? *t : PreflightTools{};
}

TEST(PreflightTools, MsprofMissingIsSaidAndNothingElseIsChecked) {
  TempDir t;
  const PreflightTools p = Check(Bin(t.path, {{"python3", "echo /usr/bin/python3\n"}}));
  EXPECT_FALSE(p.msprof_found);
  EXPECT_TRUE(p.python.empty());
}

TEST(PreflightTools, MsprofItsHelpWithItsStatusAndBytesAndThePythonThatImportsTorchNpu) {
  TempDir t;
  const std::string bin = Bin(t.path, {{"msprof", "printf 'Usage: msprof --output=DIR \\377\\n\\n'; echo 'warn' >&2; exit 3\n"},
                                       {"python3", "exit 1\n"},  // no torch_npu here
                                       {"python", "echo /opt/py/bin/python\necho second line\n"}});
  const PreflightTools p = Check(bin);
  EXPECT_TRUE(p.msprof_found);
  EXPECT_EQ(p.msprof_path, bin + "/msprof");
  EXPECT_EQ(p.help_exit, 3);
  EXPECT_NE(p.help_text.find("Usage: msprof --output=DIR \xff\n"), std::string::npos) << p.help_text;
  EXPECT_NE(p.help_text.find("warn"), std::string::npos);
  EXPECT_EQ(p.python, "/opt/py/bin/python");
}

TEST(PreflightTools, NoPythonWithTorchNpuIsAnEmptyPython) {
  TempDir t;
  const PreflightTools p = Check(Bin(t.path, {{"msprof", "echo Usage\n"}, {"python3", "exit 1\n"}}));
  EXPECT_TRUE(p.msprof_found);
  EXPECT_EQ(p.help_exit, 0);
  EXPECT_EQ(p.help_text, "Usage\n");
  EXPECT_TRUE(p.python.empty());
}

TEST(PreflightTools, OutputThatIsNotExactlyTheFormatIsRefused) {
  for (const std::string bad : {
           "",
           "npuprof-preflight 2\nmsprof-missing\n",
           "npuprof-preflight 1\n",
           "npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp 0 VXNhZ2U=\n",
           "npuprof-preflight 1\nmsprof !!!!\nhelp 0 VXNhZ2U=\npython-missing\n",
           "npuprof-preflight 1\nmsprof \nhelp 0 VXNhZ2U=\npython-missing\n",
           "npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp x VXNhZ2U=\npython-missing\n",
           "npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp 1234 VXNhZ2U=\npython-missing\n",
           "npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp 0 VXNhZ2U=\npython3\n",
           "npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp 0 VXNhZ2U=\npython-missing\nextra\n",
       }) {
    auto r = ParsePreflightTools(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << bad;
    }
  }
  auto ok = ParsePreflightTools("npuprof-preflight 1\nmsprof L3Vzci9iaW4vbXNwcm9m\nhelp 0 VXNhZ2U=\npython-missing\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->msprof_path, "/usr/bin/msprof");
  EXPECT_EQ(ok->help_text, "Usage");
}

}  // namespace
}  // namespace npuprof::workers
