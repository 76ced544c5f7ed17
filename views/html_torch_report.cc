#include "views/html_torch_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/charts.h"
#include "views/cross_rank.h"

namespace npuprof::views {

namespace {

// The labels of the page (zh, en).
constexpr Label kTitle{"Torch Profiler 采集报告", "Torch profiler collection"};
constexpr Label kRun{"运行", "Run"};
constexpr Label kStatus{"状态", "Status"};
constexpr Label kGates{"门禁", "Gates"};
constexpr Label kWorkloadGate{"负载门禁", "Workload gate"};
constexpr Label kAnalysisGate{"解析门禁", "Analysis gate"};
constexpr Label kRequestsOk{"成功请求", "Requests ok"};
constexpr Label kSuccessRate{"成功率", "Success rate"};
constexpr Label kThreshold{"阈值", "Threshold"};
constexpr Label kFollowup{"跟进请求", "Follow-up request"};
constexpr Label kSteps{"服务与 Profiler 控制", "Service and profiler control"};
constexpr Label kStep{"步骤", "Step"};
constexpr Label kResult{"结果", "Result"};
constexpr Label kRanks{"各 rank 输出", "Outputs per rank"};
constexpr Label kPath{"路径", "Path"};
constexpr Label kExitCode{"退出码", "Exit code"};
constexpr Label kLatency{"负载请求延迟分布", "Workload latency distribution"};
constexpr Label kCount{"数量", "Count"};
constexpr Label kFailed{"失败", "failed"};
constexpr Label kNoRequests{"没有负载请求结果。", "No workload request results."};
constexpr Label kKernels{"算子汇总", "Kernel summary"};
constexpr Label kKernelRows{"条 kernel 记录", "kernel rows"};
constexpr Label kDistinct{"种 kernel", "distinct kernels"};
constexpr Label kTruncated{"文件超过读取上限, 仅汇总前部", "file above the read cap: summary of its head only"};
constexpr Label kErrors{"步骤错误", "Step errors"};
constexpr Label kCrossRank{"跨 rank 对比", "Cross-rank view"};
constexpr Label kMachine{"机器", "Machine"};
constexpr Label kDevice{"设备", "Device"};
constexpr Label kDeviceTime{"设备时间 µs", "Device time µs"};
constexpr Label kCommShare{"通信占比 %", "Communication %"};
constexpr Label kTopKernel{"耗时最长算子", "Top kernel"};
constexpr Label kVsMedian{"相对中位数 %", "vs median %"};
constexpr Label kMedian{"设备时间中位数", "Median device time"};
constexpr Label kSlowest{"最慢 rank", "Slowest rank"};
constexpr Label kNoSummary{"无算子汇总", "no kernel summary"};
constexpr Label kPresent{"存在", "present"};
constexpr Label kAbsent{"缺失", "missing"};

std::string E(std::string_view s) { return HtmlEscape(s); }

std::string Ms(std::optional<double> v) { return v ? fmt::format("{:.1f} ms", *v) : "-"; }

std::string Gates(const json& m, const Words& w) {
  const json& ws = Field(m, "workload_status");
  std::string out = Heading(2, w(kGates), "gates");
  std::vector<std::pair<std::string, std::string>> wl = {{w(kWorkloadGate), StatusBadge(StrField(ws, "status", "-"))}};
  if (ws.is_object()) {
    wl.emplace_back(w(kRequestsOk),
                    fmt::format("{} / {}", E(CellText(Field(ws, "bench_ok"))), E(CellText(Field(ws, "bench_total")))));
    if (auto r = NumField(ws, "bench_success_rate")) wl.emplace_back(w(kSuccessRate), fmt::format("{:.1f}%", *r * 100));
    if (auto t = NumField(ws, "bench_threshold")) wl.emplace_back(w(kThreshold), fmt::format("{:.1f}%", *t * 100));
    wl.emplace_back(w(kFollowup), StatusBadge(Field(ws, "followup_ok").is_boolean()
                                                ? (Field(ws, "followup_ok").get<bool>() ? "ok" : "failed")
                                                : "-"));
  }
  const json& an = Field(m, "analysis_status");
  wl.emplace_back(w(kAnalysisGate), StatusBadge(an.is_string() ? an.get<std::string>() : "-"));
  wl.emplace_back("ranks", fmt::format("{} / {}", E(CellText(Field(m, "rank_count"))),
                                       E(CellText(Field(m, "expected_ranks")))));
  return out + "<section class=\"card\">" + KeyValues(wl) + "</section>\n";
}

// A step's record (a handler result, {ok:false, error_kind, error}, or null) in a few words.
std::string StepSummary(const json& r) {
  if (!r.is_object()) return "-";
  std::vector<std::string> parts;
  for (const char* k : {"status", "ok", "latency_ms", "pid", "port", "ready_after_ms", "stopped", "already_gone",
                        "error_kind", "error"}) {
    const json& v = Field(r, k);
    if (v.is_null()) continue;
    parts.push_back(fmt::format("{}={}", k, TruncateUtf8(CellText(v), 200)));
  }
  const json& ready = Field(r, "ready");
  if (ready.is_object() && Field(ready, "ready_after_ms").is_number())
    parts.push_back("ready_after_ms=" + CellText(Field(ready, "ready_after_ms")));
  return E(fmt::format("{}", fmt::join(parts, ", ")));
}

std::string Steps(const json& m, const Words& w) {
  HtmlTable t({w(kStep), w(kResult)});
  for (const char* k : {"service_result", "start_profile", "stop_profile", "followup_result", "stop_result"})
    t.Row({"<code>" + E(k) + "</code>", StepSummary(Field(m, k))});
  return Heading(2, w(kSteps), "steps") + t.Finish();
}

// `path` shown relative to `base` when under it; the full path on hover.
std::string PathUnder(const std::string& path, const std::string& base) {
  std::string shown = path;
  if (!base.empty() && path.size() > base.size() + 1 && path.rfind(base, 0) == 0 && path[base.size()] == '/')
    shown = path.substr(base.size() + 1);
  return fmt::format("<code title=\"{}\">{}</code>", E(path), E(shown));
}

std::string OutputCell(const json& o, const std::string& rank_dir, const Words& w) {
  if (!o.is_object()) return "-";
  const bool exists = Field(o, "exists").is_boolean() && Field(o, "exists").get<bool>();
  return Badge(exists ? w(kPresent) : w(kAbsent), exists) + " " + PathUnder(StrField(o, "path"), rank_dir);
}

std::string Us(const json& v) { return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : "-"; }

// One rank's kernel summary (parsers/kernel_summary.h): the Types, then the
// longest kernels; a read error is shown as such.
std::string KernelSummary(const json& d, const Words& w) {
  const json& ks = Field(d, "kernel_summary");
  if (!ks.is_object()) return "";
  std::string out = Heading(3, fmt::format("{}: {}", w(kKernels), StrField(d, "path")));
  if (ks.contains("error")) return out + "<p class=\"note\">" + E(TruncateUtf8(CellText(Field(ks, "error")), 600)) + "</p>\n";
  out += "<p class=\"sub\">" +
         E(fmt::format("{} {} · {} µs · {} {}{}", CellText(Field(ks, "counted_rows")), w(kKernelRows),
                       Us(Field(ks, "total_us")), CellText(Field(ks, "distinct_kernels")), w(kDistinct),
                       Field(ks, "truncated").is_boolean() && Field(ks, "truncated").get<bool>()
                           ? std::string(" · ") + w(kTruncated)
                           : "")) +
         "</p>\n";
  HtmlTable types({"Type", w(kCount), "total µs", "mean µs", "max µs", "%"}, {false, true, true, true, true, true},
                  "kernel-types");
  for (const auto& t : ArrField(ks, "by_type"))
    types.Row({"<code>" + E(StrField(t, "type")) + "</code>", E(CellText(Field(t, "count"))), Us(Field(t, "total_us")),
               Us(Field(t, "mean_us")), Us(Field(t, "max_us")), Us(Field(t, "share_pct"))});
  HtmlTable top({"Name", "Type", "core", w(kCount), "total µs", "mean µs", "max µs", "%"},
                {false, false, false, true, true, true, true, true}, "kernel-top");
  for (const auto& k : ArrField(ks, "top"))
    top.Row({"<code>" + E(StrField(k, "name")) + "</code>", E(StrField(k, "type")), E(StrField(k, "core")),
             E(CellText(Field(k, "count"))), Us(Field(k, "total_us")), Us(Field(k, "mean_us")),
             Us(Field(k, "max_us")), Us(Field(k, "share_pct"))});
  return out + types.Finish() + top.Finish();
}

std::string Ranks(const json& m, const Words& w) {
  HtmlTable t({w(kPath), w(kStatus), "kernel_details.csv", "trace_view.json", w(kExitCode)});
  const std::string root = StrField(m, "remote_profile_root");
  for (const auto& d : ArrField(m, "remote_profile_dirs")) {
    const json& outs = Field(d, "outputs");
    const std::string dir = StrField(d, "path");
    t.Row({PathUnder(dir, root), StatusBadge(StrField(d, "analysis_status", "-")),
           OutputCell(Field(outs, "kernel_details_csv"), dir, w), OutputCell(Field(outs, "trace_view_json"), dir, w),
           E(CellText(Field(Field(d, "analyse"), "exit_code")))});
  }
  std::string out = Heading(2, w(kRanks), "ranks") + "<p class=\"sub\">" + E(StrField(m, "remote_profile_root")) +
                    "</p>\n" + t.Finish();
  for (const auto& d : ArrField(m, "remote_profile_dirs")) out += KernelSummary(d, w);
  return out;
}

// Every rank of the deployment side by side (views/cross_rank.h); the
// slowest rank's row is marked.
std::string CrossRank(const json& m, const Words& w) {
  const json v = CrossRankView(m);
  if (ArrField(v, "ranks").empty()) return "";
  const json& slowest = Field(v, "slowest");
  HtmlTable t({w(kMachine), w(kDevice), "rank dir", w(kDeviceTime), w(kCommShare), w(kVsMedian), w(kTopKernel)},
              {false, true, false, true, true, true, false}, "cross-rank");
  for (const auto& r : ArrField(v, "ranks")) {
    const bool is_slowest = slowest.is_object() && Field(slowest, "rank_dir") == Field(r, "rank_dir") &&
                            Field(slowest, "machine") == Field(r, "machine");
    std::string top = "-";
    if (Field(r, "top_kernel").is_object())
      top = "<code>" + E(StrField(Field(r, "top_kernel"), "name")) + "</code>";
    else if (Field(r, "note").is_string())
      top = "<span class=\"note\" title=\"" + E(StrField(r, "note")) + "\">" + E(w(kNoSummary)) + "</span>";
    const json& dev = Field(r, "deviation_from_median_pct");
    t.Row({E(StrField(r, "machine")) + (is_slowest ? " " + Badge(w(kSlowest), false) : ""),
           E(CellText(Field(r, "device_id"))), PathUnder(StrField(r, "path"), ""), Us(Field(r, "device_time_us")),
           Us(Field(r, "comm_share_pct")), dev.is_number() ? fmt::format("{:+.1f}", dev.get<double>()) : "-", top},
          is_slowest ? "slowest" : "");
  }
  std::vector<std::pair<std::string, std::string>> kv = {
      {w(kMedian), Us(Field(v, "median_device_time_us")) + " µs"}};
  if (slowest.is_object())
    kv.emplace_back(w(kSlowest), E(fmt::format("{} · device {} · {} · {} µs", StrField(slowest, "machine"),
                                               CellText(Field(slowest, "device_id")),
                                               StrField(slowest, "rank_dir"), Us(Field(slowest, "device_time_us")))));
  return Heading(2, w(kCrossRank), "cross-rank") + "<section class=\"card\">" + KeyValues(kv) + "</section>\n" +
         t.Finish();
}

std::string Latency(const json& m, const Words& w) {
  std::string out = Heading(2, w(kLatency), "latency");
  std::vector<LatencySample> samples;
  std::vector<double> ms;
  size_t ok = 0;
  for (const auto& r : ArrField(m, "benchmark_results")) {
    auto v = NumField(r, "latency_ms");
    if (!v) continue;
    const bool good = Field(r, "ok").is_boolean() && Field(r, "ok").get<bool>();
    ok += good ? 1 : 0;
    ms.push_back(*v);
    samples.push_back({*v, good,
                       fmt::format("#{} {}", CellText(Field(r, "index")),
                                   good ? CellText(Field(r, "status")) : std::string(w(kFailed)))});
  }
  if (samples.empty()) return out + "<p class=\"note\">" + E(w(kNoRequests)) + "</p>\n";
  const auto mn = std::min_element(ms.begin(), ms.end()), mx = std::max_element(ms.begin(), ms.end());
  HtmlTable t({w(kCount), w(kRequestsOk), "min", "p50", "p90", "p99", "max"},
              {true, true, true, true, true, true, true});
  t.Row({std::to_string(ms.size()), std::to_string(ok), Ms(*mn), Ms(NearestRankPercentile(ms, 50)),
         Ms(NearestRankPercentile(ms, 90)), Ms(NearestRankPercentile(ms, 99)), Ms(*mx)});
  return out + t.Finish() + "<div class=\"chart\">" + SortedLatencyChart(samples) + "</div>\n";
}

std::string StepErrors(const json& m, const Words& w) {
  std::string items;
  for (const auto& e : ArrField(m, "step_errors")) items += "<li>" + E(TruncateUtf8(CellText(e), 600)) + "</li>";
  return items.empty() ? "" : Heading(2, w(kErrors), "errors") + "<ul>" + items + "</ul>\n";
}

std::string Render(const json& m, bool zh) {
  const Words w(zh);
  const std::string run_id = StrField(m, "run_id");
  std::string body = Heading(1, w(kTitle));
  std::vector<std::pair<std::string, std::string>> head;
  if (!run_id.empty()) head.emplace_back(w(kRun), "<code>" + E(run_id) + "</code>");
  head.emplace_back(w(kStatus), StatusBadge(StrField(m, "status", "-")));
  for (const char* k : {"kind", "tag", "machine", "model", "served_model_name", "tp", "dp", "mode", "request_kind",
                        "started_at", "completed_at", "failed_at"}) {
    const json& v = Field(m, k);
    if (!v.is_null()) head.emplace_back(k, E(CellText(v)));
  }
  if (Field(m, "error").is_string()) head.emplace_back("error", E(StrField(m, "error")));
  body += "<section class=\"card\">" + KeyValues(head) + "</section>\n";
  body += Gates(m, w);
  if (m.contains("service_result")) body += Steps(m, w);
  body += CrossRank(m, w);
  body += Ranks(m, w);
  if (m.contains("benchmark_results")) body += Latency(m, w);
  body += StepErrors(m, w);
  const std::string title = run_id.empty() ? std::string(w(kTitle)) : fmt::format("{} — {}", w(kTitle), run_id);
  return HtmlDocument(title, zh ? "zh" : "en", body);
}

}  // namespace

Result<std::string> RenderTorchProfileHtml(const json& manifest, const std::string& lang) {
  if (!manifest.is_object())
    return Status::Invalid("torch-profile report: expected the JSON object `npuprof manifest RUN` prints");
  if (!manifest.contains("workload_status") && !manifest.contains("remote_profile_dirs") &&
      !manifest.contains("analysis_status"))
    return Status::Invalid("torch-profile report: none of workload_status, remote_profile_dirs, analysis_status "
                           "(is this the manifest of a torch-profile or analyse-root run?)");
  try {
    return Render(manifest, IsZh(lang));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("torch-profile report: rendering failed: ") + e.what());
  }
}

}  // namespace npuprof::views
