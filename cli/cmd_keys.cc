// `npuprof keys [show] | new | allow | list | remove`: the server's CURVE key
// and the allow-list of the peers its tcp listener admits (docs/SECURITY.md).
// These verbs work on the data dir's files directly, on the server's
// machine, as the server's user; a running server re-reads the allow-list
// on the next connection, so no restart is needed.
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/allow_list.h"
#include "common/private_files.h"
#include "common/server_keys.h"

namespace npuprof::cli {

namespace {

json PeerJson(const AllowedPeer& p) { return json{{"name", p.name}, {"public_key", p.public_key}}; }

// The data dir made private, with the server's keys made when missing.
Result<ServerKeys> OpenKeys(const std::string& data_dir) {
  if (auto d = EnsurePrivateDir(data_dir); !d.ok()) return Status(d.status().code(), "data dir: " + d.status().message());
  return LoadOrCreateServerKeys(data_dir);
}

// A peer's public key given on the command line: Z85, or a file holding one.
Result<std::string> PeerPublicKey(const std::string& value) {
  if (ValidateZ85Key(value, "KEY").ok()) return value;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(value, ec))
    return Status::Invalid(fmt::format("KEY: '{}' is neither a CURVE public key (40 Z85 characters) nor a key file",
                                       value.substr(0, 80)));
  auto text = ReadProtectedFile(value, kMaxKeyFileBytes);
  if (!text.ok()) return text.status();
  auto pair = ParseKeyFile(*text, value, /*require_secret=*/false);
  if (!pair.ok()) return pair.status();
  return pair->public_key;
}

void Show(const std::string& data_dir_flag) {
  const std::string dd = ResolveDataDir(data_dir_flag);
  auto keys = OpenKeys(dd);
  if (!keys.ok()) return Fail(2, keys.status().message());
  const ServerKeyPaths p = ServerKeyPathsFor(dd);
  json out = {{"data_dir", dd},
              {"server_public_key", keys->server.public_key},
              {"server_public_key_file", p.server_pub},
              {"allow_list", p.allow_list}};
  if (auto st = ReadListenState(dd); st.ok()) {
    out["curve"] = st->curve;
    out["endpoints"] = st->endpoints;
  }
  PrintJson(out);
}

}  // namespace

void AddKeysCommand(CLI::App& app) {
  auto* keys = app.add_subcommand(
      "keys", "The server's CURVE key and the peers its tcp listener admits (no subcommand: same as `keys show`)");
  keys->require_subcommand(0, 1);
  auto top_dir = std::make_shared<std::string>();
  keys->add_option("--data-dir", *top_dir, "Data dir of the server (env NPUPROF_DATA_DIR)");
  keys->callback([keys, top_dir] {
    if (keys->get_subcommands().empty()) Show(*top_dir);
  });
  {
    auto* cmd = keys->add_subcommand("show", "Print the server's public key (made now if the server never started)");
    auto dir = std::make_shared<std::string>();
    cmd->add_option("--data-dir", *dir, "Data dir of the server (env NPUPROF_DATA_DIR)");
    cmd->callback([dir, top_dir] { Show(dir->empty() ? *top_dir : *dir); });
  }
  {
    auto* cmd = keys->add_subcommand("new", "Make a key pair for a remote worker or client");
    struct Opts {
      std::string out;
      bool force = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--out", o->out, "Key file to write (mode 0600; holds the secret key)")->required();
    cmd->add_flag("--force", o->force, "Replace an existing file");
    cmd->callback([o] {
      auto pair = MakeCurveKeyPair();
      if (!pair.ok()) return Fail(2, pair.status().message());
      const std::string path = std::filesystem::absolute(o->out).lexically_normal().string();
      const std::string text = FormatKeyFile(*pair, "npuprof peer key pair: the secret key lets anyone act as this peer");
      if (o->force) {
        if (Status s = WriteFileAtomically(path, text, 0600); !s.ok()) return Fail(2, s.message());
      } else {
        bool created = false;
        if (Status s = CreateFileAtomically(path, text, 0600, &created); !s.ok()) return Fail(2, s.message());
        if (!created) return Fail(2, fmt::format("{} exists already (--force replaces it)", path));
      }
      PrintJson(json{{"key_file", path},
                     {"public_key", pair->public_key},
                     {"next", "on the server: " + AllowCommandFor("NAME", pair->public_key)}});
    });
  }
  {
    auto* cmd = keys->add_subcommand("allow", "Admit a peer's public key on the tcp listener");
    struct Opts {
      std::string data_dir, name, key;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--data-dir", o->data_dir, "Data dir of the server (env NPUPROF_DATA_DIR)");
    cmd->add_option("NAME", o->name, "A name for the peer [A-Za-z0-9._@-], shown in the server's log")->required();
    cmd->add_option("KEY", o->key, "Its public key (Z85, as `npuprof keys new` prints it) or its key file")->required();
    cmd->callback([o] {
      if (Status s = ValidatePeerName(o->name); !s.ok()) return Fail(2, "NAME: " + s.message());
      auto key = PeerPublicKey(o->key);
      if (!key.ok()) return Fail(2, key.status().message());
      const std::string dd = ResolveDataDir(o->data_dir);
      auto server = OpenKeys(dd);
      if (!server.ok()) return Fail(2, server.status().message());
      if (*key == server->server.public_key || *key == server->local.public_key)
        return Fail(2, "KEY is one of the server's own keys: give the peer a pair of its own (`npuprof keys new`)");
      bool added = false;
      size_t peers = 0;
      Status s = EditAllowList(dd, [&](AllowList& list) {
        Status a = list.Add(AllowedPeer{o->name, *key}, &added);
        peers = list.peers().size();
        return a;
      });
      if (!s.ok()) return Fail(2, s.message());
      PrintJson(json{{"allowed", PeerJson(AllowedPeer{o->name, *key})},
                     {"added", added},
                     {"peers", peers},
                     {"allow_list", ServerKeyPathsFor(dd).allow_list}});
    });
  }
  {
    auto* cmd = keys->add_subcommand("list", "List the peers the tcp listener admits");
    auto dir = std::make_shared<std::string>();
    cmd->add_option("--data-dir", *dir, "Data dir of the server (env NPUPROF_DATA_DIR)");
    cmd->callback([dir] {
      const std::string dd = ResolveDataDir(*dir);
      auto list = LoadAllowList(dd);
      if (!list.ok()) return Fail(2, list.status().message());
      json peers = json::array();
      for (const auto& p : list->peers()) peers.push_back(PeerJson(p));
      PrintJson(json{{"allow_list", ServerKeyPathsFor(dd).allow_list}, {"peers", peers}});
    });
  }
  {
    auto* cmd = keys->add_subcommand("remove", "Stop admitting a peer (from its next connection on)");
    struct Opts {
      std::string data_dir, name;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--data-dir", o->data_dir, "Data dir of the server (env NPUPROF_DATA_DIR)");
    cmd->add_option("NAME", o->name, "The peer's name in the allow-list")->required();
    cmd->callback([o] {
      const std::string dd = ResolveDataDir(o->data_dir);
      if (auto d = EnsurePrivateDir(dd); !d.ok()) return Fail(2, "data dir: " + d.status().message());
      AllowedPeer removed;
      Status s = EditAllowList(dd, [&](AllowList& list) {
        auto r = list.Remove(o->name);
        if (!r.ok()) return r.status();
        removed = *r;
        return Status::Ok();
      });
      if (!s.ok()) return Fail(2, s.message());
      PrintJson(json{{"removed", PeerJson(removed)},
                     {"note", "new connections with this key are refused; a peer connected now keeps its connection "
                              "until it disconnects or the server restarts"}});
    });
  }
}

}  // namespace npuprof::cli
