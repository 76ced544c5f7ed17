// The clock exchange's script with the interpreter resolved for the machine
// (ClockExchangeScript's python_path; workers/profiling/target_interpreter.h),
// run locally with /bin/sh behind a counting `python3` shim first on PATH:
// the resolved path is started directly (the shim never runs), a path that
// is not there falls back to `python3` (the shim runs once), and either way
// the loop answers as the python reader.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/ssh/clock_exchange_protocol.h"

namespace npuprof::ssh {
namespace {

struct Shim {
  npuprof::testing::TempDir bin;
  std::string log = bin.path + "/starts.log";
  Shim() {
    std::ofstream py(bin.path + "/python3");
    py << "#!/bin/sh\necho start >> '" << log << "'\nexec /usr/bin/python3 \"$@\"\n";
    py.close();
    chmod((bin.path + "/python3").c_str(), 0755);
  }
  int Starts() const {
    std::ifstream f(log);
    int n = 0;
    for (std::string line; std::getline(f, line);) n += line == "start";
    return n;
  }
  testing::LocalRun Run(const std::string& python_path) const {
    return testing::RunLocalArgv({"sh", "-c", ClockExchangeScript("00ff", ClockMethod::kAuto, "", python_path)},
                                 "x\ny\n", bin.path + ":/usr/bin:/bin");
  }
};

int Replies(const std::string& out) {
  auto ready = FindClockReady(out, "00ff");
  if (!ready.ok() || !ready->has_value() || (*ready)->method != ClockMethod::kPython) return -1;
  int n = 0;
  for (size_t at = (*ready)->end; at < out.size();) {
    const size_t nl = out.find('\n', at);
    if (nl == std::string::npos) break;
    if (ParseClockReply(out.substr(at, nl - at), ClockMethod::kPython).ok()) ++n;
    at = nl + 1;
  }
  return n;
}

TEST(ClockExchangeInterpreter, TheResolvedPathIsStartedDirectlyAndAMissingOneFallsBackToPython3) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 here";
  Shim shim;
  auto r = shim.Run("/usr/bin/python3");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Replies(r.out), 2) << r.out;  // one reply per request line
  EXPECT_EQ(shim.Starts(), 0);

  npuprof::testing::TempDir gone;
  r = shim.Run(gone.path + "/python3");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Replies(r.out), 2) << r.out;
  EXPECT_EQ(shim.Starts(), 1);

  r = shim.Run("");  // not known: python3 as before
  EXPECT_EQ(Replies(r.out), 2) << r.out;
  EXPECT_EQ(shim.Starts(), 2);
}

TEST(ClockExchangeInterpreter, ThePathIsQuoted) {
  const std::string s = ClockExchangeScript("00ff", ClockMethod::kAuto, "", "/opt/it's/bin/python3");
  EXPECT_NE(s.find("__np_px='/opt/it'\\''s/bin/python3'"), std::string::npos) << s;
}

}  // namespace
}  // namespace npuprof::ssh
