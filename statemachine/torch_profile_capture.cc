#include "statemachine/torch_profile_capture.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "statemachine/torch_profile_analyse_limit.h"
#include "statemachine/torch_profile_spec.h"

namespace npuprof::sm {

namespace {

bool Given(const run_specs::TorchProfileSpec& s, const std::string& field) {
  if (field == "profile_delay_iterations") return s.has_profile_delay_iterations();
  if (field == "profile_max_iterations") return s.has_profile_max_iterations();
  if (field == "torch_profiler_record_shapes") return s.has_torch_profiler_record_shapes();
  if (field == "torch_profiler_with_memory") return s.has_torch_profiler_with_memory();
  if (field == "data_simplification") return s.has_data_simplification();
  if (field == "analyse_export_type") return s.has_analyse_export_type();
  return false;
}

json ValueOf(const run_specs::TorchProfileSpec& s, const std::string& field) {
  if (!Given(s, field)) return nullptr;
  if (field == "profile_delay_iterations") return s.profile_delay_iterations();
  if (field == "profile_max_iterations") return s.profile_max_iterations();
  if (field == "torch_profiler_record_shapes") return s.torch_profiler_record_shapes();
  if (field == "torch_profiler_with_memory") return s.torch_profiler_with_memory();
  if (field == "data_simplification") return s.data_simplification();
  return s.analyse_export_type();
}

int64_t CeilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

// UTF-8 well-formedness: each lead byte followed by its continuation bytes.
bool IsUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : 4;
    if (n == 4) return false;
    for (size_t k = 1; k <= n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n + 1;
  }
  return true;
}

bool IsFieldName(const std::string& s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::optional<int64_t> Layers(const std::string& v) {
  if (v.empty() || v.size() > 7 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int64_t n = std::stoll(v);
  if (n < 1 || n > 100000) return std::nullopt;
  return n;
}

json Opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

const std::vector<CaptureFlag>& CaptureFlags() {
  static const std::vector<CaptureFlag> f = {
      {"--profile-delay-iterations", "profile_delay_iterations", "delay_iterations"},
      {"--profile-max-iterations", "profile_max_iterations", "max_iterations"},
      {"--record-shapes", "torch_profiler_record_shapes", "torch_profiler_record_shapes"},
      {"--profile-memory", "torch_profiler_with_memory", "torch_profiler_with_memory"},
      {"--data-simplification", "data_simplification", "torch_profiler_data_simplification"},
      {"--analyse-export-type", "analyse_export_type", ""},
  };
  return f;
}

bool HasCaptureFlags(const run_specs::TorchProfileSpec& spec) {
  return std::any_of(CaptureFlags().begin(), CaptureFlags().end(),
                     [&](const CaptureFlag& f) { return Given(spec, f.spec_field); });
}

bool CaptureCheckWanted(const run_specs::TorchProfileSpec& spec) {
  return HasCaptureFlags(spec) || (spec.has_budget_check() && spec.budget_check());
}

std::vector<std::string> RequiredProfilerFields(const run_specs::TorchProfileSpec& spec) {
  std::vector<std::string> out;
  if (!HasCaptureFlags(spec)) return out;
  if (spec.torch_profiler_with_stack()) out.push_back("torch_profiler_with_stack");
  for (const CaptureFlag& f : CaptureFlags())
    if (*f.config_field && Given(spec, f.spec_field)) out.push_back(f.config_field);
  return out;
}

void AddCaptureConfig(const run_specs::TorchProfileSpec& spec, json& cfg) {
  for (const CaptureFlag& f : CaptureFlags())
    if (*f.config_field && Given(spec, f.spec_field)) cfg[f.config_field] = ValueOf(spec, f.spec_field);
}

json CaptureFlagsRecord(const run_specs::TorchProfileSpec& spec) {
  json out = json::object();
  for (const CaptureFlag& f : CaptureFlags()) out[f.spec_field] = ValueOf(spec, f.spec_field);
  out["torch_profiler_with_stack"] = spec.torch_profiler_with_stack();
  out["budget_check"] = spec.has_budget_check() ? json(spec.budget_check()) : json(nullptr);
  return out;
}

Result<CaptureProbe> ParseCaptureProbe(const std::string& out, bool fields_asked) {
  if (out.size() > kMaxCaptureProbeBytes)
    return Status::Invalid(fmt::format("capture check output is {} bytes, over the {} allowed: the target's "
                                       "command printed more than its lines (check the env script's output)",
                                       out.size(), kMaxCaptureProbeBytes));
  if (!IsUtf8(out))
    return Status::Invalid("capture check output is not UTF-8: the target's command printed binary data "
                           "(check the env script's output)");
  CaptureProbe p;
  std::istringstream in(out);
  std::string line;
  const AnalyseMeans means = ParseAnalyseMeans(out, 0);
  p.disk_free_bytes = means.disk_free_bytes;
  p.mem_available_bytes = means.mem_available_bytes;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "probe_dir") {
      p.probe_dir = value.substr(0, 4096);
    } else if (key == "layers") {
      p.layers = Layers(value);
    } else if (key == "profiler_fields" && fields_asked) {
      const json a = json::parse(value, nullptr, false);
      if (!a.is_array() || a.size() > kMaxProfilerFields)
        return Status::Invalid(fmt::format(
            "capture check: profiler_fields is not a JSON array of at most {} names: '{}' (the target's Python "
            "printed something else; run python3 -c 'import vllm.config' there)",
            kMaxProfilerFields, value.substr(0, 120)));
      for (const json& e : a) {
        if (!e.is_string() || !IsFieldName(e.get<std::string>()))
          return Status::Invalid(fmt::format("capture check: profiler_fields holds {} which is not a field name",
                                             e.dump().substr(0, 120)));
        p.profiler_fields.push_back(e.get<std::string>());
      }
      p.fields_read = true;
      p.fields_error.clear();
    } else if (key == "profiler_fields_error" && fields_asked && !p.fields_read) {
      p.fields_error = value.substr(0, 400);
    }
  }
  if (fields_asked && !p.fields_read && p.fields_error.empty())
    p.fields_error = "the command printed no profiler_fields line";
  return p;
}

CaptureEstimate EstimateCapture(const run_specs::TorchProfileSpec& spec, std::optional<int64_t> layers) {
  CaptureEstimate e;
  const int64_t requests = spec.benchmark_total_requests();
  const int64_t chunks = CeilDiv(spec.prompt_tokens(), std::max<int64_t>(spec.max_num_batched_tokens(), 1));
  const int64_t batch = std::max<int64_t>(std::min(spec.benchmark_concurrency(), spec.max_num_seqs()), 1);
  int64_t steps = (requests + 1) * chunks + CeilDiv(requests, batch) * spec.benchmark_output_tokens() +
                  spec.followup_output_tokens();
  const int64_t all_steps = steps;
  if (spec.has_profile_delay_iterations()) steps = std::max<int64_t>(0, steps - spec.profile_delay_iterations());
  if (spec.has_profile_max_iterations()) steps = std::min(steps, spec.profile_max_iterations());
  e.steps = steps;
  e.layers_assumed = !layers.has_value();
  e.layers = layers.value_or(kAssumedLayers);
  double factor = 1.0;
  std::string factors;
  if (spec.torch_profiler_with_stack()) factor *= 3, factors += " x 3 (with_stack)";
  if (spec.has_torch_profiler_record_shapes() && spec.torch_profiler_record_shapes())
    factor *= 1.5, factors += " x 1.5 (record_shapes)";
  if (spec.has_torch_profiler_with_memory() && spec.torch_profiler_with_memory())
    factor *= 2, factors += " x 2 (profile_memory)";
  e.ranks = ExpectedRanks(spec);
  const double per_rank = static_cast<double>(steps) * static_cast<double>(e.layers) *
                          static_cast<double>(kCaptureBytesPerLayerStep) * factor;
  e.raw_bytes_per_rank = static_cast<int64_t>(std::min(per_rank, 9.0e17));
  e.raw_bytes = static_cast<int64_t>(std::min(per_rank * static_cast<double>(e.ranks), 9.0e17));
  const bool simplify = !spec.has_data_simplification() || spec.data_simplification();
  const double disk = static_cast<double>(e.raw_bytes) * kAnalyseRawFactor * (simplify ? 1.0 : 1.5);
  e.disk_bytes = static_cast<int64_t>(std::min(disk, 9.0e17));
  e.memory_bytes = static_cast<int64_t>(std::min(per_rank * kAnalyseRawFactor, 9.0e17));
  e.rule = fmt::format(
      "{} steps{} x {} layers{} x {} per layer-step{} = {} per rank; x {} ranks = {} raw; disk x {}{} = {}; "
      "memory {} per rank x {} = {}",
      steps, steps != all_steps ? fmt::format(" (of {} in the workload)", all_steps) : "", e.layers,
      e.layers_assumed ? " (assumed: config.json unread)" : "", BytesText(kCaptureBytesPerLayerStep), factors,
      BytesText(e.raw_bytes_per_rank), e.ranks, BytesText(e.raw_bytes), kAnalyseRawFactor,
      simplify ? "" : " x 1.5 (data_simplification false)", BytesText(e.disk_bytes),
      BytesText(e.raw_bytes_per_rank), kAnalyseRawFactor, BytesText(e.memory_bytes));
  return e;
}

CaptureVerdict JudgeCapture(const run_specs::TorchProfileSpec& spec,
                            const results::TorchProfileCaptureCheckResult& r) {
  CaptureVerdict v;
  const std::optional<int64_t> layers = r.has_layers() ? std::optional<int64_t>(r.layers()) : std::nullopt;
  const CaptureEstimate e = EstimateCapture(spec, layers);
  const std::vector<std::string> needed = RequiredProfilerFields(spec);
  std::vector<std::string> missing;
  for (const std::string& f : needed)
    if (std::find(r.profiler_fields().begin(), r.profiler_fields().end(), f) == r.profiler_fields().end())
      missing.push_back(f);
  // The target's means as it reported them (a field it did not report is null
  // in the record and judges nothing).
  const bool has_disk = r.has_disk_free_bytes(), has_mem = r.has_mem_available_bytes();
  const int64_t disk = r.disk_free_bytes(), mem = r.mem_available_bytes();
  if (!needed.empty() && !r.fields_read()) {
    v.error_kind = "capture_unsupported";
    v.error = fmt::format(
        "the capture flags need vLLM's ProfilerConfig ({}) but the target's could not be read: {}; nothing was "
        "launched — leave the capture flags out, or install a vLLM whose `vllm.config.ProfilerConfig` has them",
        fmt::join(needed, ", "), r.fields_error().empty() ? "no answer" : r.fields_error());
  } else if (!missing.empty()) {
    std::vector<std::string> flags;
    for (const CaptureFlag& f : CaptureFlags())
      if (std::find(missing.begin(), missing.end(), f.config_field) != missing.end()) flags.push_back(f.flag);
    if (std::find(missing.begin(), missing.end(), "torch_profiler_with_stack") != missing.end())
      flags.push_back("--with-stack");
    v.error_kind = "capture_unsupported";
    v.error = fmt::format(
        "the target's vLLM does not support {}: its ProfilerConfig has no {}; nothing was launched — leave "
        "{} out, or upgrade vLLM (vllm-ascend) to one whose ProfilerConfig declares {}",
        fmt::join(flags, ", "), fmt::join(missing, ", "), flags.size() == 1 ? "that flag" : "those flags",
        missing.size() == 1 ? "it" : "them");
  } else if (has_disk && e.disk_bytes > disk) {
    v.error_kind = "capture_budget";
    v.error = fmt::format(
        "capture estimate {} exceeds free disk {} under {} (rule: {}); nothing was launched — free disk there, "
        "or narrow the window (--profile-max-iterations, fewer requests or tokens)",
        BytesText(e.disk_bytes), BytesText(disk), r.probe_dir(), e.rule);
  } else if (has_mem && e.memory_bytes > mem) {
    v.error_kind = "capture_budget";
    v.error = fmt::format(
        "capture estimate needs {} of memory for analyse() but the target has {} available (rule: {}); nothing "
        "was launched — free memory there, or narrow the window (--profile-max-iterations, fewer requests or "
        "tokens)",
        BytesText(e.memory_bytes), BytesText(mem), e.rule);
  }
  v.record = json{{"ok", v.error_kind.empty()},
                  {"error_kind", v.error_kind},
                  {"error", v.error},
                  {"probe_dir", r.probe_dir()},
                  {"disk_free_bytes", has_disk ? json(disk) : json(nullptr)},
                  {"mem_available_bytes", has_mem ? json(mem) : json(nullptr)},
                  {"layers", Opt(layers)},
                  {"steps", e.steps},
                  {"estimate_layers", e.layers},
                  {"layers_assumed", e.layers_assumed},
                  {"ranks", e.ranks},
                  {"raw_bytes_per_rank", e.raw_bytes_per_rank},
                  {"raw_bytes", e.raw_bytes},
                  {"disk_bytes", e.disk_bytes},
                  {"memory_bytes", e.memory_bytes},
                  {"rule", e.rule},
                  {"profiler_fields_needed", needed},
                  {"profiler_fields_missing", missing}};
  return v;
}

std::string CaptureOutgrewEstimate(int64_t estimate, int64_t measured) {
  if (estimate < 0 || measured <= estimate) return "";
  return fmt::format("the capture's raw data ({}) outgrew its estimate ({}): the budget check's rule "
                     "underestimated this workload",
                     BytesText(measured), BytesText(estimate));
}

}  // namespace npuprof::sm
