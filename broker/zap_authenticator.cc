#include "broker/zap_authenticator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/refusal_log.h"
#include "broker/zap_protocol.h"
#include "common/server_keys.h"
#include "common/socket_security.h"
#include "common/time_util.h"
#include "common/utf8.h"

namespace npuprof::broker {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string UniqueInproc(const char* what) {
  static std::atomic<uint64_t> n{0};
  return fmt::format("inproc://npuprof-{}-{}-{}", what, ::getpid(), n.fetch_add(1));
}

// Whether a file changed: identity and times from stat (all zero when missing).
using FileStamp = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;
FileStamp StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec};
}

// The allow-list as its file says now: re-read when the file's stamp changed.
class AllowListCache {
 public:
  explicit AllowListCache(std::string data_dir)
      : data_dir_(std::move(data_dir)), path_(ServerKeyPathsFor(data_dir_).allow_list) {}
  const AllowList& Current() {
    const FileStamp now = StampOf(path_);
    if (loaded_ && now == stamp_) return list_;
    stamp_ = now;
    loaded_ = true;
    auto l = LoadAllowList(data_dir_);
    if (l.ok()) {
      list_ = std::move(l).value();
      spdlog::info("allow-list {}: {} peer(s) admitted besides the local key", path_, list_.peers().size());
    } else {
      list_ = AllowList();
      spdlog::error("allow-list unusable, only the local key is admitted until it is fixed: {}",
                    l.status().ToString());
    }
    return list_;
  }

 private:
  std::string data_dir_, path_;
  bool loaded_ = false;
  FileStamp stamp_{};
  AllowList list_;
};

std::optional<std::vector<std::string>> RecvAll(zmq::socket_t& s) {
  std::vector<std::string> out;
  zmq::message_t m;
  if (!s.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
  out.emplace_back(static_cast<const char*>(m.data()), m.size());
  while (m.more()) {
    zmq::message_t next;
    if (!s.recv(next, zmq::recv_flags::none)) break;
    out.emplace_back(static_cast<const char*>(next.data()), next.size());
    m.swap(next);
  }
  return out;
}

void SendAll(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

// What a handshake failure the ROUTER's monitor reports says about the peer
// (nullopt: not worth a line, e.g. a ZAP refusal, logged by the handler).
std::optional<std::string> HandshakeFailureText(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    return std::string("a peer that broke off the handshake (one without a CURVE key, or holding another server key)");
  if (event != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) return std::nullopt;
  if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) return std::string("a peer without a CURVE key");
  if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
    return std::string("a peer whose CURVE handshake does not decrypt (it holds another server key)");
  return fmt::format("protocol error {:#x} in the handshake", value);
}

}  // namespace

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx, Options opts)
    : opts_(std::move(opts)),
      handler_(ctx, zmq::socket_type::rep),
      monitor_(ctx, zmq::socket_type::pair),
      wake_rx_(ctx, zmq::socket_type::pair),
      wake_tx_(ctx, zmq::socket_type::pair) {
  for (zmq::socket_t* s : {&handler_, &monitor_, &wake_rx_, &wake_tx_}) s->set(zmq::sockopt::linger, 0);
}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(zmq::context_t& ctx, zmq::socket_t& monitored,
                                                                  Options opts) {
  std::unique_ptr<ZapAuthenticator> a(new ZapAuthenticator(ctx, std::move(opts)));
  const std::string wake = UniqueInproc("zap-stop");
  const std::string mon = UniqueInproc("router-monitor");
  try {
    a->handler_.bind(kZapEndpoint);
    a->wake_rx_.bind(wake);
    a->wake_tx_.connect(wake);
  } catch (const zmq::error_t& e) {
    return Status::Internal(fmt::format("cannot start the ZAP handler at {}: {}", kZapEndpoint, e.what()));
  }
  if (zmq_socket_monitor(monitored.handle(), mon.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
    return Status::Internal(fmt::format("cannot monitor the listening socket: {}", zmq_strerror(zmq_errno())));
  a->monitor_.connect(mon);
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  return a;
}

ZapAuthenticator::~ZapAuthenticator() {
  if (thread_.joinable()) {
    try {
      wake_tx_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::error("ZAP handler: cannot signal its thread to stop: {}", e.what());
    }
    thread_.join();
  }
}

void ZapAuthenticator::Loop() {
  AllowListCache allowed(opts_.data_dir);
  RefusalLog refusals;
  (void)allowed.Current();  // log the list the server starts with
  for (;;) {
    zmq::pollitem_t items[] = {{handler_.handle(), 0, ZMQ_POLLIN, 0},
                               {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                               {wake_rx_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(-1));
      if (items[2].revents & ZMQ_POLLIN) return;
      if (items[0].revents & ZMQ_POLLIN) {
        auto frames = RecvAll(handler_);
        if (frames) {
          auto req = ParseZapRequest(*frames);
          if (!req.ok()) {
            SendAll(handler_, ZapErrorReplyFrames(*frames, req.status().message()));
          } else {
            const ZapVerdict v = DecideZap(*req, allowed.Current(), opts_.local_public_key, kZapDomain);
            SendAll(handler_, ZapReplyFrames(*req, v));
            const std::string address = ToValidUtf8(req->address.empty() ? "(local)" : req->address);
            const std::string key = v.public_key.empty() ? "(none)" : v.public_key;
            if (v.admitted) {
              admitted_.fetch_add(1);
              if (v.user_id != kLocalPeerName)
                spdlog::info("listener: admitted peer '{}' key {} from {}", v.user_id, key, address);
            } else {
              refused_.fetch_add(1);
              uint64_t suppressed = 0;
              if (refusals.ShouldLog(key + " " + address, NowMs(), &suppressed))
                spdlog::warn("listener: refused key {} from {} ({}){}; admit it with `{}`", key,
                             address, v.status_text,
                             suppressed ? fmt::format(", {} more refusal(s) since the last line", suppressed) : "",
                             AllowCommandFor("NAME", key));
            }
          }
        }
      }
      if (items[1].revents & ZMQ_POLLIN) {
        while (auto ev = RecvAll(monitor_)) {
          if (ev->empty() || (*ev)[0].size() < 6) continue;
          uint16_t event = 0;
          uint32_t value = 0;
          std::memcpy(&event, (*ev)[0].data(), sizeof(event));
          std::memcpy(&value, (*ev)[0].data() + 2, sizeof(value));
          const std::string endpoint = ev->size() > 1 ? ToValidUtf8((*ev)[1]) : "";
          auto what = HandshakeFailureText(event, value);
          if (!what) continue;
          refused_.fetch_add(1);
          uint64_t suppressed = 0;
          if (refusals.ShouldLog(endpoint + " " + *what, NowMs(), &suppressed))
            spdlog::warn("listener {}: refused {} (libzmq does not report its address){}", endpoint, *what,
                         suppressed ? fmt::format("; {} more since the last line", suppressed) : "");
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() == EINTR) continue;
      // The handler socket stays open: a handshake waiting for it times out
      // (refused) rather than being admitted by a missing handler.
      spdlog::error("ZAP handler: {}", e.what());
    } catch (const std::exception& e) {
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
}

}  // namespace npuprof::broker
