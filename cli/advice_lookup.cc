#include "cli/advice_lookup.h"

#include <vector>

#include <fmt/format.h>

#include "cli/advice_verify.h"
#include "common/json_field.h"

namespace npuprof::cli {

json AdviceVerification(Client& client, const std::string& run_id, const json& finding) {
  const std::string id = StrField(Field(finding, "suggestion"), "verify_run_id");
  auto sweep = client.CallJson("manifest", json{{"run_id", id}});
  if (!sweep.ok()) return VerifyFinding(finding, run_id, nullptr, {});
  std::vector<json> children;
  for (const auto& c : ArrField(*sweep, "children")) {
    auto m = client.CallJson("manifest", json{{"run_id", StrField(c, "run_id")}});
    if (m.ok()) children.push_back(std::move(*m));
  }
  return VerifyFinding(finding, run_id, *sweep, children);
}

json SweepAdviceVerdict(Client& client, const json& sweep_summary) {
  if (StrField(sweep_summary, "kind") != "sweep") return nullptr;
  const json& advice = Field(sweep_summary, "advice");
  const std::string advised = StrField(advice, "run_id"), rule = StrField(advice, "rule");
  if (advised.empty() || rule.empty()) return nullptr;
  json out = {{"run_id", advised}, {"rule", rule}};
  auto m = client.CallJson("manifest", json{{"run_id", advised}});
  if (!m.ok()) {
    out["error"] = fmt::format("the advised run cannot be read: {}", m.status().message());
    return out;
  }
  for (const auto& f : ArrField(Field(*m, "advice"), "findings")) {
    if (StrField(f, "rule") != rule) continue;
    if (StrField(Field(f, "suggestion"), "verify_run_id") != StrField(sweep_summary, "run_id")) continue;
    out["verification"] = AdviceVerification(client, advised, f);
    return out;
  }
  out["error"] = fmt::format("run {} has no {} finding tested by this sweep", advised, rule);
  return out;
}

}  // namespace npuprof::cli
