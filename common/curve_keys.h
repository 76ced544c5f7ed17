// CURVE keys as text: Z85 strings (40 characters for 32 bytes), the key-file
// format peers keep them in, and making new pairs. Pure except MakeKeyPair
// (randomness); no file I/O here (see private_files.h, server_keys.h).
//
// Key file (one pair, or a public key alone):
//
//   # npuprof CURVE key pair: the secret key gives this peer's identity away
//   public-key = "<40 Z85 characters>"
//   secret-key = "<40 Z85 characters>"
//
// Blank lines and lines starting with '#' are ignored; each `name = value`
// line names public-key or secret-key once; double quotes around the value
// are optional. A file with a secret key must hold the public key that
// belongs to it (checked), so a file cannot name one identity and prove
// another.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof {

inline constexpr size_t kZ85KeyChars = 40;

// Ok when s is a Z85-encoded 32-byte key; else an error naming `what`.
Status ValidateZ85Key(std::string_view s, std::string_view what);

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85; empty in a public-key file
};

// A fresh key pair (libzmq's generator).
Result<CurveKeyPair> MakeCurveKeyPair();
// The public key of a Z85 secret key.
Result<std::string> CurvePublicOf(std::string_view secret_z85);

// Parses a key file's text. require_secret: a file without secret-key is an
// error (a peer's own key file); otherwise a public key alone is fine.
// `where` (usually the path) prefixes every error.
Result<CurveKeyPair> ParseKeyFile(std::string_view text, std::string_view where, bool require_secret);
// The key-file text for pair (a public-key file when secret_key is empty).
std::string FormatKeyFile(const CurveKeyPair& pair, std::string_view comment);

// The keys a connecting peer (client or worker) uses on a CURVE socket.
struct CurveClientKeys {
  std::string server_public;  // Z85 public key of the server it connects to
  CurveKeyPair own;           // its own pair
};

}  // namespace npuprof
