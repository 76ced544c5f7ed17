#include "cli/sweep_args.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"

namespace npuprof::cli {

Result<GridAxis> ParseGridOption(const std::string& option) {
  const size_t eq = option.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::Invalid(fmt::format("--grid {}: write KEY=V1,V2 (KEY a submit flag of the child kind without "
                                       "--, e.g. gpu-memory-utilization=0.8,0.9)",
                                       option));
  GridAxis axis;
  axis.key = std::string(Trim(option.substr(0, eq)));
  if (axis.key.rfind("--", 0) == 0) axis.key.erase(0, 2);
  const std::string rest = option.substr(eq + 1);
  std::string cur;
  int depth = 0;
  char quote = 0;
  auto push = [&]() -> Status {
    std::string v(Trim(cur));
    if (v.size() >= 2 && v.front() == v.back() && (v.front() == '\'' || v.front() == '"'))
      v = v.substr(1, v.size() - 2);  // quotes that only protect commas
    if (v.empty())
      return Status::Invalid(fmt::format("--grid {}: an empty value; give V1,V2,... with no empty entry", option));
    axis.values.push_back(std::move(v));
    cur.clear();
    return Status::Ok();
  };
  for (char c : rest) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      if (Status st = push(); !st.ok()) return st;
      continue;
    }
    cur.push_back(c);
  }
  if (quote || depth != 0)
    return Status::Invalid(fmt::format("--grid {}: an unclosed quote or bracket", option));
  if (Status st = push(); !st.ok()) return st;
  for (size_t i = 0; i < axis.values.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axis.values[i] == axis.values[j])
        return Status::Invalid(fmt::format("--grid {}: the value {} is given twice", option, axis.values[i]));
  return axis;
}

std::vector<std::vector<std::pair<std::string, std::string>>> GridPoints(const std::vector<GridAxis>& axes) {
  std::vector<std::vector<std::pair<std::string, std::string>>> out = {{}};
  for (const auto& a : axes) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& p : out)
      for (const auto& v : a.values) {
        auto q = p;
        q.emplace_back(a.key, v);
        next.push_back(std::move(q));
      }
    out = std::move(next);
  }
  return out;
}

bool IsReservedGridKey(const std::string& key) {
  for (const char* k : {"machine", "tag", "run-id", "wait", "quiet", "q", "data-dir", "broker", "key-file",
                        "server-key", "port", "attach", "install-wrapper", "baseline-from", "help", "h"})
    if (key == k) return true;
  return false;
}

Result<std::vector<std::string>> ParseNodeList(const std::string& value) {
  const auto bad = [&](const std::string& why) {
    return Status::Invalid(fmt::format("--grid node={}: {}; a node value is one point's deployment, a JSON list of "
                                       "--node values, head first: --grid 'node=[\"box1\",\"box2\"],[\"box1:0,1\","
                                       "\"box2:0,1\",\"box3:0,1\"]'",
                                       value, why));
  };
  const nlohmann::json list = nlohmann::json::parse(value, nullptr, false);
  if (!list.is_array()) return bad("not a JSON list");
  if (list.empty()) return bad("an empty list");
  std::vector<std::string> out;
  for (const auto& n : list) {
    if (!n.is_string() || n.get<std::string>().empty()) return bad("every entry must be a non-empty string");
    out.push_back(n.get<std::string>());
  }
  return out;
}

std::vector<std::string> NodeFlagValues(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--node" && i + 1 < args.size()) out.push_back(args[++i]);
    else if (args[i].rfind("--node=", 0) == 0) out.push_back(args[i].substr(7));
  }
  return out;
}

}  // namespace npuprof::cli
