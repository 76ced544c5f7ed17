// The common fields of a vLLM service in a run spec, and the payloads of the
// service.* tasks built from them. Pure (no I/O, no clock): shared by every
// run kind that launches a service (serve, torch-profile, memory-profile).
//
// Spec fields (ValidateServiceSpec checks them and fills defaults):
//   model              absolute path of the model dir on the target (required)
//   served_model_name  name the API serves; default: vLLM's (the model path)
//   tp, dp             >= 1 (default 1)
//   devices            list of device indices (logical ids), exactly tp*dp of
//                      them, or null = any free NPUs, found by the device lease
//                      before the launch ("0,1" accepted; device_ids.h)
//   port               1..65535, or null = a free port found on the target
//   env                {NAME: "value"}: NAME a shell variable name, not one that
//                      looks like a secret (put those in the machine's env script)
//   host               null = 127.0.0.1; else "127.0.0.1", "0.0.0.0" or "::"
//                      (npuprof reaches the service at 127.0.0.1 on the target)
//   extra_args         extra `vllm serve` arguments; one that spells a flag
//                      the kind manages (statemachine/managed_flags.h: the
//                      fields above and what the kind adds) is refused,
//                      naming the flag and the option to use instead
//   wrap_script        absolute path of a script run as `bash WRAP _serve.sh RUNTIME`, or null
//   health_timeout_s   readiness deadline (default 300)
//   stop_grace_s       wait after SIGINT and after SIGTERM (default 10)
//   busy_threshold_mb  HBM use that makes a device without process busy (4096)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/repeated_field.h>
#include <google/protobuf/struct.pb.h>

#include "common/status.h"
#include "task_payloads.pb.h"
#include "task_results.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

inline constexpr const char* kServiceLaunchTask = "service.launch";
inline constexpr const char* kServiceWaitReadyTask = "service.wait_ready";
inline constexpr const char* kServiceStopTask = "service.stop";
// Polls a ready service's process group until it dies (serve runs).
inline constexpr const char* kServiceWatchTask = "service.watch";

// Where runtime dirs go when the machine record names no runtime_base: under
// the SSH user's home, resolved on the target by the worker ("~/" paths are
// understood by every handler that takes a runtime path).
inline constexpr const char* kDefaultRuntimeBase = "~/.cache/npuprof/runtime";

// The devices a validated spec names, as its message holds them: serve and
// torch-profile declare a Value (null = pick free NPUs, or a list of
// indices), memory-profile a list. nullopt = none named.
std::optional<std::vector<int64_t>> SpecDevices(const google::protobuf::Value& devices);
std::optional<std::vector<int64_t>> SpecDevices(const google::protobuf::RepeatedField<int64_t>& devices);

// Defaults a run kind may change before validation (e.g. memory-profile's stop grace).
struct ServiceDefaults {
  json port = nullptr;  // null = free port on the target
  int64_t health_timeout_s = 300;
  int64_t stop_grace_s = 10;
  // A node of a multi-node spec without devices gets 0..tp*dp_local-1
  // (memory-profile's rule) instead of null (any free ones).
  bool node_device_range = false;
};

// Checks and normalises the service fields of spec in place, for a run of
// `kind` (serve, torch-profile, memory-profile: which flags it manages). The
// error names the field and the fix; nothing has run when it fails.
Status ValidateServiceSpec(json& spec, std::string_view kind, const ServiceDefaults& defaults = {});

// The machine record's runtime_base (default kDefaultRuntimeBase), without
// trailing slashes. May start with "~/".
std::string RuntimeBaseOf(const json& machine_record);
// The same for the record's runtime_base as given ("" = the default).
std::string RuntimeBaseOf(std::string runtime_base);

// "<runtime_base>/<run_id>/service-<launch_no>": deterministic, so a
// re-dispatched launch finds the runtime dir (and pid) of its first attempt.
// May start with "~/": the launch resolves it and its result's runtime_dir
// is the absolute dir every later task uses.
std::string ServiceRuntimeDir(const json& machine_record, const std::string& run_id, int launch_no);

// The payloads below leave `machine` unset: Decision::Schedule sends them to
// the run's machine.

// The service.launch payload for launch number launch_no of run_id, from a
// validated spec as its kind's message (typed_spec.h): run_specs::ServeSpec,
// TorchProfileSpec or MemoryProfileSpec (standalone), which all declare the
// service fields under the same names. kind_args go before the user's
// extra_args; kind_env is merged under the user's env (user wins).
template <class Spec>
tasks::ServiceLaunch BuildLaunchPayload(const std::string& run_id, int launch_no, const Spec& spec,
                                        const std::vector<std::string>& kind_args = {},
                                        const json& kind_env = json::object());

// service.wait_ready payload from the launch payload (PayloadOf, as stored)
// and its result as its message (task_result.h). The readiness deadline is
// absolute (now_ms + health timeout, 300 s when the payload has none) so a
// re-dispatched attempt only waits for what is left. A result without
// runtime_dir keeps the payload's; pid 0 and a port that is not a number are
// left out (the handler reads the runtime dir).
tasks::ServiceWaitReady BuildWaitReadyPayload(const tasks::ServiceLaunch& launch_payload,
                                              const results::ServiceLaunchResult& launch, int64_t now_ms);

// Whether launch (a service.launch task) failed for good before anything was
// started: its recorded result says started=false, which the handler writes
// only when no attempt can have started a process. Such a launch has no logs
// to read and nothing to stop. A result that cannot be read counts as "may
// have started" (the stop then runs and finds nothing).
bool LaunchStartedNothing(const TaskInfo& launch);

// service.watch payload: poll the process group of pid every poll_s seconds.
tasks::ServiceWatch BuildWatchPayload(const std::string& runtime_dir, std::optional<int64_t> pid, int64_t poll_s);

// service.stop payload. pid may be unknown (nullopt): the handler then reads
// <runtime>/pid.
tasks::ServiceStop BuildStopPayload(const std::string& runtime_dir, std::optional<int64_t> pid, bool force,
                                    int64_t grace_s);

// The service state record (model, served name, tp, dp, devices, env,
// extra args, port, pid, runtime dir, logs, wrap script, serve argv) from a
// launch payload and its result, with status "starting". pid and port are
// integers or null (unknown), as ServiceLaunched declares them: a value of
// another type in the result (a launch record edited on the target) is null.
json ServiceRecordFromLaunch(const json& launch_payload, const json& launch_result);

// The name /v1/models must list: served_model_name, else the model path.
std::string EffectiveServedName(const json& spec_or_payload);
std::string EffectiveServedName(const tasks::ServiceLaunch& launch_payload);

}  // namespace npuprof::sm
