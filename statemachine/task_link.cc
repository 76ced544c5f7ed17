#include "statemachine/task_link.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

namespace npuprof::sm {
namespace {

// Each figure of TaskLink: its key and its field.
struct Figure {
  const char* key;
  int64_t (events::TaskLink::*get)() const;
  void (events::TaskLink::*set)(int64_t);
};

constexpr Figure kFigures[] = {
    {"round_trips", &events::TaskLink::round_trips, &events::TaskLink::set_round_trips},
    {"commands", &events::TaskLink::commands, &events::TaskLink::set_commands},
    {"sftp_ops", &events::TaskLink::sftp_ops, &events::TaskLink::set_sftp_ops},
    {"http_requests", &events::TaskLink::http_requests, &events::TaskLink::set_http_requests},
    {"channel_opens", &events::TaskLink::channel_opens, &events::TaskLink::set_channel_opens},
    {"handshakes", &events::TaskLink::handshakes, &events::TaskLink::set_handshakes},
    {"bytes_out", &events::TaskLink::bytes_out, &events::TaskLink::set_bytes_out},
    {"bytes_in", &events::TaskLink::bytes_in, &events::TaskLink::set_bytes_in},
    {"link_ms", &events::TaskLink::link_ms, &events::TaskLink::set_link_ms},
};

}  // namespace

Result<std::optional<events::TaskLink>> DecodeTaskLink(std::string_view event_type, const nlohmann::json& payload) {
  if (!payload.is_object()) return std::optional<events::TaskLink>();
  const auto it = payload.find("link");
  if (it == payload.end() || it->is_null()) return std::optional<events::TaskLink>();
  if (!it->is_object())
    return Status::Corruption(fmt::format("{}.link is {}, not an object of figures; the event was not written by "
                                          "npuprof (check it with `npuprof verify`)",
                                          event_type, it->type_name()));
  events::TaskLink link;
  for (const Figure& f : kFigures) {
    const auto v = it->find(f.key);
    if (v == it->end() || v->is_null()) continue;  // proto3: a figure not written is 0
    const bool whole = v->is_number_unsigned() || (v->is_number_integer() && v->get<int64_t>() >= 0);
    if (!whole || (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      return Status::Corruption(fmt::format("{}.link.{} is {}, not a whole number >= 0; the event was not written by "
                                            "npuprof (check it with `npuprof verify`)",
                                            event_type, f.key, v->dump()));
    (link.*f.set)(v->get<int64_t>());
  }
  return std::optional<events::TaskLink>(link);
}

nlohmann::json TaskLinkJson(const events::TaskLink& link) {
  nlohmann::json j = nlohmann::json::object();
  for (const Figure& f : kFigures) j[f.key] = (link.*f.get)();
  return j;
}

void AddTaskLink(events::TaskLink& sum, const events::TaskLink& link) {
  for (const Figure& f : kFigures) (sum.*f.set)((sum.*f.get)() + (link.*f.get)());
}

}  // namespace npuprof::sm
