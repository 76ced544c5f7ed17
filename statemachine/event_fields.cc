#include "statemachine/event_fields.h"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"

namespace npuprof::sm {

namespace {

using json = nlohmann::json;

enum class Want { kText, kUnsigned, kInteger, kObject, kArray, kBool };

const char* Word(Want w) {
  switch (w) {
    case Want::kText: return "a string";
    case Want::kUnsigned: return "a whole number >= 0";
    case Want::kInteger: return "a whole number";
    case Want::kObject: return "an object";
    case Want::kArray: return "an array";
    case Want::kBool: return "true or false";
  }
  return "?";
}

bool Has(const json& v, Want w) {
  switch (w) {
    case Want::kText: return v.is_string();
    case Want::kUnsigned: return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    case Want::kInteger: return v.is_number_integer();
    case Want::kObject: return v.is_object();
    case Want::kArray: return v.is_array();
    case Want::kBool: return v.is_boolean();
  }
  return false;
}

struct Field {
  const char* name;
  Want want;
  bool required;
};

// What the fold (engine.cc, device_lease.cc) reads of each type.
const std::map<std::string, std::vector<Field>>& Table() {
  static const std::map<std::string, std::vector<Field>> kTable = [] {
    std::map<std::string, std::vector<Field>> t;
    t[ev::kRunSubmitted] = {{"kind", Want::kText, true}, {"spec", Want::kObject, false},
                            {"machine", Want::kText, false}, {"tag", Want::kText, false}};
    t[ev::kStateChanged] = {{"from", Want::kText, false}, {"to", Want::kText, true}};
    t[ev::kTaskScheduled] = {{"task_id", Want::kText, true}, {"kind", Want::kText, true},
                             {"attempt", Want::kUnsigned, false}, {"payload", Want::kObject, false},
                             {"policy", Want::kObject, false}};
    for (const char* type : {ev::kTaskSucceeded, ev::kTaskAbandoned, ev::kTaskResultIgnored})
      t[type] = {{"task_id", Want::kText, true}};
    t[ev::kTaskFailed] = {{"task_id", Want::kText, true}, {"final", Want::kBool, false}};
    t[ev::kTaskRedispatched] = {{"task_id", Want::kText, true}, {"attempt", Want::kUnsigned, false},
                                {"reason", Want::kText, false}};
    t[ev::kTaskRetryScheduled] = {{"task_id", Want::kText, true}, {"timer_id", Want::kText, true},
                                  {"deadline_ms", Want::kInteger, true}};
    t[ev::kTimerScheduled] = {{"timer_id", Want::kText, true}, {"purpose", Want::kText, false},
                              {"deadline_ms", Want::kInteger, true}, {"payload", Want::kObject, false}};
    t[ev::kTimerFired] = {{"timer_id", Want::kText, true}};
    t[ev::kTimerCancelled] = {{"timer_id", Want::kText, true}};
    t[ev::kWatchRequested] = {{"run_id", Want::kText, true}};
    t[ev::kRunFinished] = {{"status", Want::kText, true}, {"error", Want::kText, false}};
    t[ev::kSignalReceived] = {{"name", Want::kText, true}};
    t[kDevicesRequested] = {{"machine", Want::kText, false}, {"count", Want::kInteger, false}};
    t[kDevicesLeased] = {{"machine", Want::kText, false}, {"devices", Want::kArray, false}};
    t[kDevicesReleased] = {{"machine", Want::kText, false}, {"devices", Want::kArray, false}};
    return t;
  }();
  return kTable;
}

}  // namespace

Status CheckEventFields(const std::string& type, const json& payload) {
  if (!payload.is_object())
    return Status::Corruption(fmt::format("{} payload is not a JSON object", type));
  auto row = Table().find(type);
  if (row == Table().end()) return Status::Ok();
  for (const Field& f : row->second) {
    auto it = payload.find(f.name);
    if (it == payload.end()) {
      if (f.required) return Status::Corruption(fmt::format("{} payload has no '{}' ({})", type, f.name, Word(f.want)));
      continue;
    }
    if (!Has(*it, f.want))
      return Status::Corruption(fmt::format("{} payload field '{}' is {} where {} is needed", type, f.name,
                                            it->type_name(), Word(f.want)));
  }
  return Status::Ok();
}

}  // namespace npuprof::sm
