#include "broker/listener_security.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/private_files.h"
#include "common/server_keys.h"
#include "common/socket_security.h"

namespace npuprof::broker {

Status PrepareDataDir(const std::string& data_dir) {
  auto r = EnsurePrivateDir(data_dir);
  if (!r.ok()) return Status(r.status().code(), "data dir: " + r.status().message());
  if (*r == PrivateDirOutcome::kTightened)
    spdlog::warn("data dir {} was readable by group or others; its mode is now 0700", data_dir);
  return Status::Ok();
}

Result<std::unique_ptr<ZapAuthenticator>> SecureListener(zmq::context_t& ctx, zmq::socket_t& router,
                                                         const std::string& data_dir,
                                                         const std::vector<std::string>& endpoints,
                                                         ListenerSecurity mode) {
  CapInboundMessages(router);
  auto keys = LoadOrCreateServerKeys(data_dir);  // made at first start, also while no tcp listener needs them
  if (!keys.ok()) return keys.status();
  const bool beyond_ipc = std::any_of(endpoints.begin(), endpoints.end(), [&](const std::string& ep) {
    return DataDirOfIpcEndpoint(ep) != std::optional<std::string>(data_dir);
  });
  ListenState state;
  state.curve = beyond_ipc && mode == ListenerSecurity::kCurveBeyondIpc;
  state.endpoints = endpoints;
  std::unique_ptr<ZapAuthenticator> zap;
  if (state.curve) {
    state.server_public_key = keys->server.public_key;
    auto started = ZapAuthenticator::Start(ctx, router, {data_dir, keys->local.public_key});
    if (!started.ok()) return started.status();
    zap = std::move(started).value();
    SetUpCurveServer(router, keys->server);
    spdlog::info("listener: CURVE on every endpoint; server public key {}", keys->server.public_key);
  } else if (beyond_ipc) {
    spdlog::warn("listener: CURVE is off (benchmark baseline): every peer that reaches {} is trusted",
                 fmt::join(endpoints, ", "));
  }
  if (Status s = WriteListenState(data_dir, state); !s.ok()) return s;
  return zap;
}

}  // namespace npuprof::broker
