// VerifyFinding, MeasuredKv, RenderAdviceText: see advice_verify.h.
#include "cli/advice_verify.h"

#include <cmath>

#include <fmt/format.h>

#include "common/json_field.h"

namespace npuprof::cli {

namespace {

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

const json* DeviceOf(const json& report, int64_t device) {
  const json& devs = ArrField(report, "devices");
  for (const auto& d : devs)
    if (IntField(d, "device_id") == device) return &d;
  return devs.empty() ? nullptr : &devs[0];
}

}  // namespace

KvMeasured MeasuredKv(const json& m, int64_t device) {
  KvMeasured out;
  const json* dev = DeviceOf(Field(m, "report"), device);
  if (!dev) return out;
  for (const auto& c : ArrField(*dev, "components")) {
    if (StrField(c, "key") == "hccl") out.hccl_mb = NumField(c, "value_mb");
    if (StrField(c, "key") != "kv_cache") continue;
    out.kv_cache_mb = NumField(c, "value_mb");
    for (const auto& e : ArrField(c, "evidence"))
      if (StrField(e, "field") == "kv_cache_tokens") out.tokens = IntField(e, "value");
  }
  return out;
}

json VerifyFinding(const json& finding, const std::string& run_id, const json& sweep, const std::vector<json>& children) {
  const json& sug = Field(finding, "suggestion");
  const std::string id = StrField(sug, "verify_run_id");
  json v = {{"sweep", id}, {"tolerance_pct", kAdviceTolerancePct}, {"matched", nullptr}, {"points", json::array()}};
  if (!sweep.is_object()) {
    v["status"] = "not_run";
    return v;
  }
  // The sweep must be the one testing this finding of this run.
  const json& advice = Field(sweep, "advice");
  if (StrField(advice, "run_id") != run_id || StrField(advice, "rule") != StrField(finding, "rule")) {
    v["status"] = "mismatch_advice";
    return v;
  }
  const std::string status = StrField(sweep, "status", "running");
  v["status"] = status;
  const json& predicted = Field(advice, "predicted");
  const auto p_tokens = IntField(predicted, "kv_tokens");
  const auto p_mb = NumField(predicted, "kv_cache_mb");
  const auto p_hccl = NumField(predicted, "hccl_mb");
  const int64_t device = IntField(advice, "device").value_or(0);
  bool all = status == "ok" && !children.empty();
  for (const auto& c : children) {
    json pt = {{"run_id", StrField(c, "run_id")}, {"status", StrField(c, "status")},
               {"gpu_memory_utilization", Field(c, "gpu_memory_utilization")},
               {"predicted_kv_tokens", p_tokens ? json(*p_tokens) : json(nullptr)},
               {"predicted_kv_cache_mb", p_mb ? json(*p_mb) : json(nullptr)}};
    const KvMeasured m = MeasuredKv(c, device);
    pt["measured_kv_tokens"] = m.tokens ? json(*m.tokens) : json(nullptr);
    pt["measured_kv_cache_mb"] = m.kv_cache_mb ? json(R3(*m.kv_cache_mb)) : json(nullptr);
    std::optional<double> diff;
    if (p_tokens && m.tokens && *p_tokens > 0)
      diff = (static_cast<double>(*m.tokens) - static_cast<double>(*p_tokens)) / static_cast<double>(*p_tokens) * 100.0;
    else if (!p_tokens && p_mb && m.kv_cache_mb && *p_mb > 0)
      diff = (*m.kv_cache_mb - *p_mb) / *p_mb * 100.0;
    pt["diff_pct"] = diff ? json(R3(*diff)) : json(nullptr);
    bool ok = diff && std::fabs(*diff) <= kAdviceTolerancePct;
    if (p_hccl) {  // hccl_buffers_large: the HCCL component must move as predicted too
      if (Field(c, "env").is_object()) pt["env"] = c["env"];
      pt["predicted_hccl_mb"] = *p_hccl;
      pt["measured_hccl_mb"] = m.hccl_mb ? json(R3(*m.hccl_mb)) : json(nullptr);
      std::optional<double> hdiff;
      if (m.hccl_mb && *p_hccl > 0) hdiff = (*m.hccl_mb - *p_hccl) / *p_hccl * 100.0;
      pt["hccl_diff_pct"] = hdiff ? json(R3(*hdiff)) : json(nullptr);
      if (!hdiff) diff.reset();
      ok = ok && hdiff && std::fabs(*hdiff) <= kAdviceTolerancePct;
    }
    pt["matched"] = diff ? json(ok) : json(nullptr);
    all = all && ok;
    v["points"].push_back(std::move(pt));
  }
  if (status == "ok" || status == "failed") v["matched"] = all;
  return v;
}

std::string RenderAdviceText(const json& advice) {
  std::string out = fmt::format("advice for run {}", StrField(advice, "run_id"));
  if (StrField(advice, "status") == "unreadable")
    return out + fmt::format(": the run's evidence cannot be read: {}\n", StrField(advice, "error"));
  const json& fs = ArrField(advice, "findings");
  out += fmt::format(": {} finding(s)\n", fs.size());
  for (const auto& e : ArrField(advice, "evidence_errors"))
    out += fmt::format("  ! evidence that could not be read (its rules found nothing): {}\n", StrField(e, "message"));
  int i = 0;
  for (const auto& f : fs) {
    out += fmt::format("\n{}. [{}] {} (cause: {})\n   {}\n", ++i, StrField(f, "severity"), StrField(f, "rule"),
                       StrField(f, "cause"), StrField(f, "explanation"));
    for (const auto& e : ArrField(f, "evidence")) {
      std::string where = StrField(e, "file");
      if (auto l = IntField(e, "line")) where += fmt::format(":{}", *l);
      if (auto d = IntField(e, "device")) where += fmt::format(" device {}", *d);
      out += fmt::format("   evidence: {} {}{}{}\n", where, StrField(e, "field"),
                         Field(e, "value").is_number() ? fmt::format(" = {}", Field(e, "value").dump()) : "",
                         StrField(e, "text").empty() ? "" : fmt::format(" ({})", StrField(e, "text")));
    }
    const json& s = Field(f, "suggestion");
    if (!Field(s, "flags").empty()) out += fmt::format("   change: {}\n", Field(s, "flags").dump());
    if (!Field(s, "predicted").empty()) out += fmt::format("   predicted: {}\n", Field(s, "predicted").dump());
    if (!StrField(s, "note").empty()) out += fmt::format("   {}\n", StrField(s, "note"));
    for (const auto& alt : ArrField(s, "alternatives"))
      out += fmt::format("   or: {} ({})\n", Field(alt, "flags").dump(), StrField(alt, "note"));
    if (!StrField(s, "command").empty()) out += fmt::format("   test it: {}\n", StrField(s, "command"));
    const json& v = Field(f, "verification");
    if (v.is_object()) {
      const json& m = Field(v, "matched");
      out += fmt::format("   verification: sweep {} {}{}\n", StrField(v, "sweep"), StrField(v, "status"),
                         m.is_boolean() ? (m.get<bool>() ? ", measured within 1 % of the prediction"
                                                         : ", measured NOT within 1 % of the prediction")
                                        : "");
      for (const auto& p : ArrField(v, "points")) {
        out += fmt::format("     {}: predicted {} KV tokens, measured {} ({} %)\n", StrField(p, "run_id"),
                           Field(p, "predicted_kv_tokens").dump(), Field(p, "measured_kv_tokens").dump(),
                           Field(p, "diff_pct").dump());
        if (p.contains("predicted_hccl_mb"))
          out += fmt::format("     {}: predicted HCCL {} MB, measured {} ({} %)\n", StrField(p, "run_id"),
                             Field(p, "predicted_hccl_mb").dump(), Field(p, "measured_hccl_mb").dump(),
                             Field(p, "hccl_diff_pct").dump());
      }
    }
  }
  return out;
}

}  // namespace npuprof::cli
