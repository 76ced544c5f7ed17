// memory.weights: config.json and every *.safetensors header (8 bytes, then
// the header only; tensor data is never read), in one remote command where
// it can run (workers/memory/model_headers.h), attributed to devices with
// the shard rules of parsers/weight_attribution.h.
#include <algorithm>

#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/json_depth.h"
#include "parsers/safetensors_header.h"
#include "parsers/weight_attribution.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"
#include "workers/memory/model_headers.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::workers {

namespace {

bool EndsWith(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

int HiddenLayers(const json& config) {
  if (!config.is_object()) return 0;
  if (config.contains("num_hidden_layers") && config["num_hidden_layers"].is_number_integer())
    return config["num_hidden_layers"].get<int>();
  if (config.contains("text_config")) return HiddenLayers(config["text_config"]);
  return 0;
}

}  // namespace

TaskOutcome MemWeights(const tasks::MemoryWeights& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  auto& s = *c->session;
  std::string model = p.model();
  while (model.size() > 1 && model.back() == '/') model.pop_back();
  if (model.empty() || model[0] != '/') return TaskOutcome::Failure("bad_payload", "model must be an absolute path", false);

  TaskOutcome out;
  json config = nullptr;
  auto keep_config = [&](const std::string& text) {
    // Unreadable (not JSON, nested too deep) reads as no config; the blob keeps the bytes.
    Result<json> parsed = ParseJson(text, kMaxTargetJsonDepth);
    if (parsed.ok()) config = std::move(parsed).value();
    out.blobs.emplace_back("config.json", text);
  };
  auto model_missing = [&](const std::string& why) {
    return TaskOutcome::Failure("model_missing", fmt::format("cannot list {}: {}", model, why), false);
  };

  // One command reads config.json, the file list and the headers
  // (workers/memory/model_headers.h); file operations read what it could
  // not, or everything where it cannot run.
  std::vector<ModelFile> files;
  std::optional<ModelHeaders> at_once;
  auto r = s.Exec(ssh::BuildCommand(ModelHeadersArgv(model)), std::chrono::seconds(120), {}, ModelHeadersOutputCap());
  if (r.ok() && r->exit_status == 0 && r->stdout_omitted == 0) {
    auto parsed = ParseModelHeaders(r->stdout_data);
    if (parsed.ok()) at_once = std::move(*parsed);
    else spdlog::debug("reading {} at once: {}; with file operations", model, parsed.status().ToString());
  }
  if (at_once) {
    if (at_once->config) keep_config(*at_once->config);
    if (!at_once->dir_exists) return model_missing("no such directory");
    files = std::move(at_once->files);
  } else {
    auto cfg = s.ReadFile(model + "/config.json", 0, 16 << 20);
    if (cfg.ok()) {
      keep_config(*cfg);
    } else if (ssh::ErrorKindOf(cfg.status()) != ssh::SshErrorKind::kRemoteError) {
      return OutcomeFromSsh(cfg.status(), c->target);
    }
    auto entries = s.ListDir(model);
    if (!entries.ok()) {
      if (ssh::ErrorKindOf(entries.status()) == ssh::SshErrorKind::kRemoteError)
        return model_missing(entries.status().message());
      return OutcomeFromSsh(entries.status(), c->target);
    }
    for (const auto& e : *entries)
      if (!e.is_dir && EndsWith(e.name, ".safetensors")) files.push_back(ModelFile{e.name, e.size, "", std::nullopt});
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });

  std::vector<WeightTensor> tensors;
  json header_errors = json::array();
  for (auto& f : files) {
    const std::string path = model + "/" + f.name;
    if (f.first8.size() != 8) {
      auto first8 = s.ReadFile(path, 0, 8);
      if (!first8.ok()) return OutcomeFromSsh(first8.status(), c->target);
      f.first8 = *first8;
      f.header.reset();
    }
    auto n = SafetensorsHeaderLength(f.first8, f.size);
    if (!n.ok()) {
      header_errors.push_back({{"file", f.name}, {"error", n.status().message()}});
      continue;
    }
    if (!f.header || f.header->size() != *n) {  // not sent whole: read it on its own
      auto header = s.ReadFile(path, 8, *n);
      if (!header.ok()) return OutcomeFromSsh(header.status(), c->target);
      f.header = std::move(*header);
    }
    auto parsed = ParseSafetensorsHeader(*f.header);
    if (!parsed.ok()) {
      header_errors.push_back({{"file", f.name}, {"error", parsed.status().message()}});
      continue;
    }
    out.blobs.emplace_back("safetensors_headers/" + f.name + ".json", *f.header);
    auto ts = WeightTensorsFromHeader(*parsed, f.name);
    tensors.insert(tensors.end(), ts.begin(), ts.end());
    tc.progress(fmt::format("read header of {}", f.name));
  }

  ParallelConfig pc;
  pc.tp = p.tp() > 0 ? p.tp() : 1;
  pc.dp = p.dp() > 0 ? p.dp() : 1;
  pc.expert_parallel = p.expert_parallel();
  pc.num_hidden_layers = HiddenLayers(config);

  json weights = nullptr;
  if (!tensors.empty()) {
    auto attr = AttributeWeights(tensors, pc);
    if (!attr.ok()) return TaskOutcome::Failure("bad_payload", attr.status().message(), false);
    json manifest = WeightManifestJson(*attr);
    out.blobs.emplace_back("weight_manifest.json", manifest.dump(2));
    weights = {{"per_device_bytes", attr->per_device_bytes},
               {"total_bytes", attr->total_bytes},
               {"categories", manifest.value("categories", json::array())},
               {"tp", pc.tp},
               {"dp", pc.dp},
               {"ep", attr->ep},
               {"expert_parallel", pc.expert_parallel},
               {"files", files.size()},
               {"tensors", attr->tensors.size()},
               {"rule_based_inference", true}};
  }
  json theory = nullptr;
  if (config.is_object()) {
    auto th = EstimateWeightsFromConfig(config, pc);
    if (th.ok()) theory = WeightTheoryJson(*th);
  }
  if (weights.is_null() && config.is_null())
    return TaskOutcome::Failure("model_missing",
                                fmt::format("{} has neither config.json nor readable *.safetensors headers", model), false);
  out.ok = true;
  out.result = {{"weights", weights}, {"theory", theory}, {"config", config}, {"header_errors", header_errors},
                {"safetensors_files", files.size()}};
  return out;
}

}  // namespace npuprof::workers
