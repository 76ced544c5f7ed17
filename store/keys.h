// Key encodings of the EventStore column families (see event_store.h).
// Integers are 8-byte big-endian so that byte order equals numeric order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npuprof::store::keys {

void PutU64BE(std::string* out, uint64_t v);
// Decodes exactly 8 bytes; nullopt if the size is wrong.
std::optional<uint64_t> GetU64BE(std::string_view in);

// events CF: run_id '\0' seq(BE).
std::string EventKey(std::string_view run_id, uint64_t seq);
// Every event key of run_id starts with this prefix (run_id '\0').
std::string EventPrefix(std::string_view run_id);
// Exclusive upper bound of all event keys of run_id (run_id '\1').
std::string EventUpperBound(std::string_view run_id);
struct EventKeyParts {
  std::string_view run_id;
  uint64_t seq;
};
std::optional<EventKeyParts> ParseEventKey(std::string_view key);

// global CF: global_pos(BE).
std::string GlobalKey(uint64_t pos);
std::optional<uint64_t> ParseGlobalKey(std::string_view key);

// A run id is usable as a key when non-empty and free of '\0'.
bool ValidRunId(std::string_view run_id);

}  // namespace npuprof::store::keys
