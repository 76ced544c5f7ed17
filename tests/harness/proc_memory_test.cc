// tests/support/proc_memory.h: a live process's VmHWM and VmRSS are read in
// kB (the peak at least the current), a reaped process is NotFound, an
// unknown field is NotFound naming it.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/support/proc_memory.h"

namespace npuprof::testing {
namespace {

TEST(ProcMemory, ReadsThisProcesssPeakAndCurrentRss) {
  const auto now = ProcStatusKb(getpid(), "VmRSS");  // first: reading may grow the RSS
  const auto peak = PeakRssKb(getpid());
  ASSERT_TRUE(peak.ok()) << peak.status().message();
  ASSERT_TRUE(now.ok()) << now.status().message();
  EXPECT_GT(*now, 0);
  EXPECT_GE(*peak, *now);
}

TEST(ProcMemory, AReapedProcessOrAnUnknownFieldIsNotFound) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const auto gone = PeakRssKb(child);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  const auto field = ProcStatusKb(getpid(), "VmNoSuchField");
  ASSERT_FALSE(field.ok());
  EXPECT_NE(field.status().message().find("VmNoSuchField"), std::string::npos) << field.status().message();
}

}  // namespace
}  // namespace npuprof::testing
