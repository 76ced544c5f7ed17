// Replays the fuzz corpus through every fuzz target in the normal build, so
// the targets' promises hold for the g++ build too and a saved finding stays
// fixed:
//  * every seed of tests/fuzz/corpus.txt and every saved finding in
//    tests/fuzz/findings/<target>/ is fed to its target;
//  * a small seeded mutation pass (fixed seed: the same inputs every run)
//    feeds each seed's variants with the tokens that broke parsers before
//    (non-finite numbers, huge sizes, invalid UTF-8, cut and doubled lines,
//    nesting 300 levels deep).
// A broken promise or an escaping exception fails the test naming the target
// and the input; a failing mutated input is written to
// <build>/fuzz_replay_failures/<target>/ to be kept as a finding.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/support/build_paths.h"

namespace npuprof::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = npuprof::build_paths::SourceDir();

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The files one corpus.txt path names: a file, or "<dir>/*<suffix>".
std::vector<fs::path> Expand(const std::string& pattern) {
  const size_t star = pattern.find("/*");
  if (star == std::string::npos) return {kRoot / pattern};
  const fs::path dir = kRoot / pattern.substr(0, star);
  const std::string suffix = pattern.substr(star + 2);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// target -> its seed files, from corpus.txt.
std::map<std::string, std::vector<fs::path>> Seeds() {
  std::map<std::string, std::vector<fs::path>> seeds;
  std::ifstream in(kRoot / "tests/fuzz/corpus.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string target, pattern;
    words >> target >> pattern;
    auto& files = seeds[target];
    for (auto& f : Expand(pattern)) files.push_back(std::move(f));
  }
  return seeds;
}

std::vector<fs::path> Findings(const std::string& target) {
  const fs::path dir = kRoot / "tests/fuzz/findings" / target;
  if (!fs::is_directory(dir)) return {};
  return Expand("tests/fuzz/findings/" + target + "/*");
}

// Runs one input; returns "" when every promise held, else what broke.
std::string RunInput(Target run, const std::string& input) {
  try {
    run(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    return "";
  } catch (const ContractViolation& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("an exception escaped: ") + e.what();
  }
}

class FuzzReplay : public testing::TestWithParam<NamedTarget> {
 protected:
  void SetUp() override { ThrowOnContractViolation(true); }
  void TearDown() override { ThrowOnContractViolation(false); }
};

TEST(FuzzCorpus, EveryTargetHasSeedsAndEveryNameIsATarget) {
  std::set<std::string> names;
  for (const NamedTarget& t : kTargets) names.insert(t.name);
  const auto seeds = Seeds();
  for (const auto& [target, files] : seeds) {
    EXPECT_TRUE(names.count(target)) << "corpus.txt names no target '" << target << "'";
    for (const fs::path& f : files) EXPECT_TRUE(fs::is_regular_file(f)) << f;
  }
  for (const std::string& name : names) {
    EXPECT_TRUE(seeds.count(name) && !seeds.at(name).empty()) << "no seed for target " << name;
  }
  if (fs::is_directory(kRoot / "tests/fuzz/findings")) {
    for (const auto& e : fs::directory_iterator(kRoot / "tests/fuzz/findings")) {
      EXPECT_TRUE(names.count(e.path().filename().string())) << "findings of no target: " << e.path();
    }
  }
}

TEST_P(FuzzReplay, EverySeedAndSavedFindingKeepsThePromises) {
  const NamedTarget target = GetParam();
  const auto seeds = Seeds();
  ASSERT_TRUE(seeds.count(target.name));
  std::vector<fs::path> inputs = seeds.at(target.name);
  const auto findings = Findings(target.name);
  inputs.insert(inputs.end(), findings.begin(), findings.end());
  ASSERT_FALSE(inputs.empty());
  for (const fs::path& p : inputs) {
    const std::string broken = RunInput(target.run, ReadFile(p));
    EXPECT_EQ(broken, "") << target.name << " on " << p;
  }
}

// Tokens that broke parsers once, or are the edges of what they accept.
const std::vector<std::string> kTokens = {
    "inf", "-inf", "nan", "NaN", "1e999", "-1e999", "1e-400", "9223372036854775808", "-1",
    "18446744073709551615", "fffffffffffffffe", "0x10", "\xff\xfe", "\xc3\x28", "\xed\xa0\x80",
    "\x1b[", "\r\n", "\n", "\r", "\t", ",", "\"", "|", ":", ";", "{", "}", "[", "]", "(pid=1)", std::string(1, '\0'),
    // Nesting past every limit (common/json_depth.h): a JSON reader must refuse it, not recurse.
    std::string(300, '['), std::string(300, ']'), [] {
      std::string s;
      for (int i = 0; i < 300; ++i) s += R"({"a":)";
      return s;
    }()};

std::string Mutate(const std::string& seed, std::mt19937& rng) {
  std::string s = seed;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int i = 0; i < edits; ++i) {
    const size_t at = pick(s.size() + 1);
    switch (pick(6)) {
      case 0:  // insert a token
        s.insert(at, kTokens[pick(kTokens.size())]);
        break;
      case 1:  // replace a digit run (or a byte) with a token
        if (at < s.size()) {
          size_t end = at;
          while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.')) ++end;
          s.replace(at, std::max<size_t>(end - at, 1), kTokens[pick(kTokens.size())]);
        }
        break;
      case 2:  // flip a byte
        if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1u << pick(8)));
        break;
      case 3:  // cut the input here
        s.resize(at);
        break;
      case 4:  // double a slice (repeated lines, rows, chunks)
        if (at < s.size()) s.insert(at, s.substr(at, 1 + pick(64)));
        break;
      default:  // delete a slice
        if (at < s.size()) s.erase(at, 1 + pick(16));
        break;
    }
  }
  return s;
}

constexpr int kMutationsPerSeed = 400;

TEST_P(FuzzReplay, SeededMutationsKeepThePromises) {
  const NamedTarget target = GetParam();
  std::mt19937 rng(20260101);
  int failures = 0;
  const auto seeds = Seeds();
  ASSERT_TRUE(seeds.count(target.name));
  for (const fs::path& p : seeds.at(target.name)) {
    const std::string seed = ReadFile(p);
    for (int i = 0; i < kMutationsPerSeed && failures < 5; ++i) {
      const std::string input = Mutate(seed, rng);
      const std::string broken = RunInput(target.run, input);
      if (broken.empty()) continue;
      ++failures;
      const fs::path dir = fs::path(npuprof::build_paths::BinaryDir()) / "fuzz_replay_failures" / target.name;
      fs::create_directories(dir);
      const fs::path saved = dir / (p.filename().string() + "." + std::to_string(i));
      std::ofstream(saved, std::ios::binary) << input;
      ADD_FAILURE() << target.name << " on mutation " << i << " of " << p << " (saved as " << saved
                    << "): " << broken;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, testing::ValuesIn(kTargets.begin(), kTargets.end()),
                         [](const testing::TestParamInfo<NamedTarget>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace npuprof::fuzz
