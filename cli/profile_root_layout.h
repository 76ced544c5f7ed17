// The export layout of a multi-node torch-profile run: every rank of every
// node under one profile root, as cross-rank tools (msprof-analyze cluster
// analysis) expect a root of *_ascend_pt directories. Pure: a plan made from
// the manifest and the event log; cli/export_torch_profile.cc writes it.
//
//   <out>/manifest.json                       as for one node
//   <out>/ranks.json                          the plan below: every rank dir
//                                             -> machine, node, remote path, clock offset
//   <out>/profile_root/<rank_dir>/npuprof_rank.json   the rank's record (digest)
//   <out>/profile_root/<rank_dir>/analyse.log         analyse()'s log, when stored
//
// rank_dir is the *_ascend_pt directory's own name; when two ranks of the
// deployment have the same name (two nodes with the same hostname and pid),
// each of those is prefixed with its machine ("<machine>-<name>"), and a
// name still taken gets "-<n>" before "_ascend_pt". Characters other than
// [A-Za-z0-9._-] become "_"; the names always end in "_ascend_pt".
//
// Plan (ranks.json): {"run_id", "profile_root": "profile_root",
//  "clock_rule", "ranks": [{"rank_dir", "original_name", "machine", "node",
//  "device_id", "analysis_status", "remote_path", "clock_offset_ms",
//  "clock_uncertainty_ms", "clock_measured" (start|end|none),
//  "analyse_log_sha256" (null when none was stored), "copied": [names],
//  "referenced": {"dir", "kernel_details_csv", "trace_view_json"} (paths on
//  the node, not copied)}]}.
// Errors: the manifest has no remote_profile_dirs array.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::cli {

inline constexpr const char* kProfileRootDir = "profile_root";

Result<nlohmann::json> PlanProfileRootLayout(const nlohmann::json& manifest, const nlohmann::json& events_doc);

// The record written as <rank_dir>/npuprof_rank.json: the manifest's entry
// for that rank plus its plan row ("export").
nlohmann::json RankRecord(const nlohmann::json& manifest_dir, const nlohmann::json& plan_row);

}  // namespace npuprof::cli
