#include "cli/sweep_report.h"

#include <fmt/format.h>

#include "views/run_compare.h"

namespace npuprof::cli {

Result<json> SweepCompare(Client& client, const json& sweep) {
  const std::string kind = sweep.value("child_kind", "");
  std::vector<json> manifests;
  json points = json::array(), left_out = json::array();
  std::vector<std::string> states;
  for (const auto& c : sweep.value("children", json::array())) {
    const std::string id = c.value("run_id", "");
    const json point = c.value("point", json::object());
    auto m = client.CallJson("manifest", json{{"run_id", id}});
    std::string reason;
    if (!m.ok()) {
      reason = m.status().message();
    } else if (m->value("status", "running") == "running") {
      reason = fmt::format("not finished ({})", m->value("state", ""));
    } else if (kind == "memory-profile" && !(m->contains("report") && (*m)["report"].is_object())) {
      reason = fmt::format("{} without a report: {}", m->value("status", ""),
                           m->value("error", json()).is_string() ? (*m)["error"].get<std::string>() : "");
    }
    states.push_back(fmt::format("{} {}: {}", id, point.dump(), reason.empty() ? m->value("status", "") : reason));
    if (!reason.empty()) {
      left_out.push_back({{"run_id", id}, {"point", point}, {"status", c.value("status", "")}, {"reason", reason}});
      continue;
    }
    manifests.push_back(std::move(*m));
    points.push_back(point);
  }
  if (manifests.size() < 2)
    return Status::Invalid(fmt::format("sweep {}: its report compares the points that have finished with a report; "
                                       "{} of {} have ({})",
                                       sweep.value("run_id", ""), manifests.size(), states.size(),
                                       fmt::join(states, "; ")));
  auto c = views::BuildRunCompare(manifests);
  if (!c.ok()) return c.status();
  for (size_t i = 0; i < points.size() && i < (*c)["runs"].size(); ++i) (*c)["runs"][i]["point"] = points[i];
  (*c)["sweep"] = {{"run_id", sweep.value("run_id", "")},
                   {"child_kind", kind},
                   {"grid", sweep.value("grid", json::array())},
                   {"left_out", left_out}};
  return c;
}

}  // namespace npuprof::cli
