#include "views/torch_report_text.h"

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/cross_rank.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

constexpr Label kTitle{"Torch Profiler 采集报告", "Torch profiler collection report"};
constexpr Label kWorkload{"负载门禁", "workload gate"};
constexpr Label kAnalysis{"解析门禁", "analysis gate"};
constexpr Label kRanks{"rank 数 (实际/期望)", "ranks (found/expected)"};
constexpr Label kKernels{"算子汇总", "kernel summary"};
constexpr Label kNone{"无 (kernel_details.csv 缺失或无效)", "none (kernel_details.csv missing or invalid)"};
constexpr Label kRows{"条记录", "rows"};
constexpr Label kSkipped{"跳过", "skipped"};
constexpr Label kTruncated{"超过读取上限, 仅汇总前部", "above the read cap: the file's head only"};

std::string Us(const json& v) { return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : "-"; }

std::string KernelTable(const json& ks, const Words& w, size_t top) {
  if (!ks.is_object()) return fmt::format("    {}: {}\n", w(kKernels), w(kNone));
  if (ks.contains("error")) return fmt::format("    {}: error: {}\n", w(kKernels), CellText(Field(ks, "error")));
  std::string out = fmt::format("    {}: {} {} ({} {}), {} µs{}\n", w(kKernels), CellText(Field(ks, "counted_rows")),
                                w(kRows), w(kSkipped), CellText(Field(ks, "skipped_rows")), Us(Field(ks, "total_us")),
                                Field(ks, "truncated").is_boolean() && Field(ks, "truncated").get<bool>()
                                    ? std::string("; ") + w(kTruncated)
                                    : "");
  out += fmt::format("    {:<34} {:>8} {:>14} {:>10} {:>7}\n", "Type", "count", "total us", "mean us", "%");
  for (const auto& t : ArrField(ks, "by_type"))
    out += fmt::format("    {:<34} {:>8} {:>14} {:>10} {:>7}\n", TruncateUtf8(StrField(t, "type"), 34),
                       CellText(Field(t, "count")), Us(Field(t, "total_us")), Us(Field(t, "mean_us")),
                       Us(Field(t, "share_pct")));
  out += fmt::format("    {:<60} {:>8} {:>14} {:>10} {:>7}\n", "Name", "count", "total us", "mean us", "%");
  size_t n = 0;
  for (const auto& k : ArrField(ks, "top")) {
    if (n++ == top) break;
    out += fmt::format("    {:<60} {:>8} {:>14} {:>10} {:>7}\n", TruncateUtf8(StrField(k, "name"), 60),
                       CellText(Field(k, "count")), Us(Field(k, "total_us")), Us(Field(k, "mean_us")),
                       Us(Field(k, "share_pct")));
  }
  return out;
}

}  // namespace

Result<json> BuildTorchReport(const json& m) {
  if (!m.is_object())
    return Status::Invalid("torch-profile report: expected the JSON object `npuprof manifest RUN` prints");
  if (!m.contains("workload_status") && !m.contains("remote_profile_dirs") && !m.contains("analysis_status"))
    return Status::Invalid("torch-profile report: none of workload_status, remote_profile_dirs, analysis_status "
                           "(is this the manifest of a torch-profile or analyse-root run?)");
  json r = json::object();
  for (const char* k : {"kind", "run_id", "status", "workload_status", "analysis_status", "rank_count",
                        "expected_ranks", "remote_profile_root"})
    r[k] = Field(m, k);
  json ranks = json::array();
  for (const auto& d : ArrField(m, "remote_profile_dirs"))
    ranks.push_back({{"path", Field(d, "path")},
                     {"analysis_status", Field(d, "analysis_status")},
                     {"outputs", Field(d, "outputs")},
                     {"kernel_summary", Field(d, "kernel_summary")}});
  r["ranks"] = std::move(ranks);
  r["cross_rank"] = CrossRankView(m);
  return r;
}

std::string RenderTorchReportText(const json& r, const std::string& lang, size_t top) {
  const Words w(IsZh(lang));
  std::string out = fmt::format("{} {} ({}, {})\n", w(kTitle), StrField(r, "run_id"), StrField(r, "kind"),
                                StrField(r, "status"));
  out += fmt::format("  {}: {}\n", w(kWorkload), CellText(Field(Field(r, "workload_status"), "status")));
  out += fmt::format("  {}: {}\n", w(kAnalysis), CellText(Field(r, "analysis_status")));
  out += fmt::format("  {}: {} / {}\n", w(kRanks), CellText(Field(r, "rank_count")),
                     CellText(Field(r, "expected_ranks")));
  if (Field(r, "cross_rank").is_object() && !ArrField(Field(r, "cross_rank"), "ranks").empty())
    out += "\n" + RenderCrossRankText(Field(r, "cross_rank"), lang);
  for (const auto& d : ArrField(r, "ranks")) {
    out += fmt::format("\n  {} [{}]\n", CellText(Field(d, "path")), CellText(Field(d, "analysis_status")));
    out += KernelTable(Field(d, "kernel_summary"), w, top);
  }
  return out;
}

}  // namespace npuprof::views
