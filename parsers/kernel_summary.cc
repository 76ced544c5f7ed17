#include "parsers/kernel_summary.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "common/utf8.h"
#include "parsers/csv_records.h"
#include "parsers/finite_number.h"

namespace npuprof {

namespace {

std::string Cut(const std::string& s) { return s.size() <= kMaxKernelNameBytes ? s : s.substr(0, kMaxKernelNameBytes); }

void Add(std::string& core_slot, uint64_t& count, double& total, double& max, const std::string& core, double us) {
  if (count == 0) core_slot = core;
  else if (core_slot != core) core_slot = "mixed";
  ++count;
  total += us;
  max = std::max(max, us);
}

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

bool ByTotal(const KernelStat& a, const KernelStat& b) {
  if (a.total_us != b.total_us) return a.total_us > b.total_us;
  if (a.name != b.name) return a.name < b.name;
  return a.type < b.type;
}

}  // namespace

KernelSummaryBuilder::KernelSummaryBuilder(size_t max_distinct)
    : max_distinct_(max_distinct),
      reader_([this](const std::vector<std::string>& cells, size_t index) { return OnRecord(cells, index); }) {}

bool KernelSummaryBuilder::OnRecord(const std::vector<std::string>& cells, size_t index) {
  if (index == 0) {
    std::vector<std::string> missing;
    auto need = [&](std::string_view n, size_t* slot) {
      auto c = CsvColumn(cells, n);
      if (c) *slot = *c;
      else missing.emplace_back(n);
    };
    need("Name", &name_col_);
    need("Type", &type_col_);
    need("Duration(us)", &dur_col_);
    core_col_ = CsvColumn(cells, "Accelerator Core");
    start_col_ = CsvColumn(cells, "Start Time(us)");
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      error_ = Status::Invalid(fmt::format("kernel_details.csv: the header lacks {}; it has {} columns (first: {})",
                                           list, cells.size(),
                                           ToValidUtf8(cells.empty() ? std::string() : Cut(cells[0]))));
      return false;
    }
    return true;
  }
  ++sum_.data_rows;
  const size_t need = std::max({name_col_, type_col_, dur_col_}) + 1;
  if (cells.size() < need) {
    ++sum_.skipped_rows;
    return true;
  }
  const ParsedNumber d = ParseFiniteNumber(cells[dur_col_]);
  if (d.kind == ParsedNumber::kOutOfRange) {
    error_ = Status::Corruption(fmt::format("kernel_details.csv data row {}: Duration(us) is out of range ({})",
                                            sum_.data_rows, ToValidUtf8(Cut(cells[dur_col_]))));
    return false;
  }
  if (d.kind != ParsedNumber::kNumber || d.value < 0) {
    ++sum_.skipped_rows;
    return true;
  }
  const std::string core = core_col_ && *core_col_ < cells.size() ? Cut(cells[*core_col_]) : std::string();
  std::pair<std::string, std::string> key{Cut(cells[name_col_]), Cut(cells[type_col_])};
  auto it = kernels_.find(key);
  if (it == kernels_.end()) {
    if (kernels_.size() >= max_distinct_) {
      key = {kOtherKernelsName, ""};
      ++sum_.other_rows;
    }
    it = kernels_.try_emplace(std::move(key)).first;
  }
  Agg& k = it->second;
  Add(k.core, k.count, k.total_us, k.max_us, core, d.value);
  Agg& t = types_[Cut(cells[type_col_])];
  Add(t.core, t.count, t.total_us, t.max_us, core, d.value);
  ++sum_.counted_rows;
  sum_.total_us += d.value;
  if (start_col_ && *start_col_ < cells.size()) {
    const ParsedNumber st = ParseFiniteNumber(cells[*start_col_]);
    if (st.kind == ParsedNumber::kNumber && st.value >= 0) {
      if (!sum_.first_start_us || st.value < *sum_.first_start_us) sum_.first_start_us = st.value;
      const double end = st.value + d.value;
      if (!sum_.last_end_us || end > *sum_.last_end_us) sum_.last_end_us = end;
    }
  }
  return true;
}

Status KernelSummaryBuilder::Feed(std::string_view chunk) {
  if (!error_.ok()) return error_;
  reader_.Feed(chunk);
  return error_;
}

Result<KernelSummary> KernelSummaryBuilder::Finish(size_t top_n, size_t max_types) {
  if (!error_.ok()) return error_;
  reader_.Finish();
  if (!error_.ok()) return error_;
  if (reader_.records() == 0) return Status::Invalid("kernel_details.csv is empty: no header line");
  KernelSummary s = sum_;
  s.distinct_kernels = kernels_.size();
  for (const auto& [key, a] : kernels_) s.top.push_back({key.first, key.second, a.core, a.count, a.total_us, a.max_us});
  for (const auto& [type, a] : types_) s.by_type.push_back({"", type, a.core, a.count, a.total_us, a.max_us});
  std::sort(s.top.begin(), s.top.end(), ByTotal);
  std::sort(s.by_type.begin(), s.by_type.end(), ByTotal);
  if (s.top.size() > top_n) s.top.resize(top_n);
  if (s.by_type.size() > max_types) s.by_type.resize(max_types);
  return s;
}

nlohmann::json KernelSummaryJson(const KernelSummary& s) {
  auto stat = [&](const KernelStat& k, bool with_name) {
    nlohmann::json j = nlohmann::json::object();
    if (with_name) j["name"] = ToValidUtf8(k.name);
    j["type"] = ToValidUtf8(k.type);
    j["core"] = ToValidUtf8(k.core);
    j["count"] = k.count;
    j["total_us"] = R3(k.total_us);
    j["mean_us"] = R3(k.mean_us());
    j["max_us"] = R3(k.max_us);
    j["share_pct"] = s.total_us > 0 ? nlohmann::json(R3(k.total_us / s.total_us * 100.0)) : nlohmann::json(nullptr);
    return j;
  };
  nlohmann::json top = nlohmann::json::array(), types = nlohmann::json::array();
  for (const auto& k : s.top) top.push_back(stat(k, true));
  for (const auto& k : s.by_type) types.push_back(stat(k, false));
  nlohmann::json j = {{"data_rows", s.data_rows},       {"counted_rows", s.counted_rows},
                      {"skipped_rows", s.skipped_rows}, {"other_rows", s.other_rows},
                      {"distinct_kernels", s.distinct_kernels}, {"total_us", R3(s.total_us)},
                      {"top", std::move(top)},          {"by_type", std::move(types)}};
  if (s.first_start_us && s.last_end_us) {
    j["first_start_us"] = *s.first_start_us;
    j["last_end_us"] = *s.last_end_us;
  }
  return j;
}

}  // namespace npuprof
