#include "statemachine/json_message_table.h"

#include <google/protobuf/util/json_util.h>

namespace npuprof::sm {

namespace pb = google::protobuf;

JsonMessageTable::JsonMessageTable(const pb::FileDescriptor& file, const KeyOf& key_of, const IsNeeded& is_needed) {
  for (int i = 0; i < file.message_type_count(); ++i) {
    const pb::Descriptor* d = file.message_type(i);
    std::string key = key_of(*d);
    if (key.empty()) continue;
    Entry e{pb::MessageFactory::generated_factory()->GetPrototype(d), {}};
    for (int f = 0; f < d->field_count(); ++f)
      if (is_needed(*d->field(f))) e.needed.push_back(d->field(f)->name());
    if (entries_.emplace(key, std::move(e)).second) keys_.push_back(std::move(key));
  }
}

const pb::Message* JsonMessageTable::Prototype(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.prototype;
}

std::string JsonMessageTable::MissingKey(std::string_view key, const nlohmann::json& payload) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || !payload.is_object()) return "";
  for (const std::string& k : it->second.needed)
    if (!payload.contains(k)) return k;
  return "";
}

std::optional<std::string> JsonMessageTable::Parse(std::string_view text, pb::Message& out,
                                                   bool tolerate_unknown_keys) {
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = tolerate_unknown_keys;
  const auto st = pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &out, options);
  if (st.ok()) return std::nullopt;
  return std::string(st.message());
}

}  // namespace npuprof::sm
