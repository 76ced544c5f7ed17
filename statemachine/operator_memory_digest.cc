#include "statemachine/operator_memory_digest.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/utf8.h"

namespace npuprof::sm {

namespace {

using nlohmann::json;

constexpr size_t kMaxDir = 4096;
constexpr size_t kMaxName = 1024;
constexpr size_t kMaxProblem = 2048;
constexpr double kMaxAbs = 9.0e18;

// One object's fields read by name; the first bad one is kept (its path and why).
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) Fail(where_, "is not an object");
  }
  bool ok() const { return error_.empty(); }
  Status status() const { return error_.empty() ? Status::Ok() : Status::Corruption(error_); }
  const std::string& where() const { return where_; }
  std::string At(const char* key) const { return where_ + "." + key; }

  // nullptr when absent (or the object itself is bad).
  const json* Get(const char* key) const {
    if (!j_.is_object()) return nullptr;
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  const json* Need(const char* key) {
    const json* v = Get(key);
    if (v == nullptr && ok() && j_.is_object()) Fail(At(key), "is missing");
    return v;
  }
  void Fail(const std::string& at, const std::string& why) {
    if (error_.empty()) error_ = at + ": " + why;
  }

  std::string Text(const char* key, size_t cap, bool required) {
    const json* v = required ? Need(key) : Get(key);
    if (v == nullptr || v->is_null()) return "";
    if (!v->is_string()) {
      Fail(At(key), "is not a string");
      return "";
    }
    const std::string& s = v->get_ref<const std::string&>();
    if (!IsValidUtf8(s)) Fail(At(key), "is not valid UTF-8");
    if (s.size() > cap) Fail(At(key), fmt::format("is longer than {} bytes", cap));
    return s;
  }
  double Number(const char* key, double min = -kMaxAbs) {
    const json* v = Need(key);
    return v ? Check(*v, At(key), min) : 0;
  }
  std::optional<double> OptNumber(const char* key) {
    const json* v = Get(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    return Check(*v, At(key), -kMaxAbs);
  }
  int64_t Count(const char* key) {
    const json* v = Need(key);
    if (v == nullptr) return 0;
    return CountOf(*v, At(key));
  }
  std::optional<int64_t> OptInt(const char* key) {
    const json* v = Get(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number_integer()) {
      Fail(At(key), "is not a whole number");
      return std::nullopt;
    }
    return v->get<int64_t>();
  }

 private:
  double Check(const json& v, const std::string& at, double min) {
    if (!v.is_number()) {
      Fail(at, "is not a number");
      return 0;
    }
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < min || d > kMaxAbs) {
      Fail(at, fmt::format("{} is out of range", v.dump()));
      return 0;
    }
    return d;
  }
  int64_t CountOf(const json& v, const std::string& at) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      Fail(at, "is not a whole number >= 0");
      return 0;
    }
    return v.get<int64_t>();
  }

  const json& j_;
  std::string where_;
  std::string error_;
};

Status ReadFile(const json* j, const std::string& where, OperatorMemoryFile& f) {
  if (j == nullptr) return Status::Corruption(where + ": is missing");
  Reader r(*j, where);
  f.status = r.Text("status", 32, true);
  f.problem = r.Text("problem", kMaxProblem, false);
  f.bytes = r.Count("bytes");
  f.rows = r.Count("rows");
  f.bad_rows = r.Count("bad_rows");
  if (r.ok() && std::find(std::begin(kOperatorFileStatuses), std::end(kOperatorFileStatuses), f.status) ==
                    std::end(kOperatorFileStatuses))
    r.Fail(r.At("status"), fmt::format("\"{}\" is not a file status", f.status));
  return r.status();
}

Result<OperatorMemoryRank> ReadRank(const json& j, const std::string& where) {
  OperatorMemoryRank out;
  Reader r(j, where);
  out.dir = r.Text("dir", kMaxDir, true);
  out.device_id = r.OptInt("device_id");
  if (out.device_id && (*out.device_id < 0 || *out.device_id > 65535))
    r.Fail(r.At("device_id"), "is not a device id 0..65535");
  out.analyse_exit = r.OptInt("analyse_exit");
  out.analyse_problem = r.Text("analyse_problem", kMaxProblem, false);
  if (!r.ok()) return r.status();
  if (Status s = ReadFile(r.Get("memory_record"), r.At("memory_record"), out.memory_record); !s.ok()) return s;
  if (Status s = ReadFile(r.Get("operator_memory"), r.At("operator_memory"), out.operator_memory); !s.ok()) return s;
  if (const json* p = r.Get("peak"); p != nullptr && !p->is_null()) {
    Reader pr(*p, r.At("peak"));
    OperatorMemoryPeak peak;
    peak.timestamp_us = pr.Number("timestamp_us", 0);
    peak.allocated_mb = pr.Number("allocated_mb", 0);
    peak.reserved_mb = pr.Number("reserved_mb", 0);
    peak.row = pr.Count("row");
    if (!pr.ok()) return pr.status();
    out.peak = peak;
  }
  if (const json* w = r.Get("window"); w != nullptr && !w->is_null()) {
    Reader wr(*w, r.At("window"));
    OperatorMemoryWindow win;
    win.first_us = wr.Number("first_us", 0);
    win.last_us = wr.Number("last_us", 0);
    win.max_reserved_mb = wr.Number("max_reserved_mb", 0);
    win.pta_rows = wr.Count("pta_rows");
    if (!wr.ok()) return wr.status();
    out.window = win;
  }
  const json* ops = r.Need("operators");
  if (!r.ok()) return r.status();
  if (!ops->is_array()) return Status::Corruption(r.At("operators") + ": is not a list");
  if (ops->size() > kMaxPeakOperators)
    return Status::Corruption(fmt::format("{}: {} operators, more than {}", r.At("operators"), ops->size(),
                                          kMaxPeakOperators));
  for (size_t i = 0; i < ops->size(); ++i) {
    Reader orr((*ops)[i], fmt::format("{}[{}]", r.At("operators"), i));
    PeakOperator op;
    op.name = orr.Text("name", kMaxName, true);
    op.size_kb = orr.Number("size_kb", 0);
    op.allocated_us = orr.Number("allocated_us");
    op.released_us = orr.OptNumber("released_us");
    op.row = orr.Count("row");
    if (!orr.ok()) return orr.status();
    out.operators.push_back(std::move(op));
  }
  return out;
}

}  // namespace

Result<std::vector<OperatorMemoryRank>> DecodeOperatorMemoryRanks(const json& ranks) {
  if (!ranks.is_array()) return Status::Corruption("ranks: is not a list");
  if (ranks.size() > kMaxOperatorRanks)
    return Status::Corruption(fmt::format("ranks: {} ranks, more than {}", ranks.size(), kMaxOperatorRanks));
  std::vector<OperatorMemoryRank> out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto r = ReadRank(ranks[i], fmt::format("ranks[{}]", i));
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

namespace {

Result<OperatorAnalyseLimit> ReadAnalyseLimit(const json& j) {
  if (!j.is_object()) return Status::Corruption("analyse_limit: is not an object");
  OperatorAnalyseLimit l;
  if (!j.contains("limit") || !j["limit"].is_number_integer() || j["limit"].get<int64_t>() < 1 ||
      j["limit"].get<int64_t>() > static_cast<int64_t>(kMaxOperatorRanks))
    return Status::Corruption(fmt::format("analyse_limit.limit: is not a whole number from 1 to {}", kMaxOperatorRanks));
  l.limit = j["limit"].get<int64_t>();
  for (const char* key : {"source", "reason"}) {
    if (!j.contains(key) || !j[key].is_string() || j[key].get_ref<const std::string&>().size() > 1024 ||
        !IsValidUtf8(j[key].get_ref<const std::string&>()))
      return Status::Corruption(fmt::format("analyse_limit.{}: is not a text of at most 1024 bytes", key));
  }
  l.source = j["source"].get<std::string>();
  if (l.source != "means" && l.source != "default" && l.source != "given")
    return Status::Corruption("analyse_limit.source: is not one of means, default, given");
  l.reason = j["reason"].get<std::string>();
  return l;
}

}  // namespace

Result<OperatorMemoryOutput> ParseOperatorMemoryOutput(std::string_view text) {
  if (text.size() > kMaxOperatorDigestBytes)
    return Status::Corruption(fmt::format("the digest is {} bytes, more than {}", text.size(), kMaxOperatorDigestBytes));
  if (!IsValidUtf8(text)) return Status::Corruption("the digest is not valid UTF-8");
  auto parsed = ParseJson(text, 8);
  if (!parsed.ok()) return Status::Corruption("the digest: " + parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object()) return Status::Corruption("the digest is not a JSON object");
  if (!j.contains("v") || j["v"] != 1) return Status::Corruption("v: the digest is not version 1");
  OperatorMemoryOutput out;
  if (j.contains("analyse_limit")) {
    auto l = ReadAnalyseLimit(j["analyse_limit"]);
    if (!l.ok()) return l.status();
    out.analyse_limit = std::move(l).value();
  }
  if (j.contains("pending")) {
    const json& p = j["pending"];
    if (!p.is_array() || p.size() > kMaxOperatorRanks) return Status::Corruption("pending: is not a list of dirs");
    for (const auto& d : p) {
      if (!d.is_string() || d.get_ref<const std::string&>().size() > kMaxDir)
        return Status::Corruption("pending: holds something other than a directory");
      out.pending.push_back(d.get<std::string>());
    }
    return out;
  }
  if (!j.contains("ranks")) return Status::Corruption("ranks: is missing");
  auto ranks = DecodeOperatorMemoryRanks(j["ranks"]);
  if (!ranks.ok()) return ranks.status();
  out.ranks = std::move(ranks).value();
  return out;
}

json OperatorMemoryRankJson(const OperatorMemoryRank& r) {
  const auto file = [](const OperatorMemoryFile& f) {
    json o = {{"status", f.status}, {"bytes", f.bytes}, {"rows", f.rows}, {"bad_rows", f.bad_rows}};
    if (!f.problem.empty()) o["problem"] = f.problem;
    return o;
  };
  json out = {{"dir", r.dir},
              {"device_id", r.device_id ? json(*r.device_id) : json(nullptr)},
              {"analyse_exit", r.analyse_exit ? json(*r.analyse_exit) : json(nullptr)},
              {"memory_record", file(r.memory_record)},
              {"operator_memory", file(r.operator_memory)},
              {"peak", nullptr},
              {"window", nullptr},
              {"operators", json::array()}};
  if (!r.analyse_problem.empty()) out["analyse_problem"] = r.analyse_problem;
  if (r.peak)
    out["peak"] = {{"timestamp_us", r.peak->timestamp_us}, {"allocated_mb", r.peak->allocated_mb},
                   {"reserved_mb", r.peak->reserved_mb}, {"row", r.peak->row}};
  if (r.window)
    out["window"] = {{"first_us", r.window->first_us}, {"last_us", r.window->last_us},
                     {"max_reserved_mb", r.window->max_reserved_mb}, {"pta_rows", r.window->pta_rows}};
  for (const auto& op : r.operators)
    out["operators"].push_back({{"name", op.name}, {"size_kb", op.size_kb}, {"allocated_us", op.allocated_us},
                                {"released_us", op.released_us ? json(*op.released_us) : json(nullptr)},
                                {"row", op.row}});
  return out;
}

}  // namespace npuprof::sm
