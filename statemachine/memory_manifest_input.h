// What the memory-profile manifest (memory_manifest.h) reads of a run, as
// typed documents decoded once. Pure.
//
// Contract: DecodeMemoryManifestInput never fails as a whole. The npu-smi
// snapshots are decoded as the report decodes them (memory_report_input.h);
// every blob is a string; msprof's "blobs" a map of names to strings; the
// spec's and the service's fields have the shape the spec validation and the
// launch record give them (model a string, tp/dp/port whole numbers,
// devices whole numbers, extra_args/serve_argv strings). A field with another
// shape is listed in `errors` with its path and left out (null in the
// manifest), never defaulted. The records the manifest archives as they were
// recorded (the service, msprof's flush and export, the inference answer,
// step failures, the model's config.json) are checked to be objects and kept
// verbatim.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/memory_report_input.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// msprof's CSV blobs and maps.
struct ManifestMsprof {
  bool present = false;
  std::map<std::string, std::string> blobs;  // exported name -> sha256
  json prof_device_map = json::object();     // __prof_device_map__, verbatim
  json prof_dirs = json::object();
};

// The documents of one node (the head's, or node_evidence[i]'s).
struct ManifestNodeInput {
  SnapshotInput baseline, after_ready, after_infer;
  std::optional<std::string> vllm_log_blob;
  ManifestMsprof msprof;
  json service, flushed, exported;  // verbatim objects, null when absent
};

// The service as the manifest shows it; each field falls back to the spec's.
struct ManifestService {
  std::string model;
  json served_model_name, tp, dp, devices, port;  // typed-checked values (null: neither says)
  std::vector<std::string> extra_args, serve_argv;
  std::optional<std::string> runtime_dir;
  json wrap_script;  // a string or null
};

struct MemoryManifestInput {
  std::string mode = "standalone";
  ManifestService service;
  ManifestNodeInput head;
  std::optional<std::string> weights_blob, model_config_blob, inference_blob;
  std::optional<std::string> operator_memory_blob;  // --operator-memory's digest (operator_memory_digest.json)
  bool has_model_config = false, has_weights = false;
  json model_config_content, inference, step_failures = json::object(), stop_escalated;
  std::optional<std::string> baseline_npu_smi_text;
  // Other nodes (spec "nodes"[i], i >= 1, with node_evidence["i"]), their machine beside.
  bool has_nodes = false;
  std::vector<std::pair<std::string, ManifestNodeInput>> nodes;
  std::vector<ReportEvidenceError> errors;
};

MemoryManifestInput DecodeMemoryManifestInput(const RunState& s, const json& service);

}  // namespace npuprof::sm
