#include "cli/profile_root_layout.h"

#include <cctype>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"
#include "common/json_field.h"
#include "views/node_timeline.h"

namespace npuprof::cli {

namespace {

using nlohmann::json;

constexpr std::string_view kSuffix = "_ascend_pt";

std::string Safe(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? static_cast<char>(c) : '_';
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string WithSuffix(std::string name) {
  if (name.size() < kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    name += kSuffix;
  return name;
}

std::string Stem(const std::string& name) { return name.substr(0, name.size() - kSuffix.size()); }

// (machine, dir) -> the analyse.log blob of the analyse task that succeeded on it.
std::map<std::pair<std::string, std::string>, std::string> AnalyseLogs(const json& events_doc) {
  const json& events = events_doc.is_array() ? events_doc : Field(events_doc, "events");
  std::map<std::string, std::pair<std::string, std::string>> where;  // task_id -> (machine, dir)
  std::map<std::pair<std::string, std::string>, std::string> out;
  if (!events.is_array()) return out;
  for (const auto& e : events) {
    const std::string type = StrField(e, "type");
    const json& p = Field(e, "payload");
    if (type == "TaskScheduled" && StrField(p, "kind") == "torch_profile.analyse_rank") {
      const json& pl = Field(p, "payload");
      where[StrField(p, "task_id")] = {StrField(Field(pl, "machine"), "name"), StrField(pl, "dir")};
    } else if (type == "TaskSucceeded") {
      auto it = where.find(StrField(p, "task_id"));
      const std::string sha = StrField(Field(p, "blobs"), "analyse.log");
      if (it != where.end() && !sha.empty()) out[it->second] = sha;
    }
  }
  return out;
}

}  // namespace

Result<json> PlanProfileRootLayout(const json& m, const json& events_doc) {
  if (!m.is_object() || !Field(m, "remote_profile_dirs").is_array())
    return Status::Invalid("export: the manifest has no remote_profile_dirs array (is this a torch-profile run?)");
  const std::string head = StrField(m, "machine");
  const auto nodes = views::NodeTimelinesFromManifest(m);
  const auto logs = AnalyseLogs(events_doc);
  // The run's machine of each dir, its node index and its clock.
  struct Row {
    json dir;
    std::string machine, name;
  };
  std::vector<Row> rows;
  std::map<std::string, int> name_count;
  for (const auto& d : Field(m, "remote_profile_dirs")) {
    if (!d.is_object()) continue;
    Row r{d, Field(d, "machine").is_string() ? StrField(d, "machine") : head,
          WithSuffix(Safe(PathBaseName(StrField(d, "path"))))};
    ++name_count[r.name];
    rows.push_back(std::move(r));
  }
  std::set<std::string> taken;
  json ranks = json::array();
  for (const auto& r : rows) {
    std::string name = name_count[r.name] > 1 ? Safe(r.machine) + "-" + r.name : r.name;
    for (int n = 2; taken.count(name); ++n) name = fmt::format("{}-{}{}", Stem(r.name), n, kSuffix);
    taken.insert(name);
    const std::string path = StrField(r.dir, "path");
    int node = -1;
    double offset = 0;
    json uncertainty = nullptr;
    std::string measured = "none";
    for (const auto& n : nodes)
      if (n.machine == r.machine) {
        node = n.node;
        offset = n.offset_ms;
        uncertainty = n.uncertainty_ms ? json(*n.uncertainty_ms) : json(nullptr);
        measured = n.measured;
      }
    const json& outs = Field(r.dir, "outputs");
    auto it = logs.find({r.machine, path});
    json copied = json::array({"npuprof_rank.json"});
    if (it != logs.end()) copied.push_back("analyse.log");
    ranks.push_back({{"rank_dir", name},
                     {"original_name", PathBaseName(path)},
                     {"machine", r.machine},
                     {"node", node >= 0 ? json(node) : json(nullptr)},
                     {"device_id", Field(r.dir, "device_id").is_number_integer() ? Field(r.dir, "device_id") : json(nullptr)},
                     {"analysis_status", Field(r.dir, "analysis_status")},
                     {"remote_path", path},
                     {"clock_offset_ms", offset},
                     {"clock_uncertainty_ms", uncertainty},
                     {"clock_measured", measured},
                     {"analyse_log_sha256", it != logs.end() ? json(it->second) : json(nullptr)},
                     {"copied", copied},
                     {"referenced",
                      {{"dir", path},
                       {"kernel_details_csv", Field(Field(outs, "kernel_details_csv"), "path")},
                       {"trace_view_json", Field(Field(outs, "trace_view_json"), "path")}}}});
  }
  return json{{"run_id", Field(m, "run_id")},
              {"profile_root", kProfileRootDir},
              {"clock_rule", "a timestamp written on a rank's machine minus its clock_offset_ms is npuprof's host time"},
              {"ranks", std::move(ranks)}};
}

json RankRecord(const json& manifest_dir, const json& plan_row) {
  json r = manifest_dir.is_object() ? manifest_dir : json::object();
  r["export"] = plan_row;
  return r;
}

}  // namespace npuprof::cli
