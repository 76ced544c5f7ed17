// Tests of parsers/vllm_log_parser: every real log in tests/data/vllm-logs
// against its hand-read .expected.json (whose key names differ from the CLI
// contract; MapExpected below maps them), plus hand-made traps from
// docs/FORMATS.md#vllm-log-traps (ANSI, '\r', glued tqdm, nested prefixes, ...).
#include "parsers/vllm_log_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "parsers/vllm_log_line.h"
#include "tests/support/build_paths.h"

namespace npuprof::parsers {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kDataDir = fs::path(npuprof::build_paths::TestDataDir()) / "vllm-logs";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Equal as numbers (1e-9) or exactly equal otherwise.
void ExpectSame(const json& got, const json& want, const std::string& what) {
  if (want.is_number() && got.is_number()) {
    EXPECT_NEAR(got.get<double>(), want.get<double>(), 1e-9) << what;
  } else {
    EXPECT_EQ(got, want) << what;
  }
}

// The contract keys every output carries.
const std::vector<std::string> kContractKeys = {
    "ranks",      "weights_gib",     "kv_cache_available_gib", "kv_cache_tokens",
    "gpu_blocks", "max_concurrency", "graph_capture_gib",      "graph_capture_count",
    "ready"};

// A per-rank map in the expected file: {"<prefix>": value}.
void ExpectPerRank(const json& got, const json& per_rank, const std::string& field, const std::string& what) {
  for (const auto& [prefix, v] : per_rank.items()) {
    ASSERT_TRUE(got["ranks"].contains(prefix)) << what << ": no rank '" << prefix << "' in " << got["ranks"].dump();
    ExpectSame(got["ranks"][prefix][field], v, what + " rank " + prefix);
  }
}

// Checks one hand-read expected.json against the parser's JSON. Every key of
// the expected file must be known here, so a new sample cannot be skipped
// silently.
void CheckAgainstExpected(const json& got, const json& want) {
  static const std::set<std::string> kIgnored = {"log", "engine", "version_hint", "notes"};
  for (const auto& [key, v] : want.items()) {
    SCOPED_TRACE(key);
    if (kIgnored.count(key) || key.ends_with("_label")) continue;
    if (key == "weights") {
      if (v.is_null()) {
        EXPECT_TRUE(got["weights_gib"].is_null());
      } else {
        ExpectSame(got["weights_gib"], v["value"], "weights value");
        const std::string text = got["evidence"]["weights_gib"]["text"];
        EXPECT_NE(text.find(v["printed"].get<std::string>()), std::string::npos) << text;
      }
    } else if (key == "weights_per_rank") {
      ExpectPerRank(got, v, "weights_gib", key);
    } else if (key == "ranks_differ") {
      EXPECT_EQ(got["ranks_differ"], v);
    } else if (key == "num_gpu_blocks") {
      ExpectSame(got["gpu_blocks"], v, key);
    } else if (key == "kv_cache_available_gib" || key == "graph_capture_gib") {
      if (v.is_object()) {
        ExpectPerRank(got, v, key, key);
        // Run level: kv = the first printed; graph = the max over ranks.
        bool one_of = false;
        double max = -1e300;
        for (const auto& [p, x] : v.items()) {
          one_of = one_of || std::fabs(x.get<double>() - got[key].get<double>()) < 1e-9;
          max = std::max(max, x.get<double>());
        }
        EXPECT_TRUE(one_of) << got[key];
        if (key == "graph_capture_gib") {
          EXPECT_NEAR(got[key].get<double>(), max, 1e-9);
        }
      } else {
        ExpectSame(got[key], v, key);
      }
    } else if (key == "max_concurrency") {
      if (v.is_null()) {
        EXPECT_TRUE(got["max_concurrency"].is_null());
      } else {
        ExpectSame(got["max_concurrency"], v["x"], key);
        ExpectSame(got["max_concurrency_tokens_per_request"], v["tokens_per_request"], key);
      }
    } else if (key == "readiness_seen") {
      EXPECT_EQ(got["ready"], v);
    } else if (key == "readiness_lines") {
      for (const auto& line : v) {
        const auto& have = got["readiness_lines"];
        EXPECT_NE(std::find(have.begin(), have.end(), line), have.end()) << line << " not in " << have.dump();
      }
    } else if (key == "torch_compile_and_profiling_seconds") {
      ExpectSame(got["compile_warmup_seconds"], v, key);
    } else if (key == "encoder_cache_profile_items") {
      ExpectSame(got["encoder_cache_profile_items"], v["count"], key);
      EXPECT_EQ(got["encoder_cache_profile_modality"], v["modality"]);
    } else if (key == "memory_profiling") {
      // The V0 block of the single (unprefixed) rank.
      const json& mp = got["ranks"][""]["memory_profile"];
      ASSERT_TRUE(mp.is_object()) << got["ranks"].dump();
      const std::vector<std::pair<std::string, std::string>> map = {
          {"profile_seconds", "profile_seconds"},
          {"total_gpu_memory_gib", "total_gib"},
          {"gpu_memory_utilization", "gpu_memory_utilization"},
          {"instance_can_use_gib", "requested_gib"},
          {"model_weights_gib", "weights_gib"},
          {"non_torch_memory_gib", "non_torch_gib"},
          {"activation_peak_gib", "peak_activation_gib"},
          {"kv_cache_reserved_gib", "kv_cache_gib"}};
      ASSERT_EQ(v.size(), map.size()) << "unmapped memory_profiling key";
      for (const auto& [w, g] : map) ExpectSame(mp[g], v[w], "memory_profiling." + w);
    } else if (key == "per_rank") {
      const std::vector<std::pair<std::string, std::string>> map = {{"free_gib", "free_gib"},
                                                                    {"total_gib", "total_gib"},
                                                                    {"requested_gib", "requested_gib"},
                                                                    {"weights_gib", "weights_gib"},
                                                                    {"peak_activation_gib", "peak_activation_gib"},
                                                                    {"non_torch_gib", "non_torch_gib"},
                                                                    {"npu_graph_gib", "graph_gib"},
                                                                    {"current_kv_cache_gib", "kv_cache_gib"}};
      for (const auto& [prefix, r] : v.items()) {
        ASSERT_TRUE(got["ranks"].contains(prefix)) << prefix;
        ASSERT_EQ(r.size(), map.size()) << "unmapped per_rank key";
        for (const auto& [w, g] : map) ExpectSame(got["ranks"][prefix]["memory_profile"][g], r[w], prefix + "." + w);
        ExpectSame(got["ranks"][prefix]["weights_gib"], r["weights_gib"], prefix + " weights");
      }
    } else if (key == "other_values") {
      ExpectSame(got["kv_capacity_error"]["kv_cache_max_tokens"], v["max_tokens_storable_in_kv_cache_from_error"], key);
      ExpectSame(got["kv_capacity_error"]["max_seq_len"], v["max_seq_len_from_error"], key);
    } else if (key == "weights_load_seconds" || key == "gpu_blocks" || key == "cpu_blocks" ||
               key == "kv_cache_tokens" || key == "graph_capture_secs" || key == "torch_compile_seconds" ||
               key == "init_engine_seconds" || key == "encoder_cache_budget_tokens") {
      ExpectSame(got[key], v, key);  // same name in the contract
    } else {
      ADD_FAILURE() << "expected.json key '" << key << "' is not mapped by this test";
    }
  }
}

TEST(VllmLogParserSamples, EverySampleMatchesItsExpectedJson) {
  std::vector<fs::path> logs;
  for (const auto& e : fs::directory_iterator(kDataDir)) {
    if (e.path().extension() == ".log") logs.push_back(e.path());
  }
  std::sort(logs.begin(), logs.end());
  ASSERT_GE(logs.size(), 6u) << "samples missing under " << kDataDir;
  for (const auto& log : logs) {
    SCOPED_TRACE(log.filename().string());
    auto expected_path = log;
    expected_path.replace_extension(".expected.json");
    ASSERT_TRUE(fs::exists(expected_path));
    const std::string text = ReadFile(log);
    const json got = VllmLogToJson(ParseVllmLog(text));
    for (const auto& k : kContractKeys) EXPECT_TRUE(got.contains(k)) << k;
    CheckAgainstExpected(got, json::parse(ReadFile(expected_path)));
    EXPECT_TRUE(got["env_errors"].empty()) << got["env_errors"].dump();

    // Traceability: every evidence entry names a real line and quotes it.
    const auto lines = Lines(text);
    auto check_evidence = [&](const json& evidence) {
      for (const auto& [field, ev] : evidence.items()) {
        const int64_t n = ev["line"];
        ASSERT_GE(n, 1) << field;
        ASSERT_LE(n, static_cast<int64_t>(lines.size())) << field;
        EXPECT_EQ(ev["text"], StripAnsi(lines[n - 1])) << field;
      }
    };
    check_evidence(got["evidence"]);
    for (const auto& [prefix, r] : got["ranks"].items()) check_evidence(r["evidence"]);
  }
}

TEST(VllmLogParserSamples, RanksAreKeyedByPrefix) {
  const auto s = ParseVllmLog(ReadFile(kDataDir / "01_v05_tp4_mp_vllmworkerprocess_gb.log"));
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_TRUE(s.ranks.count("VllmWorkerProcess pid=6921"));
  EXPECT_EQ(s.evidence.at("gpu_blocks").line, 4);
  EXPECT_FALSE(s.ready);

  const auto one = ParseVllmLog(ReadFile(kDataDir / "11_ascend_v018_single_npu_serve_readiness.log"));
  ASSERT_EQ(one.ranks.size(), 1u);
  const auto& r = one.ranks.at("EngineCore pid=3012");
  EXPECT_NEAR(*r.weights_gib, 16.957, 1e-9);
  EXPECT_EQ(r.evidence.at("weights_gib").line, 72);
  EXPECT_EQ(one.graph_sizes_count, 35);
  EXPECT_EQ(one.vllm_version, "0.18.0");
  EXPECT_TRUE(one.ready);
  EXPECT_EQ(one.readiness_lines.back(), "Application startup complete.");

  const auto old = ParseVllmLog(ReadFile(kDataDir / "03_v07_single_gpu_memory_profiling_block_oom.log"));
  // "14.9888 GB" (dedicated line) wins over "14.99GiB" (profiling block).
  EXPECT_NEAR(*old.weights_gib, 14.9888, 1e-9);
  EXPECT_NEAR(*old.gpu_memory_utilization, 0.9, 1e-9);
}

// --- Hand-made traps ---------------------------------------------------------

TEST(VllmLogParser, AnsiPrefixesAndCarriageReturnProgressBars) {
  const std::string log =
      "\x1b[1;36m(VllmWorkerProcess pid=240)\x1b[0;0m INFO 12-01 10:00:00 model_runner.py:1] Loading model weights took 1.5000 GB\n"
      "INFO 12-01 10:00:00 model_runner.py:1] Loading model weights took 1.5100 GB\n"
      "Capturing CUDA graph shapes:  50%|#####     | 1/2 [00:01<00:01,  1.0it/s]\r"
      "Capturing CUDA graph shapes: 100%|##########| 2/2 [00:02<00:00,  1.0it/s]\r"
      "\x1b[1;36m(VllmWorkerProcess pid=240)\x1b[0;0m INFO 12-01 10:00:09 model_runner.py:2] Graph capturing finished in 7 secs, took 0.21 GiB\n"
      "#033[1;36m(VllmWorkerProcess pid=241)#033[0;0m INFO 12-01 10:00:10 model_runner.py:2] Graph capturing finished in 8 secs, took 0.25 GiB\n"
      "[1;36m(VllmWorkerProcess pid=242)[0;0m INFO 12-01 10:00:10 model_runner.py:2] Graph capturing finished in 6 secs, took 0.20 GiB\n"
      "\x1b[32mINFO\x1b[0m \x1b[90m12-01 10:00:11\x1b[0m \x1b[90m[kv_cache_utils.py:3]\x1b[0m GPU KV cache size: 1,587,648 tokens\n";
  const auto s = ParseVllmLog(log);
  ASSERT_EQ(s.ranks.size(), 4u);
  EXPECT_NEAR(*s.ranks.at("VllmWorkerProcess pid=240").weights_gib, 1.5, 1e-9);
  EXPECT_NEAR(*s.ranks.at("").weights_gib, 1.51, 1e-9);
  EXPECT_NEAR(*s.ranks.at("VllmWorkerProcess pid=241").graph_capture_gib, 0.25, 1e-9);
  EXPECT_NEAR(*s.ranks.at("VllmWorkerProcess pid=242").graph_capture_gib, 0.20, 1e-9);
  EXPECT_TRUE(s.ranks_differ);
  EXPECT_NEAR(*s.weights_gib, 1.5, 1e-9);  // the first printed
  EXPECT_NEAR(*s.graph_capture_gib, 0.25, 1e-9);
  EXPECT_EQ(s.graph_capture_count, 3);
  EXPECT_NEAR(*s.graph_capture_secs, 8, 1e-9);
  EXPECT_EQ(s.kv_cache_tokens, 1587648);
  // Evidence: line 3 holds the '\r' redraws; the matched piece is quoted, colour-free.
  const auto& ev = s.ranks.at("VllmWorkerProcess pid=240").evidence.at("graph_capture_gib");
  EXPECT_EQ(ev.line, 3);
  EXPECT_EQ(ev.text.find("(VllmWorkerProcess pid=240) INFO"), 0u) << ev.text;
  EXPECT_EQ(s.evidence.at("graph_capture_gib").line, 4);
  EXPECT_EQ(s.evidence.at("kv_cache_tokens").text,
            "INFO 12-01 10:00:11 [kv_cache_utils.py:3] GPU KV cache size: 1,587,648 tokens");
}

TEST(VllmLogParser, MultipleGraphCapturesKeepMaxAndCount) {
  const std::string log =
      "(Worker_TP0 pid=10) INFO 01-02 03:04:05 [gpu_model_runner.py:1] Graph capturing finished in 5 secs, took 0.30 GiB\n"
      "(Worker_TP1 pid=11) INFO 01-02 03:04:05 [gpu_model_runner.py:1] Graph capturing finished in 5 secs, took 0.31 GiB\n"
      "(Worker_TP0 pid=10) INFO 01-02 03:04:09 [gpu_model_runner.py:1] Graph capturing finished in 1 secs, took 0.90 GiB\n"
      "(Worker_TP1 pid=11) INFO 01-02 03:04:09 [gpu_model_runner.py:1] Graph capturing finished in 0 secs, took 6.00 MiB\n";
  const auto s = ParseVllmLog(log);
  EXPECT_EQ(s.graph_capture_count, 4);
  EXPECT_NEAR(*s.graph_capture_gib, 0.90, 1e-9);
  EXPECT_EQ(s.evidence.at("graph_capture_gib").line, 3);
  EXPECT_NEAR(*s.ranks.at("Worker_TP0 pid=10").graph_capture_gib, 0.90, 1e-9);
  EXPECT_EQ(s.ranks.at("Worker_TP0 pid=10").graph_capture_count, 2);
  EXPECT_NEAR(*s.ranks.at("Worker_TP1 pid=11").graph_capture_gib, 0.31, 1e-9);
  const auto j = VllmLogToJson(s);
  EXPECT_EQ(j["graph_capture_count"], 4);
  EXPECT_NEAR(j["ranks"]["Worker_TP1 pid=11"]["graph_capture_gib"].get<double>(), 0.31, 1e-9);
}

TEST(VllmLogParser, GluedTqdmNestedPrefixesAndRayDedup) {
  const std::string log =
      "Loading safetensors checkpoint shards:   0% Completed | 0/35 [00:00<?, ?it/s](VllmWorkerProcess pid=194213) INFO 05-12 "
      "10:31:02 model_runner.py:1] Loading model weights took 8.4050 GB and 81.775431 seconds\n"
      "(EngineCore_DP0 pid=559) (Worker_TP1 pid=566) INFO 10-01 01:02:03 [gpu_worker.py:298] Available KV cache memory: 16.23 GiB\n"
      "(RayWorkerWrapper pid=77, ip=10.0.0.2) INFO 03-01 01:02:03 model_runner.py:1] Loading model weights took 3.0000 GB "
      "[repeated 3x across cluster]\n"
      "    INFO 03-01 01:02:04 [default_loader.py:1] Loading weights took 2.72 seconds\n";
  const auto s = ParseVllmLog(log);
  ASSERT_TRUE(s.ranks.count("VllmWorkerProcess pid=194213"));
  EXPECT_NEAR(*s.ranks.at("VllmWorkerProcess pid=194213").weights_gib, 8.405, 1e-9);
  EXPECT_NEAR(*s.ranks.at("VllmWorkerProcess pid=194213").weights_load_seconds, 81.775431, 1e-9);
  ASSERT_TRUE(s.ranks.count("Worker_TP1 pid=566"));  // innermost prefix printed the line
  EXPECT_NEAR(*s.ranks.at("Worker_TP1 pid=566").kv_cache_available_gib, 16.23, 1e-9);
  EXPECT_NEAR(*s.ranks.at("RayWorkerWrapper pid=77, ip=10.0.0.2").weights_gib, 3.0, 1e-9);
  // "Loading weights took" is the dedicated load-time line: it beats "... and 81.77 seconds".
  EXPECT_NEAR(*s.weights_load_seconds, 2.72, 1e-9);
  EXPECT_EQ(s.evidence.at("weights_load_seconds").line, 4);
}

TEST(VllmLogParser, UnitTrapsAndVariants) {
  const std::string log =
      "INFO 01-01 00:00:01 [rfork_loader.py:1] Loading model weights took 2.50 seconds\n"  // 1: seconds, not GB
      "INFO 01-01 00:00:02 [model_runner.py:1] Model loading took 15.2859 GiB memory and 20.500000 seconds\n"  // 2
      "INFO 01-01 00:00:03 [worker_v1.py:1] Available memory: 37451612979.2, total memory: 65452113920\n"  // 3: bytes
      "INFO 01-01 00:00:04 [kv_cache_utils.py:1] GPU KV cache size: 425,424 tokens, Maximum concurrency for 65,536 "
      "tokens per request: 6.49x\n"                                                        // 4: merged
      "INFO 01-01 00:00:05 [executor_base.py:1] # cuda blocks: 7191, # CPU blocks: 512\n"  // 5
      "INFO 01-01 00:00:06 [utils.py:1] Adjusted ACL graph batch sizes for Qwen3 model (layers: 36): 67 → 35 sizes\n"
      "INFO 01-01 00:00:07 [monitor.py:1] torch.compile and initial profiling/warmup run together took 55.27 s in total\n"
      "INFO 01-01 00:00:08 [monitor.py:1] torch.compile and initial profiling/warmup run together took 99.00 s in total\n";
  const auto s = ParseVllmLog(log);
  EXPECT_NEAR(*s.weights_gib, 15.2859, 1e-9);
  EXPECT_EQ(s.evidence.at("weights_gib").line, 2);
  EXPECT_NEAR(*s.weights_load_seconds, 2.5, 1e-9);  // rfork and "and Y seconds" are the same rank: first wins
  EXPECT_NEAR(*s.kv_cache_available_gib, 37451612979.2 / (1024.0 * 1024 * 1024), 1e-9);
  EXPECT_EQ(s.kv_cache_tokens, 425424);
  EXPECT_NEAR(*s.max_concurrency, 6.49, 1e-9);
  EXPECT_EQ(s.max_concurrency_tokens_per_request, 65536);
  EXPECT_EQ(s.gpu_blocks, 7191);
  EXPECT_EQ(s.cpu_blocks, 512);
  EXPECT_EQ(s.graph_sizes_count, 35);
  EXPECT_NEAR(*s.compile_warmup_seconds, 55.27, 1e-9);  // the first
}

TEST(VllmLogParser, V0ProfilingResultsAndNegativeKv) {
  const std::string log =
      "INFO 11-20 10:00:00 worker.py:1] Memory profiling results: duration=1.50 seconds, total_gpu_memory=79.15GiB, "
      "initial_memory_usage=1.00GiB, peak_torch_memory=20.00GiB, memory_usage_post_profile=2.00GiB, "
      "non_torch_memory=0.50GiB, kv_cache_size=50.10GiB, gpu_memory_utilization=0.90.\n"
      "(Worker_TP1 pid=5) INFO 01-01 00:00:00 [worker.py:357] Available KV cache memory: -0.87 GiB\n";
  const auto s = ParseVllmLog(log);
  const auto& mp = s.ranks.at("").memory_profile;
  EXPECT_NEAR(*mp.profile_seconds, 1.5, 1e-9);
  EXPECT_NEAR(*mp.total_gib, 79.15, 1e-9);
  EXPECT_NEAR(*mp.kv_cache_gib, 50.10, 1e-9);
  EXPECT_NEAR(*s.gpu_memory_utilization, 0.9, 1e-9);
  EXPECT_NEAR(*s.ranks.at("").kv_cache_available_gib, 50.10, 1e-9);
  EXPECT_NEAR(*s.ranks.at("Worker_TP1 pid=5").kv_cache_available_gib, -0.87, 1e-9);
  // The dedicated "Available KV cache memory" line beats the profiling summary at run level.
  EXPECT_NEAR(*s.kv_cache_available_gib, -0.87, 1e-9);
}

TEST(VllmLogParser, ReadinessMarkers) {
  const std::string log =
      "INFO 02-13 10:00:00 api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n"
      "INFO:     Started server process [1]\n"
      "INFO:     Waiting for application startup.\n";
  auto s = ParseVllmLog(log);
  EXPECT_FALSE(s.ready);  // started, not yet serving
  EXPECT_EQ(s.readiness_lines.size(), 1u);
  s = ParseVllmLog(log + "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n");
  EXPECT_TRUE(s.ready);
  EXPECT_TRUE(VllmLogToJson(s)["ready"].get<bool>());
  // Pasted logs: docker-compose and k9s decorations around the same lines.
  s = ParseVllmLog(
      "qwen3-8b-1   | INFO 03-21 10:00:00 [executor_base.py:1] # cuda blocks: 7191, # CPU blocks: 512\n"
      "\xe2\x94\x82 INFO 03-21 10:00:01 [worker.py:1] Available KV cache memory: 5.6 GiB \xe2\x94\x82\n"
      "qwen3-8b-1   | INFO:     Application startup complete.\n");
  EXPECT_EQ(s.gpu_blocks, 7191);
  EXPECT_NEAR(*s.kv_cache_available_gib, 5.6, 1e-9);
  EXPECT_TRUE(s.ready);
}

TEST(VllmLogParser, EnvironmentErrors) {
  const std::string log =
      "WARNING 01-01 00:00:00 [_custom_ops.py:1] Failed to import from vllm._C with ModuleNotFoundError(\"No module named "
      "'vllm._C'\")\n"                                                                        // 1: benign
      "Traceback (most recent call last):\n"                                                  // 2
      "ModuleNotFoundError: No module named 'vllm_ascend'\n"                                  // 3
      "ImportError: libhccl.so: cannot open shared object file: No such file or directory\n"  // 4
      "RuntimeError: Failed to infer device type\n"                                           // 5
      "/usr/bin/python3: No module named vllm\n"                                              // 6
      "ModuleNotFoundError: No module named 'torch_npu'\n";                                   // 7
  const auto s = ParseVllmLog(log);
  ASSERT_EQ(s.env_errors.size(), 5u);
  EXPECT_EQ(s.env_errors[0].kind, "missing_vllm_ascend");
  EXPECT_EQ(s.env_errors[0].line, 3);
  EXPECT_EQ(s.env_errors[1].kind, "libhccl");
  EXPECT_EQ(s.env_errors[2].kind, "device_type");
  EXPECT_EQ(s.env_errors[3].kind, "missing_vllm");
  EXPECT_EQ(s.env_errors[3].line, 6);
  EXPECT_EQ(s.env_errors[4].kind, "missing_torch_npu");
  const std::string hint = EnvErrorHint(s.env_errors);
  EXPECT_NE(hint.find("the vLLM environment on the target is incomplete"), std::string::npos);
  EXPECT_NE(hint.find("set_env.sh"), std::string::npos);
  EXPECT_NE(hint.find("vllm_ascend"), std::string::npos);
  EXPECT_EQ(VllmLogToJson(s)["env_error_hint"], hint);
  EXPECT_TRUE(EnvErrorHint({}).empty());
  EXPECT_EQ(ParseVllmLog("ERROR 01-01 00:00:00 [x.py:1] ImportError: cannot import name 'foo'\n").env_errors.at(0).kind,
            "import_error");
}

TEST(VllmLogParser, NotAVllmLogGivesEmptySummary) {
  const auto s = ParseVllmLog("hello\nworld (not a log)\n");
  const auto j = VllmLogToJson(s);
  EXPECT_TRUE(j["ranks"].empty());
  EXPECT_TRUE(j["weights_gib"].is_null());
  EXPECT_TRUE(j["gpu_blocks"].is_null());
  EXPECT_EQ(j["graph_capture_count"], 0);
  EXPECT_FALSE(j["ready"].get<bool>());
  EXPECT_EQ(j["line_count"], 2);
  EXPECT_TRUE(VllmLogToJson(ParseVllmLog(""))["evidence"].empty());
}

TEST(VllmLogParser, OutOfRangeNumbersAreSkippedNotTrusted) {
  const auto s = ParseVllmLog(
      "INFO 01-01 00:00:00 [x.py:1] # GPU blocks: 99999999999999999999999\n"
      "INFO 01-01 00:00:01 [x.py:1] Available memory: 1e999, total memory: 65452113920\n"
      "INFO 01-01 00:00:02 [x.py:1] # GPU blocks: 42\n");
  EXPECT_EQ(s.gpu_blocks, 42);
  EXPECT_EQ(s.evidence.at("gpu_blocks").line, 3);
  EXPECT_FALSE(s.kv_cache_available_gib.has_value());
}

// Found by fuzzing (tests/fuzz/vllm_log_fuzz.cc): a log line that is not
// UTF-8 (a GBK locale, a binary dumped to stderr) became evidence text, and
// VllmLogToJson().dump() threw json type_error 316. The summary keeps the
// bytes; the projection is valid UTF-8.
TEST(VllmLogParser, InvalidUtf8LinesGiveValidJson) {
  const std::string log =
      "(Worker\xff pid=7) INFO 01-01 00:00:00 [worker.py:1] Available KV cache memory: 5.6 GiB \xc3\x28\n"
      "INFO 01-01 00:00:01 [api_server.py:1] vLLM API server version 0.9.1\xfe\n"
      "\xed\xa0\x80 INFO:     Application startup complete.\n";
  const auto s = ParseVllmLog(log);
  EXPECT_NEAR(*s.kv_cache_available_gib, 5.6, 1e-9);
  EXPECT_NE(s.evidence.at("kv_cache_available_gib").text.find("\xc3\x28"), std::string::npos);  // bytes kept
  EXPECT_TRUE(s.ready);
  std::string dumped;
  ASSERT_NO_THROW(dumped = VllmLogToJson(s).dump());
  EXPECT_TRUE(IsValidUtf8(dumped));
  EXPECT_TRUE(VllmLogToJson(s)["ranks"].contains("Worker\xef\xbf\xbd pid=7"));
}

// Found by reading the regexes for the fuzz target: libstdc++'s std::regex
// recurses once per character a repetition consumes, so a line carrying
// 200,000 digits after "GPU KV cache size: " overflowed the stack (SIGSEGV in
// the worker). A line is read as its first 8 KiB; the number cut there is no
// number.
TEST(VllmLogParser, HugeLinesAreReadAsTheirFirst8KiB) {
  const std::string digits(200000, '7');
  const std::string log = "INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: " + digits + " tokens\n" +
                          "INFO 01-01 00:00:01 [x.py:1] Memory profiling results: " + std::string(200000, 'a') +
                          "\n" + "INFO 01-01 00:00:02 [kv_cache_utils.py:1] GPU KV cache size: 1,024 tokens\n";
  const auto s = ParseVllmLog(log);
  EXPECT_EQ(s.line_count, 3);
  EXPECT_EQ(s.kv_cache_tokens, 1024);
  EXPECT_EQ(s.evidence.at("kv_cache_tokens").line, 3);
}

// The V1 "Free memory on device" summary, read without a regex that starts
// with a repetition (those are quadratic in a digit run): the numbers before
// "GiB for ..." are read back from the words that follow them.
TEST(VllmLogParser, V1UsageFiguresBeforeTheirNames) {
  const auto s = ParseVllmLog(
      "(Worker pid=1) INFO 01-01 00:00:00 [worker.py:1] Free memory on device (58.2/61.0 GiB) on startup. "
      "Desired GPU memory utilization is (0.9, 54.9 GiB). Actual usage is 15.3 GiB for weight, "
      "-0.25 GiB for peak activation, 1.5 GiB for non-torch memory, and 0.73 GiB for NPU graph memory.\n");
  const auto& mp = s.ranks.at("Worker pid=1").memory_profile;
  EXPECT_NEAR(*mp.peak_activation_gib, -0.25, 1e-9);
  EXPECT_NEAR(*mp.non_torch_gib, 1.5, 1e-9);
  EXPECT_NEAR(*mp.graph_gib, 0.73, 1e-9);
  EXPECT_NEAR(*mp.free_gib, 58.2, 1e-9);
  const auto other = ParseVllmLog(
      "INFO 01-01 00:00:00 [worker.py:1] Free memory on device x: GiB for peak activation, "
      "2.0 GiB for CUDAGraph memory, 9 GiB for NPU graph memory\n");
  EXPECT_FALSE(other.ranks.at("").memory_profile.peak_activation_gib.has_value());  // no number before it
  EXPECT_NEAR(*other.ranks.at("").memory_profile.graph_gib, 2.0, 1e-9);              // the first in the line
}

TEST(VllmLogParser, NumbersBeyondTwoTo63AreSkipped) {
  const auto s = ParseVllmLog("INFO 01-01 00:00:00 [x.py:1] Loading model weights took 1" + std::string(30, '0') +
                              " GB\nINFO 01-01 00:00:01 [x.py:1] Loading model weights took 3.5 GB\n");
  EXPECT_NEAR(*s.weights_gib, 3.5, 1e-9);
  EXPECT_EQ(s.evidence.at("weights_gib").line, 2);
}

TEST(VllmLogLine, SplitsPrefixLevelAndMessage) {
  auto l = SplitVllmLogLine("    (VllmWorkerProcess pid=6923) INFO 07-17 23:41:16 model_runner.py:559] Loading x");
  EXPECT_EQ(l.prefix, "VllmWorkerProcess pid=6923");
  EXPECT_EQ(l.level, "INFO");
  EXPECT_EQ(l.message, "Loading x");
  l = SplitVllmLogLine("(APIServer pid=2719) INFO:     Application startup complete.");
  EXPECT_EQ(l.prefix, "APIServer pid=2719");
  EXPECT_EQ(l.message, "Application startup complete.");
  l = SplitVllmLogLine("(Worker_TP1 pid=104959) [E55] replayed");
  EXPECT_EQ(l.prefix, "Worker_TP1 pid=104959");
  EXPECT_EQ(l.level, "");
  EXPECT_EQ(l.message, "[E55] replayed");
  EXPECT_EQ(StripAnsi("^[[1;36m(A pid=1)^[[0;0m x \x1b[2K\x1b[A"), "(A pid=1) x ");
}

}  // namespace
}  // namespace npuprof::parsers
