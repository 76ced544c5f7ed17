// `npuprof inspect ...`: offline parsing of a saved artifact; no server needed.
#include <fstream>
#include <sstream>

#include <algorithm>
#include <filesystem>

#include "cli/commands.h"
#include "common/json_depth.h"
#include "parsers/msprof_csv_parser.h"
#include "parsers/npu_smi_parser.h"
#include "parsers/safetensors_header.h"
#include "parsers/vllm_log_parser.h"
#include "parsers/weight_attribution.h"

namespace npuprof::cli {

namespace {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads bytes [offset, offset+n) of a file (n may be clipped at EOF).
Result<std::string> ReadRange(const std::string& path, uint64_t offset, uint64_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string buf(n, '\0');
  in.read(buf.data(), static_cast<std::streamsize>(n));
  buf.resize(static_cast<size_t>(in.gcount()));
  return buf;
}

json ModuleMemJson(const ModuleMemTable& t) {
  json comps = json::array();
  for (const auto& c : t.components)
    comps.push_back({{"component", c.component},
                     {"device_id", c.device_id ? json(*c.device_id) : json(nullptr)},
                     {"max_reserved_mb", c.max_reserved_mb},
                     {"has_value", c.has_value},
                     {"rows", c.rows},
                     {"negative_rows", c.negative_rows},
                     {"evidence", {{"row", c.max_data_row}, {"raw", c.max_raw_value}, {"timestamp", c.max_timestamp_raw}}}});
  return {{"kind", "npu_module_mem"}, {"unit", t.unit_is_kb ? "KB" : "MB"}, {"has_device_id_column", t.has_device_id_column},
          {"data_rows", t.data_rows}, {"skipped_rows", t.skipped_rows}, {"components", comps}};
}

json NpuMemJson(const NpuMemTable& t) {
  json series = json::array();
  for (const auto& s : t.series)
    series.push_back({{"event", s.event},
                      {"device_id", s.device_id ? json(*s.device_id) : json(nullptr)},
                      {"samples", s.samples.size()},
                      {"max_hbm_mb", s.max_hbm_mb},
                      {"max_evidence", {{"row", s.max_data_row}, {"raw_kb", s.max_raw_hbm_kb}, {"timestamp", s.max_timestamp_raw}}},
                      {"last_hbm_mb", s.last_hbm_mb},
                      {"last_evidence", {{"row", s.last_data_row}, {"timestamp", s.last_timestamp_raw}}}});
  return {{"kind", "npu_mem"}, {"has_device_id_column", t.has_device_id_column}, {"data_rows", t.data_rows},
          {"skipped_rows", t.skipped_rows}, {"series", series}};
}

void InspectSafetensors(const std::string& target, int tp, int dp, bool ep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  fs::path dir;
  if (fs::is_directory(target, ec)) {
    dir = target;
    for (const auto& e : fs::directory_iterator(target, ec))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(target, ec)) {
    files.push_back(target);
    dir = fs::path(target).parent_path();
  } else {
    return Fail(2, "no such file or directory: " + target);
  }
  if (files.empty()) return Fail(1, target + ": no *.safetensors files");
  json config = nullptr;
  if (auto cfg = ReadWholeFile((dir / "config.json").string()); cfg.ok()) {
    // Read as a target's file would be (common/json_depth.h); unreadable = no config.
    if (Result<json> parsed = ParseJson(*cfg, kMaxTargetJsonDepth); parsed.ok()) config = std::move(parsed).value();
  }
  std::vector<WeightTensor> tensors;
  for (const auto& f : files) {
    const uint64_t size = fs::file_size(f, ec);
    auto first8 = ReadRange(f.string(), 0, 8);
    if (!first8.ok()) return Fail(2, first8.status().message());
    auto n = SafetensorsHeaderLength(*first8, size);
    if (!n.ok()) return Fail(1, f.string() + ": " + n.status().message());
    auto header = ReadRange(f.string(), 8, *n);  // the header only, never tensor data
    if (!header.ok()) return Fail(2, header.status().message());
    auto parsed = ParseSafetensorsHeader(*header);
    if (!parsed.ok()) return Fail(1, f.string() + ": " + parsed.status().message());
    auto ts = WeightTensorsFromHeader(*parsed, f.filename().string());
    tensors.insert(tensors.end(), ts.begin(), ts.end());
  }
  ParallelConfig pc;
  pc.tp = tp;
  pc.dp = dp;
  pc.expert_parallel = ep;
  if (config.is_object()) {
    const json& c = config.contains("num_hidden_layers") ? config : config.value("text_config", json::object());
    if (c.contains("num_hidden_layers") && c["num_hidden_layers"].is_number_integer())
      pc.num_hidden_layers = c["num_hidden_layers"].get<int>();
  }
  auto attr = AttributeWeights(tensors, pc);
  if (!attr.ok()) return Fail(2, attr.status().message());
  json out = WeightManifestJson(*attr);
  if (config.is_object()) {
    auto th = EstimateWeightsFromConfig(config, pc);
    out["theory"] = th.ok() ? WeightTheoryJson(*th) : json{{"error", th.status().message()}};
  }
  PrintJson(out);
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Parse a saved artifact offline and print JSON");
  inspect->require_subcommand(1);
  {
    auto* cmd = inspect->add_subcommand("npu-smi", "Parse saved `npu-smi info` output");
    auto file = std::make_shared<std::string>();
    auto with_avail = std::make_shared<bool>(false);
    cmd->add_option("FILE", *file, "File with npu-smi info output")->required();
    cmd->add_flag("--availability", *with_avail, "Add free/busy verdicts per device");
    cmd->callback([file, with_avail] {
      auto text = ReadWholeFile(*file);
      if (!text.ok()) return Fail(2, text.status().message());
      auto snap = parsers::ParseNpuSmi(*text);
      if (!snap.ok()) return Fail(1, *file + ": " + snap.status().message());
      json j = parsers::NpuSmiToJson(*snap);
      if (*with_avail) {
        json av = json::array();
        for (const auto& d : parsers::ClassifyDevices(*snap))
          av.push_back({{"logical_id", d.logical_id}, {"npu", d.npu}, {"chip", d.chip}, {"busy", d.busy},
                        {"reason", d.reason}, {"used_mb", d.used_mb}, {"total_mb", d.total_mb}, {"pids", d.pids}});
        j["availability"] = av;
      }
      PrintJson(j);
    });
  }
  {
    auto* cmd = inspect->add_subcommand("vllm-log", "Parse a saved vLLM server log (weights, KV cache, graphs, env errors)");
    auto file = std::make_shared<std::string>();
    cmd->add_option("FILE", *file, "vLLM stdout/stderr log")->required();
    cmd->callback([file] {
      auto text = ReadWholeFile(*file);
      if (!text.ok()) return Fail(2, text.status().message());
      PrintJson(parsers::VllmLogToJson(parsers::ParseVllmLog(*text)));
    });
  }
  {
    auto* cmd = inspect->add_subcommand("msprof-csv", "Parse an msprof npu_module_mem / npu_mem CSV");
    auto file = std::make_shared<std::string>();
    cmd->add_option("FILE", *file, "CSV file")->required();
    cmd->callback([file] {
      auto text = ReadWholeFile(*file);
      if (!text.ok()) return Fail(2, text.status().message());
      switch (DetectMsprofCsvKind(*text)) {
        case MsprofCsvKind::kNpuModuleMem: {
          auto t = ParseNpuModuleMemCsv(*text);
          if (!t.ok()) return Fail(1, *file + ": " + t.status().message());
          return PrintJson(ModuleMemJson(*t));
        }
        case MsprofCsvKind::kNpuMem: {
          auto t = ParseNpuMemCsv(*text);
          if (!t.ok()) return Fail(1, *file + ": " + t.status().message());
          return PrintJson(NpuMemJson(*t));
        }
        default:
          return Fail(1, *file + ": not an npu_module_mem or npu_mem CSV (header not recognised)");
      }
    });
  }
  {
    auto* cmd = inspect->add_subcommand("safetensors",
                                        "Read safetensors headers (never tensor data) and attribute weights per device");
    auto target = std::make_shared<std::string>();
    auto tp = std::make_shared<int>(1);
    auto dp = std::make_shared<int>(1);
    auto ep = std::make_shared<bool>(false);
    cmd->add_option("DIR_OR_FILE", *target, "Model dir or one .safetensors file")->required();
    cmd->add_option("--tp", *tp, "Tensor parallel size")->check(CLI::Range(1, 1024));
    cmd->add_option("--dp", *dp, "Data parallel size")->check(CLI::Range(1, 1024));
    cmd->add_flag("--ep", *ep, "Expert parallel on (EP = TP x DP)");
    cmd->callback([target, tp, dp, ep] { InspectSafetensors(*target, *tp, *dp, *ep); });
  }
}

}  // namespace npuprof::cli
