// PollBackoff: the waits between polls of a remote step (workers/poll_backoff.h).
#include "workers/poll_backoff.h"

#include <gtest/gtest.h>

namespace npuprof::workers {
namespace {

using std::chrono::milliseconds;

TEST(PollBackoff, DoublesFromFirstUpToTheCap) {
  PollBackoff b(milliseconds(500));
  for (int want : {50, 100, 200, 400, 500, 500, 500}) EXPECT_EQ(b.Next(), milliseconds(want));
}

TEST(PollBackoff, CapBelowFirstWaitIsTheCap) {
  PollBackoff b(milliseconds(30), milliseconds(50));
  EXPECT_EQ(b.Next(), milliseconds(30));
  EXPECT_EQ(b.Next(), milliseconds(30));
}

TEST(PollBackoff, CapNotAPowerOfTwoOfFirst) {
  PollBackoff b(milliseconds(300));
  for (int want : {50, 100, 200, 300, 300}) EXPECT_EQ(b.Next(), milliseconds(want));
}

}  // namespace
}  // namespace npuprof::workers
