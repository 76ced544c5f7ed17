// MetricsRegistry: counters, gauges and histograms with labels, rendered in
// the Prometheus text exposition format, version 0.0.4. Pure data: no I/O,
// no clock, no locking (the owner serialises access; see broker/metrics.h).
//
// Contracts:
//  * A family is declared once (name, help, type, label names; histogram
//    bucket bounds) and lives as long as the registry: the reference Add
//    returns stays valid. Names are checked when declared (metric name
//    [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* not
//    starting with "__", no "le" on a histogram, bounds finite, strictly
//    increasing): a bad declaration is a programming error and throws
//    std::invalid_argument at startup, never later.
//  * A series is found by its label values, one per label name, and is
//    created the first time they are seen (label values are made valid UTF-8
//    then). Looking up an existing series does not allocate: updates on the
//    hot path cost a map lookup and an add.
//  * A family without labels has its one series from the start (value 0);
//    a labelled family with no series yet renders its # HELP and # TYPE lines
//    only.
//  * Render: families in declaration order; within a family, series sorted
//    by label values; labels in declaration order ("le" last on buckets).
//    Histogram buckets are cumulative, with le="+Inf" equal to _count, then
//    _sum and _count. Help text escapes \ and newline; label values escape
//    \, " and newline. Values print in the shortest form that reads back
//    exactly; +Inf, -Inf and NaN as spelled here.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace npuprof::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// One series: a value (counter, gauge) or a histogram's per-bucket counts.
class Series {
 public:
  // Counter: adds d (a negative or NaN d is ignored: counters only go up).
  void Inc(double d = 1) {
    if (d > 0) value_ += d;
  }
  // Gauge: sets or adds.
  void Set(double v) { value_ = v; }
  void Add(double d) { value_ += d; }
  // Histogram: counts v in the first bucket whose bound is >= v (NaN is ignored).
  void Observe(double v);

  double value() const { return value_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  friend class MetricFamily;
  std::vector<std::string> label_values_;
  const std::vector<double>* bounds_ = nullptr;  // the family's (histogram)
  double value_ = 0;
  std::vector<uint64_t> bucket_counts_;  // per bound, not cumulative; the last one is above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
               std::vector<double> bounds);
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  // The series for these label values, one per label name in declaration
  // order (missing ones are "", extra ones ignored).
  Series& With(std::initializer_list<std::string_view> label_values);
  // The only series of a family without labels.
  Series& Only() { return With({}); }
  // Drops every series whose label number label_index has this value (a
  // finished run's series); how many were dropped.
  size_t RemoveWhere(size_t label_index, std::string_view value);

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  // Appends this family's exposition text to out.
  void Render(std::string& out) const;

 private:
  std::string name_, help_;
  MetricType type_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  std::map<std::string, Series, std::less<>> series_;  // key: length-prefixed label values
  std::string key_scratch_;  // reused for lookups (keeps its capacity)
};

class MetricsRegistry {
 public:
  MetricFamily& Add(std::string name, std::string help, MetricType type, std::vector<std::string> label_names = {},
                    std::vector<double> bounds = {});
  // The whole exposition (text/plain; version=0.0.4), ending in a newline.
  std::string Render() const;

 private:
  std::deque<MetricFamily> families_;  // stable addresses
};

// Escaping and number spelling of the text format (exposed for tests).
std::string EscapeHelp(std::string_view s);
std::string EscapeLabelValue(std::string_view s);
std::string FormatMetricValue(double v);

}  // namespace npuprof::metrics
