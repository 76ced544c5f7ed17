// SshPool::WarmUpTo against a real loopback sshd: the connections a burst of
// long calls will hold are opened ahead, off every task's path, and the
// burst's Acquire() calls then pay no handshake and start no command shell.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "tests/support/sshd_test.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_session.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;

class SshPoolWarmTest : public npuprof::testing::SshdTest {};

TEST_F(SshPoolWarmTest, WarmedConnectionsServeABurstOfLongCallsWithoutHandshakes) {
  SshPool pool(SshPool::Options{.warm_spare = true});
  {
    SshStatsScope scope;  // the warm-ups count to no task
    EXPECT_EQ(pool.WarmUpTo(sshd_.target(), 4), 4u);
    EXPECT_EQ(pool.WarmUpTo(sshd_.target(), 4), 0u) << "a second call while they warm opens nothing more";
    pool.WaitForWarmUps();
    EXPECT_EQ(scope.totals().handshakes, 0);
  }
  EXPECT_EQ(pool.connections(), 4u);
  EXPECT_EQ(pool.total_handshakes(), 4) << "every warmed connection finished its handshake";

  SshStatsScope burst;
  std::vector<std::shared_ptr<SshSession>> held;
  std::set<SshSession*> distinct;
  for (int i = 0; i < 4; ++i) {
    held.push_back(pool.Acquire(sshd_.target()));
    distinct.insert(held.back().get());
  }
  EXPECT_EQ(distinct.size(), 4u) << "each long call holds a session of its own";
  for (auto& s : held) {
    auto r = s->Exec(BuildCommand({"echo", "warm"}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "warm\n");
  }
  const SshStats d = burst.totals();
  EXPECT_EQ(d.handshakes, 0) << "the burst found its connections open";
  EXPECT_EQ(d.shell_channels, 0) << "and their command shells started";
  held.clear();
  pool.WaitForWarmUps();  // a spare the last Acquire may have started
  EXPECT_LE(pool.connections(), SshPool::kMaxIdle + 1 + 1);
}

TEST_F(SshPoolWarmTest, WarmUpCountsTheSessionsTheKeyHasAndIsBounded) {
  SshPool pool;  // no spares: only WarmUpTo opens connections ahead
  {
    auto s = pool.Get(sshd_.target());
    ASSERT_TRUE(s->Exec("true", 10s).ok());
  }
  EXPECT_EQ(pool.WarmUpTo(sshd_.target(), 3), 2u) << "the key has one session: two more make three";
  EXPECT_EQ(pool.WarmUpTo(sshd_.target(), 1), 0u);
  pool.WaitForWarmUps();
  EXPECT_EQ(pool.connections(), 3u);
  // At most kWarmAtOnce handshakes in flight per call, at most kWarmUpToMax sessions a key.
  EXPECT_LE(pool.WarmUpTo(sshd_.target(), 1000), SshPool::kWarmAtOnce);
  pool.WaitForWarmUps();
  EXPECT_LE(pool.connections(), SshPool::kWarmUpToMax);
  EXPECT_EQ(pool.connections(), 3u + SshPool::kWarmAtOnce);
}

// A warm-up that cannot connect fails nobody: the session stays unconnected
// and its first user connects it, seeing that connection's own error.
TEST_F(SshPoolWarmTest, AWarmUpThatCannotConnectFailsNobody) {
  SshPool pool;
  SshTarget closed = sshd_.target();
  closed.port = 1;  // nothing listens on 127.0.0.1:1
  EXPECT_EQ(pool.WarmUpTo(closed, 2), 2u);
  pool.WaitForWarmUps();
  EXPECT_EQ(pool.total_handshakes(), 0);
  auto s = pool.Acquire(closed);
  auto r = s->Exec("true", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kUnreachable) << r.status().ToString();
}

}  // namespace
}  // namespace npuprof::ssh
