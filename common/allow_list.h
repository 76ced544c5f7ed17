// AllowList: the public keys of the peers (clients and workers) a server
// admits on its CURVE listeners, each under a name. Pure: parsing,
// formatting, lookups and edits; the file lives in the server's data dir
// (server_keys.h) and is edited by `npuprof keys allow|remove`.
//
// Text format, one peer per line, in the order added:
//
//   # comment lines start with '#'
//   <public key, 40 Z85 characters> <name>
//
// Names are 1-64 characters of [A-Za-z0-9._@-]; "local" is reserved for the
// server's own local key. A name or a key listed twice is an error, so the
// file says exactly one thing per peer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof {

inline constexpr std::string_view kLocalPeerName = "local";

struct AllowedPeer {
  std::string name;
  std::string public_key;  // Z85
};

// Ok when name may name a peer; else an error saying what a name may be.
Status ValidatePeerName(std::string_view name);

// The command that admits public_key under name, as a line a user pastes
// into a shell: "npuprof keys allow NAME -- 'KEY'". Z85 keys hold shell
// characters ($ & ( ) * ? ! # < > [ ] { }) and may start with '-', which
// the command line would take for an option: hence the quotes and the
// "--" (Z85 has no quote character).
std::string AllowCommandFor(std::string_view name, std::string_view public_key);

class AllowList {
 public:
  // `where` (usually the path) prefixes errors, with the line number.
  static Result<AllowList> Parse(std::string_view text, std::string_view where);
  std::string Format() const;

  const std::vector<AllowedPeer>& peers() const { return peers_; }
  // nullptr when the key is not listed.
  const AllowedPeer* FindKey(std::string_view public_key) const;
  const AllowedPeer* FindName(std::string_view name) const;
  // Adds a peer. Adding the same (name, key) again is a no-op (*added =
  // false); a name or key already listed with another partner is kConflict.
  Status Add(const AllowedPeer& peer, bool* added = nullptr);
  // Removes the peer named name; kNotFound when there is none.
  Result<AllowedPeer> Remove(std::string_view name);

 private:
  std::vector<AllowedPeer> peers_;
};

}  // namespace npuprof
