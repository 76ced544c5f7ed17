// Runs an argv on this machine (no SSH), for tests of the scripts the SSH
// layer sends to targets: stdin from a string, stdout and stderr captured,
// PATH replaced when asked (to play a target that lacks a tool).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh::testing {

struct LocalRun {
  std::string out, err;
  int status = -1;  // exit status (-1: killed by a signal)
};

inline LocalRun RunLocalArgv(const std::vector<std::string>& argv, const std::string& input,
                             const std::string& path_env = "") {
  static int seq = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("npuprof_local_" + std::to_string(::getpid()) + "_" + std::to_string(seq++));
  std::filesystem::create_directories(dir);
  const std::string in = dir / "in", out = dir / "out", err = dir / "err";
  std::ofstream(in, std::ios::binary) << input;
  std::string cmd = BuildCommand(argv) + " <" + ShellQuote(in) + " >" + ShellQuote(out) + " 2>" + ShellQuote(err);
  if (!path_env.empty()) cmd = "/usr/bin/env PATH=" + ShellQuote(path_env) + " " + cmd;
  LocalRun r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace npuprof::ssh::testing
