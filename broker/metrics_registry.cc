#include "broker/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof::metrics {

namespace {

bool IsNameStart(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
bool IsNameChar(char c, bool colon) { return IsNameStart(c, colon) || (c >= '0' && c <= '9'); }

bool ValidName(std::string_view n, bool colon) {
  if (n.empty() || !IsNameStart(n[0], colon)) return false;
  return std::all_of(n.begin(), n.end(), [colon](char c) { return IsNameChar(c, colon); });
}

// Appends the lookup key of label values: each value as its 4-byte length
// then its bytes, so no two lists of values share a key.
void AppendKey(std::string& key, std::string_view v) {
  const uint32_t n = static_cast<uint32_t>(v.size());
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(v);
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// name{l1="v1",...[,le="bound"]} value\n
void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const std::vector<std::string>& label_names, const std::vector<std::string>& values,
                  const std::string* le, double value) {
  out.append(name).append(suffix);
  if (!label_names.empty() || le) {
    out.push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i) out.push_back(',');
      out.append(label_names[i]).append("=\"").append(EscapeLabelValue(values[i])).push_back('"');
    }
    if (le) out.append(label_names.empty() ? "" : ",").append("le=\"").append(*le).push_back('"');
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(FormatMetricValue(value)).push_back('\n');
}

}  // namespace

std::string EscapeHelp(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

std::string EscapeLabelValue(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void Series::Observe(double v) {
  if (std::isnan(v) || !bounds_) return;
  const auto at = std::lower_bound(bounds_->begin(), bounds_->end(), v);  // first bound >= v
  ++bucket_counts_[static_cast<size_t>(at - bounds_->begin())];
  sum_ += v;
  ++count_;
}

MetricFamily::MetricFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                           std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {
  if (!ValidName(name_, /*colon=*/true)) throw std::invalid_argument("bad metric name '" + name_ + "'");
  for (const auto& l : label_names_) {
    if (!ValidName(l, /*colon=*/false) || l.rfind("__", 0) == 0)
      throw std::invalid_argument("bad label name '" + l + "' of " + name_);
    if (type_ == MetricType::kHistogram && l == "le")
      throw std::invalid_argument("a histogram may not have a label 'le' (" + name_ + ")");
  }
  if (type_ == MetricType::kHistogram) {
    for (size_t i = 0; i < bounds_.size(); ++i)
      if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1]))
        throw std::invalid_argument("histogram bounds of " + name_ + " must be finite and increasing");
  } else if (!bounds_.empty()) {
    throw std::invalid_argument("only a histogram has bucket bounds (" + name_ + ")");
  }
  if (label_names_.empty()) With({});
}

Series& MetricFamily::With(std::initializer_list<std::string_view> label_values) {
  auto value = [&](size_t i) { return i < label_values.size() ? label_values.begin()[i] : std::string_view(); };
  key_scratch_.clear();
  for (size_t i = 0; i < label_names_.size(); ++i) AppendKey(key_scratch_, value(i));
  if (auto it = series_.find(key_scratch_); it != series_.end()) return it->second;
  Series s;
  for (size_t i = 0; i < label_names_.size(); ++i) s.label_values_.push_back(ToValidUtf8(value(i)));
  if (type_ == MetricType::kHistogram) {
    s.bounds_ = &bounds_;
    s.bucket_counts_.assign(bounds_.size() + 1, 0);
  }
  return series_.emplace(key_scratch_, std::move(s)).first->second;
}

size_t MetricFamily::RemoveWhere(size_t label_index, std::string_view value) {
  size_t n = 0;
  for (auto it = series_.begin(); it != series_.end();) {
    const auto& v = it->second.label_values_;
    if (label_index < v.size() && v[label_index] == value) {
      it = series_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

void MetricFamily::Render(std::string& out) const {
  out.append("# HELP ").append(name_).push_back(' ');
  out.append(EscapeHelp(help_)).push_back('\n');
  out.append("# TYPE ").append(name_).push_back(' ');
  out.append(TypeName(type_)).push_back('\n');
  std::vector<const Series*> sorted;
  sorted.reserve(series_.size());
  for (const auto& [key, s] : series_) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(),
            [](const Series* a, const Series* b) { return a->label_values_ < b->label_values_; });
  for (const Series* s : sorted) {
    if (type_ != MetricType::kHistogram) {
      AppendSample(out, name_, "", label_names_, s->label_values_, nullptr, s->value_);
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s->bucket_counts_[i];
      const std::string le = i < bounds_.size() ? FormatMetricValue(bounds_[i]) : "+Inf";
      AppendSample(out, name_, "_bucket", label_names_, s->label_values_, &le, static_cast<double>(cumulative));
    }
    AppendSample(out, name_, "_sum", label_names_, s->label_values_, nullptr, s->sum_);
    AppendSample(out, name_, "_count", label_names_, s->label_values_, nullptr, static_cast<double>(s->count_));
  }
}

MetricFamily& MetricsRegistry::Add(std::string name, std::string help, MetricType type,
                                   std::vector<std::string> label_names, std::vector<double> bounds) {
  for (const auto& f : families_)
    if (f.name() == name) throw std::invalid_argument("metric '" + name + "' declared twice");
  return families_.emplace_back(std::move(name), std::move(help), type, std::move(label_names), std::move(bounds));
}

std::string MetricsRegistry::Render() const {
  std::string out;
  out.reserve(4096);
  for (const auto& f : families_) f.Render(out);
  return out;
}

}  // namespace npuprof::metrics
