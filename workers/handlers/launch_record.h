// The launch record (<runtime_dir>/launch.json) of one service: written once
// by the first attempt of service.launch that gets to publish it, read back by
// every later attempt and by the start scripts' builder. Its message is
// records.LaunchRecord (proto/remote_records.proto).
//
// Contract:
// * LaunchRecordFromPayload is what a first launch writes before it picks a
//   port ("not given" is null; the handler fills port, argv and
//   service_marker before publishing). The devices are the payload's: the
//   ones the run leased. A payload that names none is refused (Invalid):
//   a launch never picks devices of its own.
// * CheckRecordDevices: the record in force (published by an earlier
//   attempt, read back) must name exactly the payload's devices; a record
//   naming others (edited on the target) is refused (Corruption), so a
//   service never runs on devices its run does not hold.
// * DecodeLaunchRecord reads the bytes of a launch.json as the target holds
//   them: at most kMaxLaunchRecordBytes, never assumed UTF-8. It returns the
//   record as its message writes it (sm::MessageToJson: the declared keys
//   only, each with its declared type, numbers as numbers, a null optional
//   left out), so reading it further cannot throw; or Corruption naming the
//   file and the key and saying what to do. Keys the message does not
//   declare (another npuprof version's) are dropped. A number written as a
//   string ("9000"), which protobuf's parser takes, comes back a number.
// Pure: no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "task_payloads.pb.h"

namespace npuprof::workers::service {

inline constexpr size_t kMaxLaunchRecordBytes = size_t{1} << 20;

Result<nlohmann::json> LaunchRecordFromPayload(const tasks::ServiceLaunch& p, const std::string& runtime_dir,
                                               const std::string& env_script);

// `record` as DecodeLaunchRecord returns it.
Status CheckRecordDevices(const nlohmann::json& record, const tasks::ServiceLaunch& p,
                          const std::string& runtime_dir);

// `runtime_dir` only names the file in the error.
Result<nlohmann::json> DecodeLaunchRecord(const std::string& runtime_dir, std::string_view bytes);

}  // namespace npuprof::workers::service
