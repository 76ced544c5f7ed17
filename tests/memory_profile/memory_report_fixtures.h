// Report inputs of every shape the memory report knows (standalone with and
// without msprof, attach with a baseline from another run and without one,
// process-level msprof CSVs, a refused series peak, a deployment over two
// machines, operator memory), for the golden round trip and the malformed-
// input table of memory_report_typed_test.cc. The golden file
// tests/data/memory_report_golden.json holds what the report builder and its
// text renderer made of each before the report read typed evidence.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/run_state.h"

namespace npuprof::sm::fixtures {

using json = nlohmann::json;

inline json HbmSnap(double used0, double used1, const std::string& blob, const std::string& file) {
  return {{"hbm",
           {{"0", {{"used_mb", used0}, {"total_mb", 65536.0}}}, {"1", {{"used_mb", used1}, {"total_mb", 65536.0}}}}},
          {"blob", blob},
          {"file", file},
          {"source", "npu_smi"}};
}

inline json LogSummary() {
  return {{"weights_gib", 15.25},
          {"kv_cache_available_gib", 30.5},
          {"kv_cache_tokens", 512000},
          {"graph_capture_gib", 0.75},
          {"graph_capture_count", 2},
          {"evidence",
           {{"weights_gib", {{"line", 40}, {"text", "Model loading took 15.25 GiB"}}},
            {"kv_cache_available_gib", {{"line", 88}, {"text", "Available KV cache memory: 30.5 GiB"}}},
            {"kv_cache_tokens", {{"line", 90}, {"text", "GPU KV cache size: 512,000 tokens"}}},
            {"graph_capture_gib", {{"line", 120}, {"text", "Graph capturing finished in 9 secs, took 0.75 GiB"}}}}},
          {"ranks",
           {{"Worker_TP1 pid=41",
             {{"weights_gib", 15.5},
              {"kv_cache_available_gib", 30.25},
              {"evidence", {{"weights_gib", {{"line", 41}, {"text", "(Worker_TP1) took 15.5 GiB"}}}}}}}}}};
}

inline json ModuleMem(bool per_device) {
  json rows = json::array();
  const std::pair<const char*, double> comps[] = {
      {"HCCL", 600.5}, {"RUNTIME", 130.25}, {"SLOG", 4.0}, {"FMK", 2.5}, {"DEVMM", 0.125}, {"APP", 9000.0}};
  for (int d : {0, 1}) {
    for (const auto& [c, v] : comps)
      rows.push_back({{"file", per_device ? "npu_module_mem_d" + std::to_string(d) + ".csv" : "npu_module_mem.csv"},
                      {"blob", "m" + std::to_string(d)},
                      {"prof_dir", "PROF_00" + std::to_string(d)},
                      {"component", c},
                      {"device_id", per_device ? json(d) : json(nullptr)},
                      {"max_mb", v + d},
                      {"row", 7 + d},
                      {"raw", std::to_string(static_cast<int>((v + d) * 1024))},
                      {"timestamp", "1700000000123456"},
                      {"scope", per_device ? "device" : "process"}});
    if (!per_device) break;
  }
  return rows;
}

inline json Peaks(bool ok) {
  json rows = json::array();
  for (int d : {0, 1})
    rows.push_back({{"device_id", d},
                    {"file", "npu_mem_d" + std::to_string(d) + ".csv"},
                    {"blob", "p" + std::to_string(d)},
                    {"event", "Device"},
                    {"clock", "target"},
                    {"ok", ok},
                    {"reason", ok ? "" : "no_samples_in_window"},
                    {"message", ok ? "" : "no sample inside the window"},
                    {"value_mb", ok ? json(210.5 + d) : json(nullptr)},
                    {"peak_mb", 50000.0 + d},
                    {"base_mb", ok ? json(49789.5) : json(nullptr)},
                    {"peak", {{"t_us", 1.7e15}, {"mb", 50000.0 + d}, {"row", 55}}},
                    {"base_rows", {44, 45, 46}},
                    {"window", {{"start_us", 1.7e15 - 2e5}, {"end_us", 1.7e15 + 4e5}}},
                    {"window_rows", {50, 60}}});
  return rows;
}

inline json Weights() {
  return {{"per_device_bytes", 16374562816.0},
          {"total_bytes", 32749125632.0},
          {"blob", "wm"},
          {"file", "weight_manifest.json"},
          {"tp", 2},
          {"dp", 1},
          {"ep", 1},
          {"categories",
           {{{"category", "attention"},
             {"display_name", "Attention"},
             {"tensor_count", 128},
             {"total_bytes", 12884901888.0},
             {"per_device_bytes", 6442450944.0},
             {"share_of_per_device", 0.39},
             {"dtypes", {"BF16"}},
             {"shard_strategies", {"column", "row"}}},
            {{"category", "mlp"},
             {"display_name", "MLP"},
             {"tensor_count", 96},
             {"total_bytes", 19864223744.0},
             {"per_device_bytes", 9932111872.0},
             {"share_of_per_device", 0.61},
             {"dtypes", {"BF16", "F32"}},
             {"shard_strategies", {"column"}}}}}};
}

// A standalone run on two devices; `msprof` adds per-device CSVs and the
// series peaks (ok or refused).
inline json Standalone(bool msprof, bool peaks_ok = true) {
  json ev = {{"mode", "standalone"}, {"tp", 2}, {"dp", 1}, {"devices", {0, 1}}};
  const double ready = 3000 + 15.25 * 1024 + 30.5 * 1024 + 0.75 * 1024 + 800;
  ev["baseline"] = HbmSnap(3000, 3001, "b", "baseline_npu_smi.txt");
  ev["after_ready"] = HbmSnap(ready, ready + 300, "r", "after_ready_npu_smi.txt");
  ev["after_infer"] = HbmSnap(ready + 120, ready + 280, "i", "after_infer_npu_smi.txt");
  ev["vllm_log"] = {{"summary", LogSummary()}, {"blob", "log"}, {"file", "vllm_serve.log"}};
  ev["weights"] = Weights();
  ev["theory"] = {{"per_device_bytes", 16106127360.0}, {"blob", "cfg"}};
  if (msprof)
    ev["msprof"] = {{"status", "ok"},
                    {"module_mem", ModuleMem(true)},
                    {"npu_mem", json::array({{{"file", "npu_mem_d0.csv"}, {"event", "APP"}, {"device_id", 0},
                                              {"max_hbm_mb", 48000.5}, {"row", 12}, {"blob", "n0"}},
                                             {{"file", "npu_mem_d1.csv"}, {"event", "Device"}, {"device_id", 1},
                                              {"max_hbm_mb", 50001.0}, {"row", 13}, {"blob", "n1"}}})},
                    {"activation_peaks", Peaks(peaks_ok)}};
  return ev;
}

// Every shape, by name.
inline std::map<std::string, json> ReportInputs() {
  std::map<std::string, json> out;
  out["standalone_msprof"] = Standalone(true);
  out["standalone_no_msprof"] = Standalone(false);
  out["refused_series"] = Standalone(true, false);
  {
    json ev = Standalone(true);
    ev["msprof"]["module_mem"] = ModuleMem(false);
    ev["msprof"]["status"] = "export_timeout";
    ev.erase("after_infer");
    out["process_level_no_after_infer"] = ev;
  }
  {
    json ev = Standalone(false);
    ev["mode"] = "attach";
    ev["baseline"]["source"] = "baseline_run";
    ev["baseline"]["origin"] = "mem-0001";
    ev["baseline"]["blob"] = "";
    ev.erase("weights");
    ev["vllm_log"]["summary"].erase("weights_gib");
    ev["vllm_log"]["summary"]["ranks"] = json::object();
    out["attach_baseline_run"] = ev;
  }
  {
    json ev = Standalone(false);
    ev["mode"] = "attach";
    ev.erase("baseline");
    ev.erase("devices");
    out["attach_no_baseline"] = ev;
  }
  {
    json ev = Standalone(true);
    ev["machine"] = "head";
    ev["rank_offset"] = 0;
    ev["dp"] = 2;
    json other = Standalone(true);
    other.erase("weights");
    other.erase("theory");
    other["node"] = 1;
    other["machine"] = "tail";
    other["rank_offset"] = 2;
    other["dp"] = 2;
    other["vllm_log"]["summary"]["ranks"] = {
        {"Worker_DP1_TP1 pid=77", {{"weights_gib", 15.75}, {"evidence", json::object()}}}};
    ev["nodes"] = json::array({other});
    out["two_nodes"] = ev;
  }
  return out;
}

// A finished two-node run and its service, for the manifest (memory_manifest.h).
struct ManifestRun {
  RunState state;
  json service;
};

inline ManifestRun TwoNodeRun() {
  ManifestRun r;
  RunState& s = r.state;
  s.run_id = "mem-0042";
  s.kind = "memory_profile";
  s.state = "done";
  s.status = RunStatus::kOk;
  s.machine = "head";
  s.tag = "typed";
  s.created_ms = 1700000000000;
  s.finished_ms = 1700000300000;
  s.terminal = true;
  s.spec = {{"mode", "standalone"},
            {"model", "/models/q"},
            {"tp", 2},
            {"dp", 2},
            {"devices", {0, 1}},
            {"port", nullptr},
            {"gpu_memory_utilization", 0.85},
            {"max_model_len", 2048},
            {"max_tokens", 128},
            {"enforce_eager", false},
            {"nodes", {{{"machine", "head"}}, {{"machine", "tail"}}}},
            {"baseline_npu_smi_text", "+---+"}};
  json d = Standalone(true);
  d["msprof"]["blobs"] = {{"msprof_csvs/npu_module_mem_d0.csv", "m0"}, {"msprof_csvs/npu_mem_d0.csv", "n0"}};
  d["msprof"]["__prof_device_map__"] = {{"npu_module_mem_d0.csv", {0}}};
  d["msprof"]["prof_dirs"] = {{"PROF_000", {{"device_ids", {0}}}}};
  d["flushed"] = {{"signal", "done_file"}, {"waited_ms", 1200}, {"flush_timed_out", false}};
  d["export"] = {{"exit_code", 0}, {"seconds", 3.5}};
  d["model_config"] = {{"blob", "cfg"}, {"content", {{"num_hidden_layers", 28}, {"torch_dtype", "bfloat16"}}}};
  d["inference"] = {{"blob", "inf"}, {"tokens", 128}, {"ok", true}};
  d["step_failures"] = {{"logs", 1}};
  d["stop_escalated"] = nullptr;
  json other = Standalone(true);
  other["msprof"]["blobs"] = {{"msprof_csvs/npu_mem_d1.csv", "t1"}};
  other["service"] = {{"status", "stopped"}, {"pid", 77}};
  other["flushed"] = {{"signal", "timeout"}, {"waited_ms", 5000}, {"flush_timed_out", true}};
  d["node_evidence"] = {{"1", other}};
  s.data = d;
  r.service = {{"model", "/models/q"},
               {"served_model_name", "npuprof-mem-mem-0042"},
               {"tp", 2},
               {"dp", 2},
               {"devices", {0, 1}},
               {"port", 8123},
               {"extra_args", {"--max-num-seqs", "8"}},
               {"serve_argv", {"vllm", "serve", "/models/q"}},
               {"runtime_dir", "/rt/mem-0042"},
               {"wrap_script", "/rt/mem-0042/msprof_wrap.sh"},
               {"status", "stopped"}};
  return r;
}

}  // namespace npuprof::sm::fixtures
