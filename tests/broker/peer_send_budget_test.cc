// PeerSendBudget (broker/peer_send_budget.h) on a real ROUTER over inproc:
// a peer that does not read gets messages until what waits for it reaches
// the cap, then nothing; once it reads, the count goes down (ZeroMQ frees
// what it delivered) and it gets messages again. Another peer is not held
// back by the first one's queue.
#include "broker/peer_send_budget.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace npuprof::broker {
namespace {

constexpr uint64_t kCap = 1 << 20;

zmq::socket_t Dealer(zmq::context_t& ctx, const std::string& id) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::routing_id, id);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvhwm, 0);
  s.connect("inproc://budget");
  s.send(zmq::str_buffer("hello"), zmq::send_flags::none);  // the router learns its id
  return s;
}

void Greet(zmq::socket_t& router) {
  zmq::message_t id, body;
  ASSERT_TRUE(router.recv(id, zmq::recv_flags::none));
  ASSERT_TRUE(router.recv(body, zmq::recv_flags::none));
}

TEST(PeerSendBudget, APeerThatDoesNotReadIsCappedAndGetsMessagesAgainOnceItReads) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, 0);
  router.bind("inproc://budget");
  zmq::socket_t slow = Dealer(ctx, "slow");
  zmq::socket_t other = Dealer(ctx, "other");
  Greet(router);
  Greet(router);

  PeerSendBudget budget(kCap);
  const std::string body(100 << 10, 'x');  // 100 KiB
  int sent = 0;
  while (budget.Send(router, "slow", "H", body, "client")) ++sent;
  EXPECT_EQ(sent, 10) << "ten 100 KiB messages fit under 1 MiB, the eleventh does not";
  EXPECT_EQ(budget.Queued("slow"), 10u * body.size());
  EXPECT_FALSE(budget.Send(router, "slow", "H", body, "client")) << "still over the cap";
  EXPECT_TRUE(budget.Send(router, "other", "H", body, "client")) << "each peer has its own budget";

  // The slow peer reads everything: its count goes back to zero.
  for (int i = 0; i < sent; ++i) {
    zmq::message_t h, b;
    ASSERT_TRUE(slow.recv(h, zmq::recv_flags::none));
    ASSERT_TRUE(slow.recv(b, zmq::recv_flags::none));
    EXPECT_EQ(b.size(), body.size());
  }
  for (int i = 0; i < 200 && budget.Queued("slow") > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(budget.Queued("slow"), 0u);
  EXPECT_TRUE(budget.Send(router, "slow", "H", body, "client"));

  // One message larger than the cap goes to a peer with nothing queued.
  const std::string huge(2 * kCap, 'y');
  EXPECT_TRUE(budget.Send(router, "nobody-yet", "H", huge, "client")) << "an unknown peer: dropped by ZeroMQ";
  for (int i = 0; i < 200 && budget.Queued("nobody-yet") > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(budget.Queued("nobody-yet"), 0u) << "a dropped message is given back too";
}

}  // namespace
}  // namespace npuprof::broker
