#include "common/server_keys.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/private_files.h"

namespace npuprof {

namespace {

constexpr std::string_view kIpcPrefix = "ipc://";
constexpr std::string_view kIpcSocketName = "/npuprof.sock";

// Loads the key pair at path, or makes it when the file does not exist.
Result<CurveKeyPair> LoadOrCreatePair(const std::string& path, std::string_view comment) {
  auto text = ReadSecretFile(path, kMaxKeyFileBytes);
  if (!text.ok() && text.status().code() == Code::kNotFound) {
    auto pair = MakeCurveKeyPair();
    if (!pair.ok()) return pair.status();
    bool created = false;
    if (Status s = CreateFileAtomically(path, FormatKeyFile(*pair, comment), 0600, &created); !s.ok()) return s;
    if (created) return *pair;
    text = ReadSecretFile(path, kMaxKeyFileBytes);  // another process made it first: use theirs
  }
  if (!text.ok()) return text.status();
  return ParseKeyFile(*text, path, /*require_secret=*/true);
}

}  // namespace

ServerKeyPaths ServerKeyPathsFor(const std::string& data_dir) {
  ServerKeyPaths p;
  p.dir = data_dir + "/curve";
  p.server_key = p.dir + "/server.key";
  p.server_pub = p.dir + "/server.pub";
  p.local_key = p.dir + "/local.key";
  p.allow_list = p.dir + "/allowed";
  p.allow_list_lock = p.dir + "/allowed.lock";
  p.listen_state = data_dir + "/listen.json";
  return p;
}

Result<ServerKeys> LoadOrCreateServerKeys(const std::string& data_dir) {
  const ServerKeyPaths p = ServerKeyPathsFor(data_dir);
  auto dir = EnsurePrivateDir(p.dir);
  if (!dir.ok()) return dir.status();
  auto server = LoadOrCreatePair(p.server_key, "npuprof server key pair: the secret key lets anyone act as this server");
  if (!server.ok()) return server.status();
  auto local = LoadOrCreatePair(p.local_key, "npuprof local peers' key pair (forked workers, clients naming the data dir)");
  if (!local.ok()) return local.status();
  // server.pub is only a copy to hand out: rewritten whenever it does not say the right key.
  const std::string pub_text = FormatKeyFile(CurveKeyPair{server->public_key, ""}, "npuprof server public key");
  auto current = ReadProtectedFile(p.server_pub, kMaxKeyFileBytes);
  if (!current.ok() || *current != pub_text)
    if (Status s = WriteFileAtomically(p.server_pub, pub_text, 0644); !s.ok()) return s;
  return ServerKeys{*server, *local};
}

Result<AllowList> LoadAllowList(const std::string& data_dir) {
  const ServerKeyPaths p = ServerKeyPathsFor(data_dir);
  auto text = ReadProtectedFile(p.allow_list, kMaxAllowListBytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return AllowList();
    return text.status();
  }
  return AllowList::Parse(*text, p.allow_list);
}

Status EditAllowList(const std::string& data_dir, const std::function<Status(AllowList&)>& edit) {
  const ServerKeyPaths p = ServerKeyPathsFor(data_dir);
  if (auto dir = EnsurePrivateDir(p.dir); !dir.ok()) return dir.status();
  const int lock = ::open(p.allow_list_lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock < 0) return Status::Io(fmt::format("cannot open {}: {}", p.allow_list_lock, std::strerror(errno)));
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the lock
  } unlock{lock};
  while (::flock(lock, LOCK_EX) != 0)
    if (errno != EINTR) return Status::Io(fmt::format("cannot lock {}: {}", p.allow_list_lock, std::strerror(errno)));
  auto list = LoadAllowList(data_dir);
  if (!list.ok()) return list.status();
  if (Status s = edit(*list); !s.ok()) return s;
  return WriteFileAtomically(p.allow_list, list->Format(), 0600);
}

Status WriteListenState(const std::string& data_dir, const ListenState& state) {
  nlohmann::json j = {{"curve", state.curve}, {"endpoints", state.endpoints}};
  if (state.curve) j["server_public_key"] = state.server_public_key;
  return WriteFileAtomically(ServerKeyPathsFor(data_dir).listen_state, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", 0600);
}

Result<ListenState> ReadListenState(const std::string& data_dir) {
  const std::string path = ServerKeyPathsFor(data_dir).listen_state;
  auto text = ReadProtectedFile(path, kMaxKeyFileBytes);
  if (!text.ok()) return text.status();
  const Result<nlohmann::json> parsed = ParseJson(*text);
  const nlohmann::json j = parsed.ok() ? *parsed : nlohmann::json(nullptr);
  if (!j.is_object() || !j.contains("curve") || !j["curve"].is_boolean())
    return Status::Corruption(fmt::format("{}: expected an object with a boolean \"curve\"", path));
  ListenState st;
  st.curve = j["curve"].get<bool>();
  if (j.contains("endpoints") && j["endpoints"].is_array())
    for (const auto& e : j["endpoints"])
      if (e.is_string()) st.endpoints.push_back(e.get<std::string>());
  if (st.curve) {
    if (!j.contains("server_public_key") || !j["server_public_key"].is_string())
      return Status::Corruption(fmt::format("{}: \"curve\" is true but there is no \"server_public_key\"", path));
    st.server_public_key = j["server_public_key"].get<std::string>();
    if (Status s = ValidateZ85Key(st.server_public_key, path + ": server_public_key"); !s.ok()) return s;
  }
  return st;
}

Result<std::optional<CurveClientKeys>> LocalPeerKeys(const std::string& data_dir) {
  auto st = ReadListenState(data_dir);
  if (!st.ok()) {
    if (st.status().code() == Code::kNotFound) return std::optional<CurveClientKeys>();
    return st.status();
  }
  if (!st->curve) return std::optional<CurveClientKeys>();
  const std::string path = ServerKeyPathsFor(data_dir).local_key;
  auto text = ReadSecretFile(path, kMaxKeyFileBytes);
  if (!text.ok()) return text.status();
  auto pair = ParseKeyFile(*text, path, /*require_secret=*/true);
  if (!pair.ok()) return pair.status();
  return std::optional<CurveClientKeys>(CurveClientKeys{st->server_public_key, *pair});
}

std::optional<std::string> DataDirOfIpcEndpoint(const std::string& endpoint) {
  if (endpoint.size() <= kIpcPrefix.size() + kIpcSocketName.size()) return std::nullopt;
  if (endpoint.compare(0, kIpcPrefix.size(), kIpcPrefix) != 0) return std::nullopt;
  if (endpoint.compare(endpoint.size() - kIpcSocketName.size(), kIpcSocketName.size(), kIpcSocketName) != 0)
    return std::nullopt;
  return endpoint.substr(kIpcPrefix.size(), endpoint.size() - kIpcPrefix.size() - kIpcSocketName.size());
}

}  // namespace npuprof
