// Task kinds of the torch-profile and analyse-root runs (docs/TASKS.md).
// The service.* kinds belong to the service lifecycle (serve kind).
#pragma once

#include "statemachine/service_spec.h"  // service.launch / wait_ready / stop

namespace npuprof::sm {

// {image_path, image_height} -> {image_meta}: reads a PNG on the worker's
// machine, resizes it to image_height (aspect kept); blob "image.png".
inline constexpr const char* kTpPrepareImageTask = "torch_profile.prepare_image";
// {runtime_dir, model, profiler_fields} -> {probe_dir, disk_free_bytes,
// mem_available_bytes, layers, fields_read, profiler_fields, fields_error}:
// one remote command before the launch (statemachine/torch_profile_capture.h);
// only when a capture flag or budget_check is given.
inline constexpr const char* kTpCaptureCheckTask = "torch_profile.capture_check";
// {port, action: start_profile|stop_profile, timeout_s} ->
// {action, ok (2xx), status, latency_ms, body | error}. Success whenever an
// HTTP answer arrived (the machine judges the status).
inline constexpr const char* kTpControlTask = "torch_profile.control";
// {role: wave|followup, port, served_model_name, total, concurrency,
//  prompt_tokens, max_tokens, timeout_s, request_kind, image_path,
//  image_height, first_index} -> {role, total, ok_count, wall_ms (first
//  request sent to last answer), results: [{index, ok, status,
//  latency_ms, body | error}]}
inline constexpr const char* kTpRequestsTask = "torch_profile.requests";
// {profile_root} -> {profile_root, root_exists, dirs: [abs paths of *_ascend_pt directly under it],
// means (when there is a dir): {cores, mem_available_bytes, disk_free_bytes,
// dir_bytes: [per dir, -1 unread]} read in one remote command, an unread
// value absent, or {error}}. The machine chooses from the means how many
// analyse_rank tasks are out at once (torch_profile_analyse_limit.h).
inline constexpr const char* kTpListDirsTask = "torch_profile.list_profile_dirs";
// {dir, analyse_timeout_s} -> {path, outputs:{kernel_details_csv:{path,exists},
// trace_view_json:{path,exists}}, analysis_status, analyse:{exit_code,
// reattached, log_tail}, kernel_summary (when kernel_details.csv is valid:
// parsers/kernel_summary.h's JSON + {path, bytes_read, truncated}, or
// {path, error})}. analyse() runs detached on the target with an
// exit-code marker named after the task id; a re-dispatched attempt waits
// for the running one instead of starting it again.
inline constexpr const char* kTpAnalyseRankTask = "torch_profile.analyse_rank";
// {profile_root, expected_ranks, timeout_s, deadline_ms (absolute)} ->
// {signal: profiler_info|no_profile_dirs|timeout, flush_timed_out, waited_ms,
//  polls, expected_ranks, dirs: [{name, profiler_info, files, size}]}.
// Polls the root in one remote command per poll (back-off) until every
// *_ascend_pt under it holds a profiler_info*.json and its file count and
// sizes did not change between two polls (torch_npu finalised every rank),
// or until deadline_ms; a timeout is a success (the gates judge what exists).
// Read-only: a re-dispatched attempt polls again until the same deadline.
inline constexpr const char* kTpWaitFlushTask = "torch_profile.wait_flush";

}  // namespace npuprof::sm
