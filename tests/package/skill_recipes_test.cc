// docs/agent/SKILL.md cannot drift: every ```sh block in it is run, in
// order, by bash (set -euo pipefail) against the simulated Ascend target,
// with MACHINE, MODEL and OUT set as the guide says and the npuprof under
// test first on PATH. Each block must exit 0 and leave the files it says.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/npuprof_harness.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;

struct Block {
  int line = 0;
  std::string text;
};

std::vector<Block> ShellBlocks(const std::string& path) {
  std::ifstream in(path);
  std::vector<Block> out;
  std::string l;
  int n = 0;
  bool inside = false;
  while (std::getline(in, l)) {
    ++n;
    if (!inside && l == "```sh") {
      inside = true;
      out.push_back({n + 1, ""});
    } else if (inside && l == "```") {
      inside = false;
    } else if (inside) {
      out.back().text += l + "\n";
    }
  }
  return out;
}

TEST(SkillRecipes, EveryShellBlockOfTheGuideRunsAgainstTheSimulatedTarget) {
  const std::string guide = std::string(npuprof::build_paths::SourceDir()) + "/docs/agent/SKILL.md";
  const std::vector<Block> blocks = ShellBlocks(guide);
  ASSERT_GE(blocks.size(), 5u) << guide;

  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--devices", "4"}).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  const std::string out = h.Dir() + "/skill-out";
  fs::create_directories(out);
  const std::string bin_dir = fs::path(NpuprofBinary()).parent_path().string();
  ::setenv("MACHINE", "sim1", 1);
  ::setenv("MODEL", model.c_str(), 1);
  ::setenv("OUT", out.c_str(), 1);
  ::setenv("NPUPROF_DATA_DIR", h.DataDir().c_str(), 1);
  const std::string path = bin_dir + ":" + (getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  ::setenv("PATH", path.c_str(), 1);

  for (const Block& b : blocks) {
    CliResult r = RunCommand({"/bin/bash", "-c", "set -euo pipefail\ncd \"$OUT\"\n" + b.text}, 600);
    EXPECT_FALSE(r.timed_out) << "SKILL.md line " << b.line;
    EXPECT_EQ(r.exit_code, 0) << "SKILL.md recipe at line " << b.line << ":\n"
                              << b.text << "\n-- stdout\n" << r.out << "\n-- stderr\n" << r.err;
  }
  for (const char* f : {"check.json", "probe.json", "memory-report.json", "memory-report.html",
                        "memory-run/manifest.json", "serve.json", "attached-report.json", "serve-stopped.json",
                        "torch-profile/manifest.json", "events.json"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  const auto manifest = nlohmann::json::parse(std::ifstream(out + "/torch-profile/manifest.json"), nullptr, false);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest.value("status", ""), "ok") << manifest.dump(2).substr(0, 2000);
  const nlohmann::json runs = h.Cli({"runs", "--json"}).json();
  ASSERT_TRUE(runs.is_object());
  EXPECT_GE(runs["runs"].size(), 7u);
  for (const auto& r : runs["runs"])
    EXPECT_TRUE(r.value("terminal", false)) << "a recipe left a run going: " << r.dump();
  ::unsetenv("NPUPROF_DATA_DIR");
  h.Stop();
}

}  // namespace
}  // namespace npuprof::testing
