#include "views/run_compare_text.h"

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

constexpr Label kMemTitle{"HBM 显存对比", "HBM memory compare"};
constexpr Label kTorchTitle{"Torch Profiler 采集对比", "Torch profiler collection compare"};
constexpr Label kReference{"基准 (A)", "reference (A)"};
constexpr Label kRuns{"[运行]", "[Runs]"};
constexpr Label kConfig{"[配置差异]", "[Configuration differences]"};
constexpr Label kNoDiff{"  (所有配置字段相同)", "  (every configuration field is the same)"};
constexpr Label kPosition{"位置", "Position"};
constexpr Label kDeviceIds{"设备", "devices"};
constexpr Label kComponent{"组件", "Component"};
constexpr Label kTokens{"KV Cache tokens", "KV cache tokens"};
constexpr Label kUsed{"已用 HBM", "HBM used"};
constexpr Label kTotal{"总 HBM", "HBM total"};
constexpr Label kTotals{"[合计 (各设备之和)]", "[Totals (sum over devices)]"};
constexpr Label kDeviceCounts{"设备数", "device count"};
constexpr Label kIncomplete{"缺少部分设备的值", "missing on some devices"};
constexpr Label kNotes{"[说明]", "[Notes]"};
constexpr Label kBenchmark{"[负载结果]", "[Benchmark results]"};
constexpr Label kGates{"[门禁]", "[Gates]"};
constexpr Label kRanks{"[各 rank 输出]", "[Outputs per rank]"};
constexpr Label kMetric{"指标", "Metric"};
constexpr Label kKernelTotal{"全部 kernel 设备时间", "all kernels, device time"};
constexpr Label kByType{"按类型 (Type)", "by Type"};
constexpr Label kMovers{"变化最大的 kernel", "top movers (by |Δ|)"};
constexpr Label kNoKernels{"无 kernel 汇总", "no kernel summary"};

std::string Letter(size_t i) { return i < 26 ? std::string(1, static_cast<char>('A' + i)) : fmt::format("R{}", i); }

std::string Num(const json& v, int decimals = 1) {
  if (!v.is_number()) return "-";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return fmt::format("{:.{}f}", v.get<double>(), decimals);
}

std::string Signed(const json& v, int decimals = 1) {
  if (!v.is_number()) return "-";
  return fmt::format("{:+.{}f}", v.get<double>(), decimals);
}

std::string Pct(const json& v) { return v.is_number() ? fmt::format("{:+.2f}%", v.get<double>()) : "-"; }

size_t RunCount(const json& c) { return ArrField(c, "runs").size(); }

std::string HeaderLine(const std::string& first, size_t n, const char* unit, const std::string& indent = "") {
  std::string out = indent + fmt::format("{:<34}", first);
  for (size_t i = 0; i < n; ++i) out += fmt::format(" | {:>14}", Letter(i) + (unit[0] ? std::string(" ") + unit : ""));
  for (size_t i = 1; i < n; ++i) out += fmt::format(" | {:>14} | {:>9}", "Δ" + Letter(i), "Δ" + Letter(i) + "%");
  return out + "\n" + indent + std::string(34 + n * 17 + (n - 1) * 29, '-') + "\n";
}

std::string ValueLine(const std::string& label, const json& row, const char* values_key, const char* delta_key,
                      int decimals = 1) {
  std::string out = fmt::format("{:<34}", label);
  const json& values = ArrField(row, values_key);
  const json& deltas = ArrField(row, delta_key);
  const json& pcts = ArrField(row, "delta_pct");
  for (const auto& v : values) out += fmt::format(" | {:>14}", Num(v, decimals));
  for (size_t i = 1; i < values.size(); ++i)
    out += fmt::format(" | {:>14} | {:>9}", i < deltas.size() ? Signed(deltas[i], decimals) : "-",
                       i < pcts.size() ? Pct(pcts[i]) : "-");
  return out + "\n";
}

std::string RunsAndConfig(const json& c, const Words& w) {
  std::string out = std::string(w(kRuns)) + "\n";
  size_t i = 0;
  for (const auto& r : ArrField(c, "runs")) {
    std::string point;
    if (const json& p = Field(r, "point"); p.is_object())  // a sweep's point (cli/sweep_report.h)
      for (auto it = p.begin(); it != p.end(); ++it) point += fmt::format(" {}={}", it.key(), CellText(*it));
    out += fmt::format("  {} {}{} status={} tag={} tp={} dp={} model={}{}\n", Letter(i), StrField(r, "run_id"),
                       point.empty() ? "" : " [" + point.substr(1) + "]", StrField(r, "status", "-"),
                       StrField(r, "tag", "-"), CellText(Field(r, "tp")), CellText(Field(r, "dp")),
                       StrField(r, "model", "-"), i == 0 ? "  <- " + std::string(w(kReference)) : "");
    ++i;
  }
  out += "\n" + std::string(w(kConfig)) + "\n";
  if (ArrField(c, "config_diff").empty()) out += std::string(w(kNoDiff)) + "\n";
  for (const auto& d : ArrField(c, "config_diff")) {
    std::vector<std::string> vals;
    size_t k = 0;
    for (const auto& v : ArrField(d, "values")) vals.push_back(Letter(k++) + "=" + CellText(v));
    out += fmt::format("  {:<28} {}\n", StrField(d, "field"), fmt::join(vals, "  "));
  }
  return out + "\n";
}

// " (node 1 rank 0)" when the row says where in the deployment it is.
std::string NodeRankText(const json& r) {
  if (!Field(r, "node").is_number() || !Field(r, "rank_in_node").is_number()) return "";
  return fmt::format(" (node {} rank {})", CellText(Field(r, "node")), CellText(Field(r, "rank_in_node")));
}

std::string NotesOf(const json& notes) {
  std::string out;
  for (const auto& n : notes)
    if (n.is_string()) out += "  - " + n.get<std::string>() + "\n";
  return out;
}

std::string Memory(const json& c, const Words& w) {
  const size_t n = RunCount(c);
  const bool zh = w.zh();
  std::string out;
  for (const auto& d : ArrField(c, "devices")) {
    std::vector<std::string> ids;
    size_t k = 0;
    const json& machines = Field(d, "machines");  // multi-node runs: machine:device
    for (const auto& id : ArrField(d, "device_ids")) {
      const json m = machines.is_array() && k < machines.size() ? machines[k] : json(nullptr);
      ids.push_back(Letter(k++) + "=" + (m.is_string() ? m.get<std::string>() + ":" : "") + CellText(id));
    }
    out += fmt::format("[{} {}] {}: {}\n", w(kPosition), CellText(Field(d, "position")), w(kDeviceIds),
                       fmt::join(ids, " "));
    out += HeaderLine(w(kComponent), n, "MB");
    std::string notes;
    for (const auto& row : ArrField(d, "components")) {
      out += ValueLine(StrField(row, zh ? "label_zh" : "label_en", StrField(row, "key")), row, "values_mb", "delta_mb");
      notes += NotesOf(ArrField(row, "notes"));
    }
    out += ValueLine(w(kTokens), Field(d, "kv_cache_tokens"), "values", "delta", 0);
    out += ValueLine(w(kUsed), Field(d, "hbm_used_mb"), "values_mb", "delta_mb");
    out += ValueLine(w(kTotal), Field(d, "hbm_total_mb"), "values_mb", "delta_mb");
    notes = NotesOf(ArrField(d, "notes")) + notes;
    if (!notes.empty()) out += notes;
    out += "\n";
  }
  const json& t = Field(c, "totals");
  std::vector<std::string> counts;
  size_t k = 0;
  for (const auto& v : ArrField(t, "device_counts")) counts.push_back(Letter(k++) + "=" + CellText(v));
  out += fmt::format("{} {}: {}\n", w(kTotals), w(kDeviceCounts), fmt::join(counts, " "));
  out += HeaderLine(w(kComponent), n, "MB");
  std::string notes;
  auto total = [&](const std::string& label, const json& row) {
    out += ValueLine(label, row, "values_mb", "delta_mb");
    if (!ArrField(row, "incomplete").empty())
      notes += fmt::format("  - {}: {} {}\n", label, w(kIncomplete), CellText(Field(row, "incomplete")));
  };
  for (const auto& row : ArrField(t, "components"))
    total(StrField(row, zh ? "label_zh" : "label_en", StrField(row, "key")), row);
  total(w(kUsed), Field(t, "hbm_used_mb"));
  total(w(kTotal), Field(t, "hbm_total_mb"));
  return out + notes + "\n";
}

// One rank position's kernel compare (views/kernel_compare.h): the total,
// the Types that moved most and the kernels that moved most.
std::string KernelLines(const json& k, size_t n, const Words& w) {
  if (!k.is_object()) return "";
  std::vector<std::string> st;
  size_t i = 0;
  bool any = false;
  for (const auto& s : ArrField(k, "statuses")) {
    st.push_back(Letter(i++) + "=" + CellText(s));
    any |= s.is_string() && s.get<std::string>() == "ok";
  }
  if (!any) return fmt::format("    {}: {}\n", w(kNoKernels), fmt::join(st, "  "));
  std::string out = HeaderLine("kernels (us)", n, "", "    ");
  out += "    " + ValueLine(w(kKernelTotal), Field(k, "total_us"), "values_us", "delta_us");
  out += fmt::format("    {}\n", w(kByType));
  size_t rows = 0;
  for (const auto& t : ArrField(k, "by_type")) {
    if (rows++ == 8) break;
    out += "    " + ValueLine("  " + TruncateUtf8(StrField(t, "type"), 30), t, "total_us", "delta_us");
  }
  out += fmt::format("    {}\n", w(kMovers));
  rows = 0;
  for (const auto& m : ArrField(k, "top_movers")) {
    if (rows++ == 5) break;
    out += "    " + ValueLine("  " + TruncateUtf8(StrField(m, "name"), 30), m, "total_us", "delta_us");
  }
  return out;
}

std::string Torch(const json& c, const Words& w) {
  const size_t n = RunCount(c);
  std::string out = std::string(w(kBenchmark)) + "\n" + HeaderLine(w(kMetric), n, "");
  for (const auto& row : ArrField(c, "benchmark")) out += ValueLine(StrField(row, "key"), row, "values", "delta");
  out += "\n" + std::string(w(kGates)) + "\n";
  for (const auto& g : ArrField(c, "gates")) {
    std::vector<std::string> vals;
    size_t k = 0;
    for (const auto& v : ArrField(g, "values")) vals.push_back(Letter(k++) + "=" + CellText(v));
    out += fmt::format("  {:<24} {}{}\n", StrField(g, "key"), fmt::join(vals, "  "),
                       Field(g, "same").is_boolean() && !Field(g, "same").get<bool>() ? "  (differs)" : "");
  }
  out += "\n" + std::string(w(kRanks)) + "\n";
  for (const auto& r : ArrField(c, "ranks")) {
    out += fmt::format("  {} {}{}\n", w(kPosition), CellText(Field(r, "position")), NodeRankText(r));
    out += NotesOf(ArrField(r, "notes"));
    size_t k = 0;
    const json& st = ArrField(r, "analysis_statuses");
    for (const auto& p : ArrField(r, "paths")) {
      out += fmt::format("    {} {} [{}]\n", Letter(k), CellText(p), k < st.size() ? CellText(st[k]) : "-");
      ++k;
    }
    out += HeaderLine("bytes", n, "", "    ");
    for (const auto& o : ArrField(r, "outputs"))
      out += "    " + ValueLine(StrField(o, "key"), o, "size_bytes", "delta", 0);
    out += KernelLines(Field(r, "kernels"), n, w);
  }
  return out + "\n";
}

}  // namespace

std::string RenderRunCompareText(const json& c, const std::string& lang) {
  const Words w(IsZh(lang));
  const bool memory = StrField(c, "kind") == "memory-profile";
  std::string out = fmt::format("{} ({} {})\n\n", w(memory ? kMemTitle : kTorchTitle), w(kReference),
                                StrField(c, "reference_run"));
  out += RunsAndConfig(c, w);
  out += memory ? Memory(c, w) : Torch(c, w);
  const std::string notes = NotesOf(ArrField(c, "notes"));
  if (!notes.empty()) out += std::string(w(kNotes)) + "\n" + notes;
  return out;
}

}  // namespace npuprof::views
