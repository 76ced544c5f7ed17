#include "store/keys.h"

namespace npuprof::store::keys {

void PutU64BE(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

std::optional<uint64_t> GetU64BE(std::string_view in) {
  if (in.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (char c : in) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

std::string EventKey(std::string_view run_id, uint64_t seq) {
  std::string k = EventPrefix(run_id);
  PutU64BE(&k, seq);
  return k;
}

std::string EventPrefix(std::string_view run_id) {
  std::string k;
  k.reserve(run_id.size() + 9);
  k.append(run_id);
  k.push_back('\0');
  return k;
}

std::string EventUpperBound(std::string_view run_id) {
  std::string k(run_id);
  k.push_back('\1');
  return k;
}

std::optional<EventKeyParts> ParseEventKey(std::string_view key) {
  if (key.size() < 10 || key[key.size() - 9] != '\0') return std::nullopt;
  auto seq = GetU64BE(key.substr(key.size() - 8));
  if (!seq) return std::nullopt;
  return EventKeyParts{key.substr(0, key.size() - 9), *seq};
}

std::string GlobalKey(uint64_t pos) {
  std::string k;
  PutU64BE(&k, pos);
  return k;
}

std::optional<uint64_t> ParseGlobalKey(std::string_view key) { return GetU64BE(key); }

bool ValidRunId(std::string_view run_id) {
  return !run_id.empty() && run_id.find('\0') == std::string_view::npos;
}

}  // namespace npuprof::store::keys
