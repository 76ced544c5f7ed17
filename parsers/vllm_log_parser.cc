#include "parsers/vllm_log_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>
#include <utility>

#include "parsers/finite_number.h"
#include "parsers/vllm_log_env_errors.h"
#include "parsers/vllm_log_line.h"

namespace npuprof::parsers {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// Bounds on lists copied from the log (a crash loop can repeat them endlessly).
constexpr size_t kMaxEnvErrors = 100;
constexpr size_t kMaxReadinessLines = 50;

// A line is read as its first kMaxLineBytes (see the header): std::regex
// recurses once per character a repetition consumes, so an unbounded line
// (a megabyte of digits after "GPU KV cache size: ") would overflow the stack.
constexpr size_t kMaxLineBytes = 8192;

// Source priorities: a dedicated line beats a number read from a summary.
constexpr int kSummary = 1;
constexpr int kDedicated = 2;

// A number matched by a pattern below; NaN when it is none or out of range
// (parsers/finite_number.h; values that are NaN are never stored).
double Num(std::string_view s) {
  const ParsedNumber n = ParseFiniteNumber(s);
  return n.kind == ParsedNumber::kNumber ? n.value : std::nan("");
}
double Num(const std::ssub_match& group) { return Num(std::string_view(group.str())); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Length of "-?\d+(?:\.\d+)?" at the start of s; 0 when absent.
size_t NumberLength(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  const size_t digits = i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == digits) return 0;
  if (i + 1 < s.size() && s[i] == '.' && IsDigit(s[i + 1])) {
    i += 2;
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  return i;
}

// The number written right before the first `tail` in m that has one ("1.5"
// of "... 1.5 GiB for peak activation"): where it starts (npos when none)
// and its value. Scans back from the tail instead of a regex that starts with
// a repetition, which is quadratic in the length of a digit run.
std::pair<size_t, double> NumberBefore(std::string_view m, std::string_view tail) {
  for (size_t at = m.find(tail); at != std::string_view::npos; at = m.find(tail, at + 1)) {
    size_t b = at;
    while (b > 0 && IsDigit(m[b - 1])) --b;
    if (b == at) continue;
    if (b >= 2 && m[b - 1] == '.' && IsDigit(m[b - 2])) {
      b -= 2;
      while (b > 0 && IsDigit(m[b - 1])) --b;
    }
    if (b > 0 && m[b - 1] == '-') --b;
    return {b, Num(m.substr(b, at - b))};
  }
  return {std::string_view::npos, std::nan("")};
}

// Every "key=<number>" in m, in order (the V0 "Memory profiling results:"
// line); a key is the run of [A-Za-z0-9_] right before '='. Linear, unlike
// the regex "(\w+)=<number>" searched from every position.
std::vector<std::pair<std::string_view, double>> KeyNumbers(std::string_view m) {
  std::vector<std::pair<std::string_view, double>> out;
  for (size_t eq = m.find('='); eq != std::string_view::npos; eq = m.find('=', eq + 1)) {
    size_t k = eq;
    while (k > 0 && (std::isalnum(static_cast<unsigned char>(m[k - 1])) || m[k - 1] == '_')) --k;
    const size_t n = NumberLength(m.substr(eq + 1));
    if (k == eq || n == 0) continue;
    out.emplace_back(m.substr(k, eq - k), Num(m.substr(eq + 1, n)));
  }
  return out;
}

// "1,587,648" -> 1587648.
std::optional<int64_t> ToInt(std::string s) {
  std::erase(s, ',');
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

bool Contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

// One value with its source priority and evidence.
struct Slot {
  std::optional<double> value;
  int prio = 0;
  LogEvidence ev;
};
enum class Keep { kFirst, kMax };

// A higher-priority source replaces a lower one; at equal priority the first
// (kFirst) or the largest (kMax) value stays.
void Offer(Slot& slot, double v, int prio, Keep keep, const LogEvidence& ev) {
  if (std::isnan(v)) return;
  const bool take = !slot.value || prio > slot.prio || (prio == slot.prio && keep == Keep::kMax && v > *slot.value);
  if (!take) return;
  slot.value = v;
  slot.prio = prio;
  slot.ev = ev;
}

struct RankState {
  Slot weights, load_secs, kv, graph;
  int graph_count = 0;
  std::map<std::string, std::pair<double, LogEvidence>> profile;  // memory_profile field -> value (first wins)
};

// Every regex once. ECMAScript syntax; numbers may be negative (trap 13).
struct Patterns {
  const std::string num = R"((-?\d+(?:\.\d+)?))";
  std::regex weights{R"((?:Loading model weights took|Model loading took) )" + num +
                     R"( ?(GB|GiB|MiB)(?: memory)?(?: and (\d+(?:\.\d+)?) seconds)?)"};
  std::regex weights_seconds_only{R"(Loading model weights took (\d+(?:\.\d+)?) seconds)"};  // rfork trap
  std::regex load_seconds{R"(Loading weights took (\d+(?:\.\d+)?) seconds)"};
  std::regex profile_takes{R"(Memory profiling takes (\d+(?:\.\d+)?) seconds)"};
  std::regex profile_budget{R"(total_gpu_memory \()" + num + R"(\s*GiB\) x gpu_memory_utilization \()" + num +
                            R"(\) = )" + num + R"(\s*GiB)"};
  std::regex profile_weights{R"(model weights take )" + num + R"(\s*GiB)"};
  std::regex profile_non_torch{R"(non_torch_memory takes )" + num + R"(\s*GiB)"};
  std::regex profile_activation{R"(activation peak memory takes )" + num + R"(\s*GiB)"};
  std::regex profile_kv{R"(reserved for KV Cache is )" + num + R"(\s*GiB)"};
  std::regex free_on_startup{R"(Free memory on device \()" + num + "/" + num + R"( GiB\))"};
  std::regex desired_util{R"(Desired GPU memory utilization is \()" + num + ", " + num + R"( GiB\))"};
  std::regex usage_weights{R"(Actual usage: )" + num + R"( GiB for weights)"};
  std::regex usage_consumed{R"(Actual usage is )" + num + R"( GiB for consumed memory)"};
  std::regex current_kv{R"((?:Current KV cache memory:|Current kv cache memory in use is) )" + num + " GiB"};
  std::regex available_kv{R"(Available KV cache memory: )" + num + " GiB"};
  std::regex available_bytes{
      R"(Available memory: (-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?), total memory: (\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))"};
  std::regex manual_kv{R"(reserved )" + num + R"( GiB memory for KV Cache)"};
  std::regex blocks{R"(# (\w+) blocks: (\d+)(?:[,;] # (?:CPU|swap) blocks: (\d+))?)"};
  std::regex num_gpu_blocks{R"(num_gpu_blocks is: (\d+))"};
  std::regex kv_tokens{R"(GPU KV cache size: ([\d,]+) tokens)"};
  std::regex concurrency{R"(Maximum concurrency for ([\d,]+) tokens per request: (\d+(?:\.\d+)?)x)"};
  std::regex graph_finished{R"(Graph capturing finished in (\d+(?:\.\d+)?) secs?(?:, took )" + num + R"( (GiB|MiB))?)"};
  std::regex graph_pool{R"(CUDA graph pool memory: )" + num + R"( GiB \(actual\))"};
  std::regex compile_warmup{R"(torch\.compile and initial profiling/warmup run together took (\d+(?:\.\d+)?) s)"};
  std::regex torch_compile{R"(torch\.compile (?:takes|took) (\d+(?:\.\d+)?) s in total)"};
  std::regex init_engine{R"(init engine \(profile, create kv cache, warmup model\) took (\d+(?:\.\d+)?) s)"};
  std::regex encoder{
      R"(Encoder cache will be initialized with a budget of ([\d,]+) tokens, and profiled with ([\d,]+) (\w+) items)"};
  std::regex graph_sizes{R"((?:with|→|->) (\d+) sizes)"};
  std::regex util_arg{R"(['"]?gpu_memory_utilization['"]?\s*[:=]\s*(\d+(?:\.\d+)?))"};
  std::regex kv_error{
      R"(max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((\d+)\))"};
  std::regex version_engine{R"(LLM engine \(v([^) ]+)\))"};
  std::regex version_banner{R"((?:vLLM API server version|▀▄▀\s+version) (\d+\.\d+[\w.+-]*))"};
};

const Patterns& P() {
  static const Patterns p;
  return p;
}

class LogReader {
 public:
  VllmLogSummary Run(std::string_view text);

 private:
  void OnLine(const VllmLogLine& l, const LogEvidence& ev);
  void OnRankFacts(const VllmLogLine& l, const LogEvidence& ev);
  void OnMemoryProfile(const VllmLogLine& l, const LogEvidence& ev);
  void OnRunFacts(const VllmLogLine& l, const LogEvidence& ev);
  void OnReadiness(const VllmLogLine& l);
  void OnEnvError(const VllmLogLine& l, const LogEvidence& ev);

  void Weights(const std::string& prefix, double v, int prio, const LogEvidence& ev);
  void LoadSeconds(const std::string& prefix, double v, int prio, const LogEvidence& ev);
  void Kv(const std::string& prefix, double v, int prio, const LogEvidence& ev);
  void Graph(const std::string& prefix, double v, int prio, const LogEvidence& ev);
  void Profile(const std::string& prefix, const std::string& field, double v, const LogEvidence& ev);
  void RunDouble(std::optional<double>& field, const char* name, double v, const LogEvidence& ev);
  void RunInt(std::optional<int64_t>& field, const char* name, std::optional<int64_t> v, const LogEvidence& ev);

  VllmLogSummary Finish();

  VllmLogSummary out_;
  std::map<std::string, RankState> ranks_;
  Slot weights_, load_secs_, kv_, graph_;
};

void LogReader::Weights(const std::string& prefix, double v, int prio, const LogEvidence& ev) {
  Offer(ranks_[prefix].weights, v, prio, Keep::kFirst, ev);
  Offer(weights_, v, prio, Keep::kFirst, ev);
}
void LogReader::LoadSeconds(const std::string& prefix, double v, int prio, const LogEvidence& ev) {
  Offer(ranks_[prefix].load_secs, v, prio, Keep::kFirst, ev);
  Offer(load_secs_, v, prio, Keep::kFirst, ev);
}
void LogReader::Kv(const std::string& prefix, double v, int prio, const LogEvidence& ev) {
  Offer(ranks_[prefix].kv, v, prio, Keep::kFirst, ev);
  Offer(kv_, v, prio, Keep::kFirst, ev);
}
void LogReader::Graph(const std::string& prefix, double v, int prio, const LogEvidence& ev) {
  Offer(ranks_[prefix].graph, v, prio, Keep::kMax, ev);
  Offer(graph_, v, prio, Keep::kMax, ev);
}
void LogReader::Profile(const std::string& prefix, const std::string& field, double v, const LogEvidence& ev) {
  if (std::isnan(v)) return;
  ranks_[prefix].profile.try_emplace(field, v, ev);
}
void LogReader::RunDouble(std::optional<double>& field, const char* name, double v, const LogEvidence& ev) {
  if (field || std::isnan(v)) return;  // first wins
  field = v;
  out_.evidence[name] = ev;
}
void LogReader::RunInt(std::optional<int64_t>& field, const char* name, std::optional<int64_t> v,
                       const LogEvidence& ev) {
  if (field || !v) return;  // first wins; an out-of-range number is skipped
  field = v;
  out_.evidence[name] = ev;
}

void LogReader::OnRankFacts(const VllmLogLine& l, const LogEvidence& ev) {
  const auto& p = P();
  const std::string& m = l.message;
  std::smatch g;
  if (Contains(m, "eights took") || Contains(m, "Model loading took")) {
    if (std::regex_search(m, g, p.weights)) {
      double gib = Num(g[1]);
      if (g[2] == "MiB") gib /= 1024.0;
      Weights(l.prefix, gib, kDedicated, ev);
      if (g[3].matched) LoadSeconds(l.prefix, Num(g[3]), kSummary, ev);
    } else if (std::regex_search(m, g, p.weights_seconds_only)) {
      LoadSeconds(l.prefix, Num(g[1]), kSummary, ev);
    } else if (std::regex_search(m, g, p.load_seconds)) {
      LoadSeconds(l.prefix, Num(g[1]), kDedicated, ev);
    }
  }
  if (Contains(m, "KV cache memory") || Contains(m, "kv cache memory")) {
    if (std::regex_search(m, g, p.available_kv)) Kv(l.prefix, Num(g[1]), kDedicated, ev);
    if (std::regex_search(m, g, p.current_kv)) {
      Kv(l.prefix, Num(g[1]), kSummary, ev);
      Profile(l.prefix, "kv_cache_gib", Num(g[1]), ev);
    }
  }
  if (Contains(m, "Available memory: ") && std::regex_search(m, g, p.available_bytes)) {
    Kv(l.prefix, Num(g[1]) / kBytesPerGiB, kDedicated, ev);
    Profile(l.prefix, "total_gib", Num(g[2]) / kBytesPerGiB, ev);
  }
  if (Contains(m, "memory for KV Cache") && std::regex_search(m, g, p.manual_kv)) {
    Kv(l.prefix, Num(g[1]), kDedicated, ev);
  }
  if (Contains(m, "Graph capturing finished") && std::regex_search(m, g, p.graph_finished)) {
    auto& rank = ranks_[l.prefix];
    ++rank.graph_count;
    ++out_.graph_capture_count;
    const double secs = Num(g[1]);
    if (!std::isnan(secs) && (!out_.graph_capture_secs || secs > *out_.graph_capture_secs)) {
      out_.graph_capture_secs = secs;
      out_.evidence["graph_capture_secs"] = ev;
    }
    if (g[2].matched) {
      double gib = Num(g[2]);
      if (g[3] == "MiB") gib /= 1024.0;
      Graph(l.prefix, gib, kDedicated, ev);
    }
  }
  if (Contains(m, "graph pool memory") && std::regex_search(m, g, p.graph_pool)) {
    Graph(l.prefix, Num(g[1]), kDedicated, ev);
  }
  OnMemoryProfile(l, ev);
}

void LogReader::OnMemoryProfile(const VllmLogLine& l, const LogEvidence& ev) {
  const auto& p = P();
  const std::string& m = l.message;
  const std::string& r = l.prefix;
  std::smatch g;
  // V0 block (three physical lines, each with the prefix).
  if (Contains(m, "Memory profiling takes") && std::regex_search(m, g, p.profile_takes)) {
    Profile(r, "profile_seconds", Num(g[1]), ev);
  }
  if (Contains(m, "total_gpu_memory (") && std::regex_search(m, g, p.profile_budget)) {
    Profile(r, "total_gib", Num(g[1]), ev);
    Profile(r, "gpu_memory_utilization", Num(g[2]), ev);
    Profile(r, "requested_gib", Num(g[3]), ev);
    RunDouble(out_.gpu_memory_utilization, "gpu_memory_utilization", Num(g[2]), ev);
  }
  if (Contains(m, "model weights take") && std::regex_search(m, g, p.profile_weights)) {
    Profile(r, "weights_gib", Num(g[1]), ev);
    Weights(r, Num(g[1]), kSummary, ev);
  }
  if (Contains(m, "non_torch_memory takes") && std::regex_search(m, g, p.profile_non_torch)) {
    Profile(r, "non_torch_gib", Num(g[1]), ev);
  }
  if (Contains(m, "activation peak memory") && std::regex_search(m, g, p.profile_activation)) {
    Profile(r, "peak_activation_gib", Num(g[1]), ev);
  }
  if (Contains(m, "reserved for KV Cache is") && std::regex_search(m, g, p.profile_kv)) {
    Profile(r, "kv_cache_gib", Num(g[1]), ev);
    Kv(r, Num(g[1]), kSummary, ev);
  }
  // V0 one-line results: "Memory profiling results: duration=.. total_gpu_memory=..GiB ...".
  if (Contains(m, "Memory profiling results:")) {
    for (const auto& [key, v] : KeyNumbers(m)) {
      if (key == "duration") Profile(r, "profile_seconds", v, ev);
      if (key == "total_gpu_memory") Profile(r, "total_gib", v, ev);
      if (key == "non_torch_memory") Profile(r, "non_torch_gib", v, ev);
      if (key == "kv_cache_size") {
        Profile(r, "kv_cache_gib", v, ev);
        Kv(r, v, kSummary, ev);
      }
      if (key == "gpu_memory_utilization") {
        Profile(r, "gpu_memory_utilization", v, ev);
        RunDouble(out_.gpu_memory_utilization, "gpu_memory_utilization", v, ev);
      }
    }
  }
  // V1 / vllm-ascend one-line summary, printed by every rank.
  if (Contains(m, "Free memory on device")) {
    if (std::regex_search(m, g, p.free_on_startup)) {
      Profile(r, "free_gib", Num(g[1]), ev);
      Profile(r, "total_gib", Num(g[2]), ev);
    }
    if (std::regex_search(m, g, p.desired_util)) {
      Profile(r, "gpu_memory_utilization", Num(g[1]), ev);
      Profile(r, "requested_gib", Num(g[2]), ev);
      RunDouble(out_.gpu_memory_utilization, "gpu_memory_utilization", Num(g[1]), ev);
    }
    if (std::regex_search(m, g, p.usage_weights)) {
      Profile(r, "weights_gib", Num(g[1]), ev);
      Weights(r, Num(g[1]), kSummary, ev);
    }
    if (std::regex_search(m, g, p.usage_consumed)) Profile(r, "consumed_gib", Num(g[1]), ev);
    Profile(r, "peak_activation_gib", NumberBefore(m, " GiB for peak activation").second, ev);
    Profile(r, "non_torch_gib", NumberBefore(m, " GiB for non-torch memory").second, ev);
    // The graph figure comes first in the line whichever name the version gives it.
    std::pair<size_t, double> graph{std::string_view::npos, std::nan("")};
    for (std::string_view name : {" GiB for NPU graph memory", " GiB for CUDAGraph memory", " GiB for CUDA graph memory"}) {
      graph = std::min(graph, NumberBefore(m, name), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    Profile(r, "graph_gib", graph.second, ev);
    Graph(r, graph.second, kSummary, ev);
  }
}

void LogReader::OnRunFacts(const VllmLogLine& l, const LogEvidence& ev) {
  const auto& p = P();
  const std::string& m = l.message;
  std::smatch g;
  if (Contains(m, " blocks: ") && std::regex_search(m, g, p.blocks)) {
    RunInt(out_.gpu_blocks, "gpu_blocks", ToInt(g[2]), ev);
    if (g[3].matched) RunInt(out_.cpu_blocks, "cpu_blocks", ToInt(g[3]), ev);
  }
  if (Contains(m, "num_gpu_blocks is:") && std::regex_search(m, g, p.num_gpu_blocks)) {
    RunInt(out_.gpu_blocks, "gpu_blocks", ToInt(g[1]), ev);
  }
  if (Contains(m, "GPU KV cache size:") && std::regex_search(m, g, p.kv_tokens)) {
    RunInt(out_.kv_cache_tokens, "kv_cache_tokens", ToInt(g[1]), ev);
  }
  if (Contains(m, "Maximum concurrency for") && std::regex_search(m, g, p.concurrency)) {
    RunInt(out_.max_concurrency_tokens_per_request, "max_concurrency_tokens_per_request", ToInt(g[1]), ev);
    RunDouble(out_.max_concurrency, "max_concurrency", Num(g[2]), ev);
  }
  if (Contains(m, "torch.compile")) {
    if (std::regex_search(m, g, p.compile_warmup)) {
      RunDouble(out_.compile_warmup_seconds, "compile_warmup_seconds", Num(g[1]), ev);
    } else if (std::regex_search(m, g, p.torch_compile)) {
      RunDouble(out_.torch_compile_seconds, "torch_compile_seconds", Num(g[1]), ev);
    }
  }
  if (Contains(m, "init engine (") && std::regex_search(m, g, p.init_engine)) {
    RunDouble(out_.init_engine_seconds, "init_engine_seconds", Num(g[1]), ev);
  }
  if (Contains(m, "Encoder cache will be initialized") && std::regex_search(m, g, p.encoder)) {
    if (!out_.encoder_cache_budget_tokens) out_.encoder_cache_profile_modality = g[3];
    RunInt(out_.encoder_cache_budget_tokens, "encoder_cache_budget_tokens", ToInt(g[1]), ev);
    RunInt(out_.encoder_cache_profile_items, "encoder_cache_profile_items", ToInt(g[2]), ev);
  }
  if (Contains(m, " sizes") && Contains(m, "graph") && std::regex_search(m, g, p.graph_sizes)) {
    RunInt(out_.graph_sizes_count, "graph_sizes_count", ToInt(g[1]), ev);
  }
  if (Contains(m, "gpu_memory_utilization") && !Contains(m, "total_gpu_memory (") &&
      !Contains(m, "Memory profiling results") && std::regex_search(m, g, p.util_arg)) {
    RunDouble(out_.gpu_memory_utilization, "gpu_memory_utilization", Num(g[1]), ev);
  }
  if (Contains(m, "max seq len") && std::regex_search(m, g, p.kv_error)) {
    RunInt(out_.kv_error_max_seq_len, "kv_capacity_error", ToInt(g[1]), ev);
    RunInt(out_.kv_error_max_kv_tokens, "kv_capacity_error", ToInt(g[2]), ev);
  }
  if (out_.vllm_version.empty() && (Contains(m, "version") || Contains(m, "LLM engine (v"))) {
    if (std::regex_search(m, g, p.version_engine) || std::regex_search(m, g, p.version_banner)) {
      out_.vllm_version = g[1];
      out_.evidence["vllm_version"] = ev;
    }
  }
}

void LogReader::OnReadiness(const VllmLogLine& l) {
  const std::string& m = l.message;
  const bool complete = m.starts_with("Application startup complete") || m.starts_with("Uvicorn running on");
  if (complete || m.starts_with("Starting vLLM API server") || m.starts_with("Starting vLLM server on") ||
      m.starts_with("Available routes are:")) {
    if (out_.readiness_lines.size() < kMaxReadinessLines) out_.readiness_lines.push_back(m);
  }
  if (complete && !out_.ready) out_.ready = true;
}

void LogReader::OnEnvError(const VllmLogLine& l, const LogEvidence& ev) {
  const char* kind = ClassifyEnvErrorLine(l.text, l.level);
  if (kind && out_.env_errors.size() < kMaxEnvErrors) out_.env_errors.push_back({kind, ev.line, ev.text});
}

void LogReader::OnLine(const VllmLogLine& l, const LogEvidence& ev) {
  OnRankFacts(l, ev);
  OnRunFacts(l, ev);
  OnReadiness(l);
  OnEnvError(l, ev);
}

bool Differ(const std::optional<double>& a, const std::optional<double>& b) {
  return a && b && std::fabs(*a - *b) > 1e-9;
}

VllmLogSummary LogReader::Finish() {
  auto put = [&](std::optional<double>& dst, const Slot& s, const char* name, std::map<std::string, LogEvidence>& evm) {
    if (!s.value) return;
    dst = s.value;
    evm[name] = s.ev;
  };
  put(out_.weights_gib, weights_, "weights_gib", out_.evidence);
  put(out_.weights_load_seconds, load_secs_, "weights_load_seconds", out_.evidence);
  put(out_.kv_cache_available_gib, kv_, "kv_cache_available_gib", out_.evidence);
  put(out_.graph_capture_gib, graph_, "graph_capture_gib", out_.evidence);

  for (auto& [prefix, st] : ranks_) {
    VllmRankFacts f;
    put(f.weights_gib, st.weights, "weights_gib", f.evidence);
    put(f.weights_load_seconds, st.load_secs, "weights_load_seconds", f.evidence);
    put(f.kv_cache_available_gib, st.kv, "kv_cache_available_gib", f.evidence);
    put(f.graph_capture_gib, st.graph, "graph_capture_gib", f.evidence);
    f.graph_capture_count = st.graph_count;
    auto& mp = f.memory_profile;
    const std::pair<const char*, std::optional<double>*> fields[] = {
        {"profile_seconds", &mp.profile_seconds},
        {"total_gib", &mp.total_gib},
        {"free_gib", &mp.free_gib},
        {"requested_gib", &mp.requested_gib},
        {"gpu_memory_utilization", &mp.gpu_memory_utilization},
        {"weights_gib", &mp.weights_gib},
        {"consumed_gib", &mp.consumed_gib},
        {"non_torch_gib", &mp.non_torch_gib},
        {"peak_activation_gib", &mp.peak_activation_gib},
        {"graph_gib", &mp.graph_gib},
        {"kv_cache_gib", &mp.kv_cache_gib}};
    for (const auto& [name, dst] : fields) {
      if (auto it = st.profile.find(name); it != st.profile.end()) {
        *dst = it->second.first;
        f.evidence[std::string("memory_profile.") + name] = it->second.second;
      }
    }
    const bool any = f.weights_gib || f.weights_load_seconds || f.kv_cache_available_gib || f.graph_capture_gib ||
                     f.graph_capture_count > 0 || !mp.empty();
    if (any) out_.ranks.emplace(prefix, std::move(f));
  }
  const VllmRankFacts* first = nullptr;
  for (const auto& [prefix, f] : out_.ranks) {
    if (!first) {
      first = &f;
      continue;
    }
    if (Differ(first->weights_gib, f.weights_gib) || Differ(first->kv_cache_available_gib, f.kv_cache_available_gib) ||
        Differ(first->graph_capture_gib, f.graph_capture_gib)) {
      out_.ranks_differ = true;
    }
  }
  return std::move(out_);
}

VllmLogSummary LogReader::Run(std::string_view text) {
  int64_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    const std::string_view physical = text.substr(start, end - start);
    ++line_no;
    // '\r' splits progress-bar redraws and NewLineFormatter continuations.
    size_t piece_start = 0;
    while (piece_start <= physical.size()) {
      const size_t cr = physical.find('\r', piece_start);
      const size_t piece_end = cr == std::string_view::npos ? physical.size() : cr;
      const auto piece = physical.substr(piece_start, std::min(piece_end - piece_start, kMaxLineBytes));
      if (!piece.empty()) {
        VllmLogLine l = SplitVllmLogLine(piece);
        if (!l.text.empty()) OnLine(l, LogEvidence{line_no, l.text});
      }
      if (cr == std::string_view::npos) break;
      piece_start = cr + 1;
    }
    start = end + 1;
  }
  out_.line_count = line_no;
  return Finish();
}

}  // namespace

bool VllmMemoryProfile::empty() const {
  return !profile_seconds && !total_gib && !free_gib && !requested_gib && !gpu_memory_utilization && !weights_gib &&
         !consumed_gib && !non_torch_gib && !peak_activation_gib && !graph_gib && !kv_cache_gib;
}

VllmLogSummary ParseVllmLog(std::string_view text) { return LogReader().Run(text); }

}  // namespace npuprof::parsers
