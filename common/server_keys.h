// The CURVE material in a server's data dir, and how a peer on the same
// machine finds it (docs/SECURITY.md):
//
//   <data dir>/                 0700 (EnsurePrivateDir)
//     listen.json               what the running server listens on, and
//                               whether its socket uses CURVE (rewritten at
//                               every start, before it binds)
//     curve/                    0700
//       server.key              0600  the server's key pair (made at first start)
//       server.pub              0644  its public key alone, to hand to peers
//       local.key               0600  the pair local peers use (forked
//                               workers, clients naming --data-dir); always admitted
//       allowed                 0600  the allow-list (allow_list.h)
//       allowed.lock                  serialises `npuprof keys allow|remove`
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/allow_list.h"
#include "common/curve_keys.h"
#include "common/status.h"

namespace npuprof {

// Largest key file or allow-list read (far above any real one).
inline constexpr size_t kMaxKeyFileBytes = 64 * 1024;
inline constexpr size_t kMaxAllowListBytes = 4 * 1024 * 1024;

struct ServerKeyPaths {
  std::string dir;  // <data dir>/curve
  std::string server_key, server_pub, local_key, allow_list, allow_list_lock;
  std::string listen_state;  // <data dir>/listen.json
};
ServerKeyPaths ServerKeyPathsFor(const std::string& data_dir);

struct ServerKeys {
  CurveKeyPair server;
  CurveKeyPair local;
};
// Loads the server's and the local peers' key pairs, making any that is
// missing (first start); makes curve/ private. The caller has made the data
// dir private (EnsurePrivateDir).
Result<ServerKeys> LoadOrCreateServerKeys(const std::string& data_dir);

// The allow-list file; an empty list when it does not exist yet.
Result<AllowList> LoadAllowList(const std::string& data_dir);
// Changes the allow-list under its lock: edit gets the current list and
// changes it; the result is written atomically (0600) when edit succeeds.
Status EditAllowList(const std::string& data_dir, const std::function<Status(AllowList&)>& edit);

// What the running server listens on (listen.json).
struct ListenState {
  bool curve = false;
  std::vector<std::string> endpoints;
  std::string server_public_key;  // set when curve
};
Status WriteListenState(const std::string& data_dir, const ListenState& state);
// kNotFound when no server ever started on data_dir.
Result<ListenState> ReadListenState(const std::string& data_dir);

// The keys a peer on this machine that names data_dir uses: the local pair
// and the server's public key when the server there uses CURVE; nullopt when
// it does not (or never started: then nothing answers anyway).
Result<std::optional<CurveClientKeys>> LocalPeerKeys(const std::string& data_dir);

// The data dir of an ipc endpoint ipc://<dir>/npuprof.sock; nullopt for any
// other endpoint.
std::optional<std::string> DataDirOfIpcEndpoint(const std::string& endpoint);

}  // namespace npuprof
