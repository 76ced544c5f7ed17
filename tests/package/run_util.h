// Helpers of the package tests: run a local program (argv, no shell) with
// its stdout and stderr captured in a temp file, and the build's package.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/sshd_fixture.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {

struct Ran {
  int exit_code = -1;  // -1: not started or killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

inline std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline Ran RunOutput(const std::vector<std::string>& argv) {
  char tmpl[] = "/tmp/npuprof-pkg-out-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return {};
  close(fd);
  Ran r;
  r.exit_code = RunLocal(argv, tmpl);
  r.output = ReadWhole(tmpl);
  std::filesystem::remove(tmpl);
  return r;
}

// The newest package scripts/package.sh (or the package_build fixture) wrote
// into the build dir; "" when there is none.
inline std::string BuiltDeb() {
  std::error_code ec;
  std::filesystem::path newest;
  std::filesystem::file_time_type newest_time{};
  for (const auto& e : std::filesystem::directory_iterator(npuprof::build_paths::BinaryDir(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("npuprof_", 0) != 0 || e.path().extension() != ".deb") continue;
    const auto t = std::filesystem::last_write_time(e.path(), ec);
    if (ec || (!newest.empty() && t <= newest_time)) continue;
    newest = e.path();
    newest_time = t;
  }
  return newest.string();
}

}  // namespace npuprof::testing
