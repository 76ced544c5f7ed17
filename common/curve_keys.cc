#include "common/curve_keys.h"

#include <zmq.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "common/content_lines.h"
#include "common/text.h"

namespace npuprof {

Status ValidateZ85Key(std::string_view s, std::string_view what) {
  if (s.size() != kZ85KeyChars)
    return Status::Invalid(fmt::format("{}: a CURVE key is {} Z85 characters, got {}", what, kZ85KeyChars, s.size()));
  const std::string copy(s);  // zmq_z85_decode wants a NUL-terminated string
  uint8_t raw[32];
  if (zmq_z85_decode(raw, copy.c_str()) == nullptr)
    return Status::Invalid(fmt::format("{}: not a Z85-encoded key (a character outside Z85's alphabet)", what));
  return Status::Ok();
}

Result<CurveKeyPair> MakeCurveKeyPair() {
  char pub[kZ85KeyChars + 1] = {0};
  char sec[kZ85KeyChars + 1] = {0};
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::Internal("cannot make a CURVE key pair: this libzmq was built without CURVE (libsodium)");
  return CurveKeyPair{pub, sec};
}

Result<std::string> CurvePublicOf(std::string_view secret_z85) {
  if (Status s = ValidateZ85Key(secret_z85, "secret-key"); !s.ok()) return s;
  const std::string sec(secret_z85);
  char pub[kZ85KeyChars + 1] = {0};
  if (zmq_curve_public(pub, sec.c_str()) != 0)
    return Status::Internal("cannot derive a CURVE public key: this libzmq was built without CURVE (libsodium)");
  return std::string(pub);
}

Result<CurveKeyPair> ParseKeyFile(std::string_view text, std::string_view where, bool require_secret) {
  std::optional<std::string> pub, sec;
  Status walked = ForEachContentLine(text, [&](int line_no, std::string_view line) -> Status {
    // `name = value`; the name ends at a blank or '=' (Z85 values contain '=').
    const size_t name_end = std::min(line.find_first_of(" \t="), line.size());
    const std::string_view name = line.substr(0, name_end);
    const std::string_view rest = Trim(line.substr(name_end));
    if (rest.empty() || rest.front() != '=')
      return Status::Invalid(
          fmt::format("{} line {}: expected `public-key = \"...\"` or `secret-key = \"...\"`", where, line_no));
    std::string_view value = Trim(rest.substr(1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    std::optional<std::string>* slot = name == "public-key" ? &pub : name == "secret-key" ? &sec : nullptr;
    if (!slot)
      return Status::Invalid(fmt::format("{} line {}: unknown name '{}' (known: public-key, secret-key)", where, line_no,
                                         std::string(name.substr(0, 40))));
    if (slot->has_value()) return Status::Invalid(fmt::format("{} line {}: {} given twice", where, line_no, name));
    if (Status s = ValidateZ85Key(value, fmt::format("{} line {}: {}", where, line_no, name)); !s.ok()) return s;
    *slot = std::string(value);
    return Status::Ok();
  });
  if (!walked.ok()) return walked;
  if (!pub) return Status::Invalid(fmt::format("{}: no public-key line", where));
  if (require_secret && !sec)
    return Status::Invalid(fmt::format("{}: no secret-key line (this is a public key; a peer needs its own key pair: "
                                       "`npuprof keys new --out FILE`)",
                                       where));
  if (sec) {
    auto derived = CurvePublicOf(*sec);
    if (!derived.ok()) return derived.status();
    if (*derived != *pub)
      return Status::Invalid(fmt::format("{}: public-key is not the public key of secret-key", where));
  }
  return CurveKeyPair{*pub, sec.value_or("")};
}

std::string FormatKeyFile(const CurveKeyPair& pair, std::string_view comment) {
  std::string out = fmt::format("# {}\npublic-key = \"{}\"\n", comment, pair.public_key);
  if (!pair.secret_key.empty()) out += fmt::format("secret-key = \"{}\"\n", pair.secret_key);
  return out;
}

}  // namespace npuprof
