#include "statemachine/event_fields.h"

#include <map>
#include <vector>

#include <fmt/format.h>

#include "common/json_shape.h"

#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"

namespace npuprof::sm {

namespace {

using json = nlohmann::json;

using Want = JsonShape;
namespace shape {
constexpr Want kText = JsonShape::kString, kUnsigned = JsonShape::kUnsigned, kInteger = JsonShape::kInteger,
               kObject = JsonShape::kObject, kArray = JsonShape::kArray, kBool = JsonShape::kBool;
}  // namespace shape

struct Field {
  const char* name;
  Want want;
  bool required;
};

// What the fold (engine.cc, device_lease.cc) reads of each type.
const std::map<std::string, std::vector<Field>>& Table() {
  static const std::map<std::string, std::vector<Field>> kTable = [] {
    std::map<std::string, std::vector<Field>> t;
    t[ev::kRunSubmitted] = {{"kind", shape::kText, true}, {"spec", shape::kObject, false},
                            {"machine", shape::kText, false}, {"tag", shape::kText, false}};
    t[ev::kStateChanged] = {{"from", shape::kText, false}, {"to", shape::kText, true}};
    t[ev::kTaskScheduled] = {{"task_id", shape::kText, true}, {"kind", shape::kText, true},
                             {"attempt", shape::kUnsigned, false}, {"payload", shape::kObject, false},
                             {"policy", shape::kObject, false}};
    for (const char* type : {ev::kTaskSucceeded, ev::kTaskAbandoned, ev::kTaskResultIgnored})
      t[type] = {{"task_id", shape::kText, true}};
    t[ev::kTaskFailed] = {{"task_id", shape::kText, true}, {"final", shape::kBool, false}};
    t[ev::kTaskRedispatched] = {{"task_id", shape::kText, true}, {"attempt", shape::kUnsigned, false},
                                {"reason", shape::kText, false}};
    t[ev::kTaskRetryScheduled] = {{"task_id", shape::kText, true}, {"timer_id", shape::kText, true},
                                  {"deadline_ms", shape::kInteger, true}};
    t[ev::kTimerScheduled] = {{"timer_id", shape::kText, true}, {"purpose", shape::kText, false},
                              {"deadline_ms", shape::kInteger, true}, {"payload", shape::kObject, false}};
    t[ev::kTimerFired] = {{"timer_id", shape::kText, true}};
    t[ev::kTimerCancelled] = {{"timer_id", shape::kText, true}};
    t[ev::kWatchRequested] = {{"run_id", shape::kText, true}};
    t[ev::kRunFinished] = {{"status", shape::kText, true}, {"error", shape::kText, false}};
    t[ev::kSignalReceived] = {{"name", shape::kText, true}};
    t[kDevicesRequested] = {{"machine", shape::kText, false}, {"count", shape::kInteger, false}};
    t[kDevicesLeased] = {{"machine", shape::kText, false}, {"devices", shape::kArray, false}};
    t[kDevicesReleased] = {{"machine", shape::kText, false}, {"devices", shape::kArray, false}};
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
      if (f.required) return Status::Corruption(fmt::format("{} payload has no '{}' ({})", type, f.name, ShapeWords(f.want)));
      continue;
    }
    if (!HasShape(*it, f.want))
      return Status::Corruption(fmt::format("{} payload field '{}' is {} where {} is needed", type, f.name,
                                            it->type_name(), ShapeWords(f.want)));
  }
  return Status::Ok();
}

}  // namespace npuprof::sm
