// JsonMessageTable: the messages of one compiled .proto file, keyed by a name
// each message carries (an event type, a task kind), used to judge JSON
// payloads against them. The one place that knows how a JSON payload is held
// to its message: event_schema.h (stored events), task_schema.h (task
// payloads and results).
//
// Judging (Judge) is protobuf's JSON parse of the text into a message of the
// key's type (field names as written in the .proto, bools as true or false),
// after a check that the keys the file marks as needed are present (JSON null
// counts as present).
// Callers word the complaint for their document (event, payload, spec...).
// Pure: no I/O; immutable after construction, so thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

namespace npuprof::sm {

class JsonMessageTable {
 public:
  // The key of a message ("" leaves it out: a part, not an entry).
  using KeyOf = std::function<std::string(const google::protobuf::Descriptor&)>;
  // Whether a payload must hold this field's key.
  using IsNeeded = std::function<bool(const google::protobuf::FieldDescriptor&)>;

  JsonMessageTable(const google::protobuf::FileDescriptor& file, const KeyOf& key_of, const IsNeeded& is_needed);

  // The message kept under key, or nullptr.
  const google::protobuf::Message* Prototype(std::string_view key) const;
  // The keys in the file's order.
  const std::vector<std::string>& Keys() const { return keys_; }

  // Why a document does not fit its message: the first needed key it lacks,
  // or else the parser's complaint (which names the key). One is set.
  struct Misfit {
    std::string missing_key;
    std::string why;
  };
  // Judges payload, a JSON object whose text is `text` ("" = dump payload,
  // invalid UTF-8 replaced), against the message kept under key; nullopt
  // when it fits or when key has none. `out`, when given, must be of key's
  // message type and receives the parse.
  std::optional<Misfit> Judge(std::string_view key, const nlohmann::json& payload, std::string_view text,
                              bool tolerate_unknown_keys, google::protobuf::Message* out = nullptr) const;

  // Parses text into out; the parser's complaint when it does not fit. Unless
  // unknown keys are tolerated (a document read as stored), a key must be a
  // field's name as written in the .proto (protobuf's parser would also take
  // its lowerCamelCase form) and a bool true, false or null (the parser
  // would also take "yes" or "1" as true). `parsed`, when given, is the text
  // already parsed (saves a second parse).
  static std::optional<std::string> Parse(std::string_view text, google::protobuf::Message& out,
                                          bool tolerate_unknown_keys, const nlohmann::json* parsed = nullptr);

 private:
  struct Entry {
    const google::protobuf::Message* prototype;
    std::vector<std::string> needed;
  };
  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<std::string> keys_;
};

}  // namespace npuprof::sm
