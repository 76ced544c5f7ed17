#include "common/allow_list.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/curve_keys.h"
#include "common/content_lines.h"
#include "common/text.h"

namespace npuprof {

Status ValidatePeerName(std::string_view name) {
  const bool chars_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '@' || c == '-';
  });
  if (name.empty() || name.size() > 64 || !chars_ok)
    return Status::Invalid("a peer name is 1-64 characters of A-Z a-z 0-9 . _ @ -");
  if (name == kLocalPeerName)
    return Status::Invalid(fmt::format("the name '{}' is reserved for the server's local key", kLocalPeerName));
  return Status::Ok();
}

Result<AllowList> AllowList::Parse(std::string_view text, std::string_view where) {
  AllowList list;
  Status walked = ForEachContentLine(text, [&](int line_no, std::string_view line) -> Status {
    const size_t sp = line.find_first_of(" \t");
    if (sp == std::string_view::npos)
      return Status::Invalid(fmt::format("{} line {}: expected `<public key> <name>`", where, line_no));
    const std::string_view key = line.substr(0, sp);
    const std::string_view name = Trim(line.substr(sp + 1));
    if (Status s = ValidateZ85Key(key, fmt::format("{} line {}: public key", where, line_no)); !s.ok()) return s;
    if (Status s = ValidatePeerName(name); !s.ok())
      return Status::Invalid(fmt::format("{} line {}: {}", where, line_no, s.message()));
    if (Status s = list.Add(AllowedPeer{std::string(name), std::string(key)}); !s.ok())
      return Status::Invalid(fmt::format("{} line {}: {}", where, line_no, s.message()));
    return Status::Ok();
  });
  if (!walked.ok()) return walked;
  return list;
}

std::string AllowList::Format() const {
  std::string out =
      "# npuprof allow-list: the peers admitted on CURVE listeners, \"<public key> <name>\" per line.\n"
      "# Edit with `npuprof keys allow NAME KEY` and `npuprof keys remove NAME`.\n";
  for (const auto& p : peers_) out += fmt::format("{} {}\n", p.public_key, p.name);
  return out;
}

const AllowedPeer* AllowList::FindKey(std::string_view public_key) const {
  for (const auto& p : peers_)
    if (p.public_key == public_key) return &p;
  return nullptr;
}

const AllowedPeer* AllowList::FindName(std::string_view name) const {
  for (const auto& p : peers_)
    if (p.name == name) return &p;
  return nullptr;
}

Status AllowList::Add(const AllowedPeer& peer, bool* added) {
  if (added) *added = false;
  const AllowedPeer* by_name = FindName(peer.name);
  const AllowedPeer* by_key = FindKey(peer.public_key);
  if (by_name && by_key && by_name == by_key) return Status::Ok();
  if (by_name)
    return Status::Conflict(fmt::format("the name '{}' is already listed with another key (remove it first)", peer.name));
  if (by_key)
    return Status::Conflict(fmt::format("this key is already listed as '{}'", by_key->name));
  peers_.push_back(peer);
  if (added) *added = true;
  return Status::Ok();
}

std::string AllowCommandFor(std::string_view name, std::string_view public_key) {
  return fmt::format("npuprof keys allow {} -- '{}'", name, public_key);
}

Result<AllowedPeer> AllowList::Remove(std::string_view name) {
  auto it = std::find_if(peers_.begin(), peers_.end(), [&](const AllowedPeer& p) { return p.name == name; });
  if (it == peers_.end()) return Status::NotFound(fmt::format("no peer named '{}' in the allow-list", name));
  AllowedPeer out = *it;
  peers_.erase(it);
  return out;
}

}  // namespace npuprof
