// The broker's listener security in-process, on real sockets: a ROUTER set
// up by SecureListener (CURVE + the ZAP handler) and DEALERs connecting to
// it over loopback tcp and the data dir's ipc socket, as clients and
// workers do (SetUpConnectingSocket + HandshakeWatch).
#include "broker/listener_security.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "common/private_files.h"
#include "common/server_keys.h"
#include "common/socket_security.h"
#include "tests/security/security_test_util.h"
#include "tests/support/sshd_fixture.h"

namespace npuprof::broker {
namespace {

// A small message cap for this executable (read once, before any socket):
// the oversized frame below stays small.
const bool kSmallCap = (setenv("NPUPROF_MAX_MESSAGE_BYTES", "65536", 1), true);

using namespace std::chrono_literals;
using testing::ModeOf;
using testing::TempDir;

// A listener (ROUTER) answering every frame with "pong:" + frame, on its own thread.
class EchoListener {
 public:
  EchoListener(const std::string& data_dir, ListenerSecurity mode) : router_(ctx_, zmq::socket_type::router) {
    router_.set(zmq::sockopt::linger, 0);
    tcp_ = "tcp://127.0.0.1:" + std::to_string(npuprof::testing::FreeLoopbackPort());
    ipc_ = "ipc://" + data_dir + "/npuprof.sock";
    auto zap = SecureListener(ctx_, router_, data_dir, {ipc_, tcp_}, mode);
    EXPECT_TRUE(zap.ok()) << zap.status().ToString();
    if (zap.ok()) zap_ = std::move(zap).value();
    router_.bind(ipc_);
    router_.bind(tcp_);
    thread_ = std::thread([this] { Loop(); });
  }
  ~EchoListener() {
    stop_ = true;
    thread_.join();
  }
  const std::string& tcp() const { return tcp_; }
  const std::string& ipc() const { return ipc_; }
  ZapAuthenticator* zap() const { return zap_.get(); }
  int received() const { return received_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, 20ms);
      zmq::message_t id, body;
      while (router_.recv(id, zmq::recv_flags::dontwait)) {
        (void)router_.recv(body);
        ++received_;
        router_.send(id, zmq::send_flags::sndmore);
        router_.send(zmq::buffer("pong:" + body.to_string()), zmq::send_flags::none);
      }
    }
  }

  zmq::context_t ctx_{1};
  std::unique_ptr<ZapAuthenticator> zap_;
  zmq::socket_t router_;
  std::string tcp_, ipc_;
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
  std::thread thread_;
};

// What a connecting peer saw: the answer, or why there is none.
struct Outcome {
  std::optional<std::string> answer;
  std::optional<std::string> refusal;
};

Outcome Ask(const std::string& endpoint, const std::optional<CurveClientKeys>& keys, const std::string& body,
            std::chrono::milliseconds timeout = 10s) {
  zmq::context_t ctx(1);
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  SetUpConnectingSocket(sock, keys);
  Outcome out;
  {
    HandshakeWatch watch(ctx, sock, keys ? std::optional(keys->own.public_key) : std::nullopt);
    sock.connect(endpoint);
    sock.send(zmq::buffer(body), zmq::send_flags::none);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline && !out.answer && !out.refusal) {
      zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}, {watch.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, 50ms);
      zmq::message_t m;
      if (sock.recv(m, zmq::recv_flags::dontwait)) out.answer = m.to_string();
      watch.Drain();
      out.refusal = watch.refusal();
    }
  }
  return out;
}

class ListenerSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dd_ = tmp_.path() + "/data";
    ASSERT_TRUE(PrepareDataDir(dd_).ok());
  }
  CurveClientKeys KeysFor(const CurveKeyPair& own) {
    auto st = ReadListenState(dd_);
    EXPECT_TRUE(st.ok());
    return CurveClientKeys{st.ok() ? st->server_public_key : "", own};
  }
  TempDir tmp_;
  std::string dd_;
};

TEST_F(ListenerSecurityTest, OnlyListedAndLocalKeysGetAnAnswer) {
  EchoListener l(dd_, ListenerSecurity::kCurveBeyondIpc);
  ASSERT_NE(l.zap(), nullptr);
  EXPECT_EQ(ModeOf(dd_), 0700);

  // The local key from the data dir: over ipc and over tcp.
  auto local = LocalPeerKeys(dd_);
  ASSERT_TRUE(local.ok() && local->has_value()) << local.status().ToString();
  EXPECT_EQ(Ask(l.ipc(), *local, "a").answer, std::optional<std::string>("pong:a"));
  EXPECT_EQ(Ask(l.tcp(), *local, "b").answer, std::optional<std::string>("pong:b"));

  // No key at all.
  Outcome keyless = Ask(l.tcp(), std::nullopt, "c");
  EXPECT_FALSE(keyless.answer);
  ASSERT_TRUE(keyless.refusal);
  EXPECT_NE(keyless.refusal->find("requires CURVE"), std::string::npos) << *keyless.refusal;

  // A key that is not on the list.
  const CurveKeyPair peer = *MakeCurveKeyPair();
  Outcome unlisted = Ask(l.tcp(), KeysFor(peer), "d");
  EXPECT_FALSE(unlisted.answer);
  ASSERT_TRUE(unlisted.refusal);
  EXPECT_NE(unlisted.refusal->find("refused this peer's key " + peer.public_key), std::string::npos)
      << *unlisted.refusal;

  // A listed key made for another server.
  ASSERT_TRUE(EditAllowList(dd_, [&](AllowList& a) { return a.Add({"w1", peer.public_key}); }).ok());
  CurveClientKeys wrong_server = KeysFor(peer);
  wrong_server.server_public = MakeCurveKeyPair()->public_key;
  Outcome wrong = Ask(l.tcp(), wrong_server, "e");
  EXPECT_FALSE(wrong.answer);
  ASSERT_TRUE(wrong.refusal);
  EXPECT_NE(wrong.refusal->find("is not this server's public key"), std::string::npos) << *wrong.refusal;

  // Listed now (the file changed while the listener ran): admitted, no restart.
  EXPECT_EQ(Ask(l.tcp(), KeysFor(peer), "f").answer, std::optional<std::string>("pong:f"));
  // Removed again: refused from the next connection on.
  ASSERT_TRUE(EditAllowList(dd_, [&](AllowList& a) { return a.Remove("w1").status(); }).ok());
  EXPECT_TRUE(Ask(l.tcp(), KeysFor(peer), "g").refusal);

  EXPECT_EQ(l.received(), 3);  // a, b, f: nothing of the refused peers reached the socket
  EXPECT_GE(l.zap()->refused(), 2u);
  EXPECT_GE(l.zap()->admitted(), 3u);
}

TEST_F(ListenerSecurityTest, AnUnreadableAllowListAdmitsOnlyTheLocalKey) {
  EchoListener l(dd_, ListenerSecurity::kCurveBeyondIpc);
  const CurveKeyPair peer = *MakeCurveKeyPair();
  ASSERT_TRUE(EditAllowList(dd_, [&](AllowList& a) { return a.Add({"w1", peer.public_key}); }).ok());
  EXPECT_TRUE(Ask(l.tcp(), KeysFor(peer), "a").answer);
  testing::WriteText(ServerKeyPathsFor(dd_).allow_list, peer.public_key + " w1\nnot a line\n", 0600);
  EXPECT_TRUE(Ask(l.tcp(), KeysFor(peer), "b").refusal);
  auto local = LocalPeerKeys(dd_);
  ASSERT_TRUE(local.ok() && local->has_value());
  EXPECT_TRUE(Ask(l.tcp(), *local, "c").answer);
}

TEST_F(ListenerSecurityTest, IpcAloneUsesNoCurve) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  auto zap = SecureListener(ctx, router, dd_, {"ipc://" + dd_ + "/npuprof.sock"}, ListenerSecurity::kCurveBeyondIpc);
  ASSERT_TRUE(zap.ok()) << zap.status().ToString();
  EXPECT_EQ(zap->get(), nullptr);
  auto st = ReadListenState(dd_);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->curve);
  auto local = LocalPeerKeys(dd_);
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(local->has_value());
  // The keys exist already (made at first start), for `npuprof keys` to show.
  EXPECT_EQ(ModeOf(ServerKeyPathsFor(dd_).server_key), 0600);
}

TEST_F(ListenerSecurityTest, AFrameOverTheCapIsDroppedAndTheListenerGoesOn) {
  ASSERT_TRUE(kSmallCap);
  ASSERT_EQ(MaxMessageBytes(), 65536);
  EchoListener l(dd_, ListenerSecurity::kCurveBeyondIpc);
  auto local = LocalPeerKeys(dd_);
  ASSERT_TRUE(local.ok() && local->has_value());
  // Over the cap: libzmq drops the frame and the connection; no answer.
  const std::string huge(static_cast<size_t>(MaxMessageBytes()) + 1, 'x');
  Outcome big = Ask(l.tcp(), *local, huge, 3s);
  EXPECT_FALSE(big.answer);
  EXPECT_EQ(l.received(), 0);
  EXPECT_EQ(Ask(l.tcp(), *local, "small").answer, std::optional<std::string>("pong:small"));
}

}  // namespace
}  // namespace npuprof::broker
