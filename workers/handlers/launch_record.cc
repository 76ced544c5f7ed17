#include "workers/handlers/launch_record.h"

#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "remote_records.pb.h"
#include "statemachine/json_message_table.h"
#include "statemachine/message_json.h"

namespace npuprof::workers::service {

using json = nlohmann::json;

Result<json> LaunchRecordFromPayload(const tasks::ServiceLaunch& p, const std::string& runtime_dir,
                                     const std::string& env_script) {
  if (p.devices_size() == 0)
    return Status::Invalid(
        "the service.launch payload names no devices: a launch runs on the devices its run leased and picks none "
        "of its own (a bug in npuprof: please report it)");
  json env = json::object(), args = json::array();
  const json devices = json(std::vector<int32_t>(p.devices().begin(), p.devices().end()));
  for (const auto& [k, v] : p.env()) env[k] = v;
  for (const std::string& a : p.extra_args()) args.push_back(a);
  json rec = {{"run_id", p.run_id()},
              {"launch_no", p.launch_no()},
              {"runtime_dir", runtime_dir},
              {"model", p.model()},
              {"served_model_name", p.has_served_model_name() ? json(p.served_model_name()) : json(nullptr)},
              {"tp", p.tp() > 0 ? p.tp() : 1},
              {"dp", p.dp() > 0 ? p.dp() : 1},
              {"devices", devices},
              {"port", p.has_port() ? json(p.port()) : json(nullptr)},
              {"env", env},
              {"extra_args", args},
              {"wrap_script", p.has_wrap_script() ? json(p.wrap_script()) : json(nullptr)},
              {"env_script", env_script},
              {"busy_threshold_mb", p.has_busy_threshold_mb() ? p.busy_threshold_mb() : int64_t{4096}},
              {"host", p.has_host() ? json(p.host()) : json(nullptr)}};
  if (p.has_deployment() && p.deployment().nodes() > 1) rec["deployment"] = sm::MessageToJson(p.deployment());
  return rec;
}

Status CheckRecordDevices(const json& record, const tasks::ServiceLaunch& p, const std::string& runtime_dir) {
  const json leased = json(std::vector<int64_t>(p.devices().begin(), p.devices().end()));
  const json recorded = record.value("devices", json::array());
  if (recorded == leased) return Status::Ok();
  return Status::Corruption(fmt::format(
      "{}/launch.json names devices {} but the run leased {}: npuprof runs a service only on the devices its run "
      "holds; remove {} once no service of it runs, or submit a new run",
      runtime_dir, recorded.dump(), leased.dump(), runtime_dir));
}

Result<json> DecodeLaunchRecord(const std::string& runtime_dir, std::string_view bytes) {
  const std::string file = runtime_dir + "/launch.json";
  const std::string fix = fmt::format(
      "npuprof did not write it so; remove {} once no service of it runs, or submit a new run (it gets its own "
      "runtime dir)",
      runtime_dir);
  if (bytes.size() > kMaxLaunchRecordBytes)
    return Status::Corruption(fmt::format("{} is larger than {} bytes: {}", file, kMaxLaunchRecordBytes, fix));
  const Result<json> rec = ParseJson(bytes, kMaxTargetJsonDepth);
  if (!rec.ok()) return Status::Corruption(fmt::format("{} is {}: {}", file, rec.status().message(), fix));
  if (!rec->is_object()) return Status::Corruption(fmt::format("{} is not a JSON object: {}", file, fix));
  records::LaunchRecord typed;
  if (auto why = sm::JsonMessageTable::Parse(bytes, typed, /*tolerate_unknown_keys=*/true))
    return Status::Corruption(fmt::format("{} does not read as a launch record ({}): {}", file, *why, fix));
  return sm::MessageToJson(typed);
}

}  // namespace npuprof::workers::service
