#include "workers/profiling/rank_digest.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/json_shape.h"
#include "common/utf8.h"
#include "workers/profiling/rank_digest_source.h"
#include "workers/profiling/remote_analyse.h"
#include "workers/ssh/output_cap.h"

namespace npuprof::profiling {

using nlohmann::json;

namespace {

constexpr int kMaxDigestDepth = 8;
constexpr size_t kMaxShownText = 8 << 10;    // problems, launch stderr
constexpr size_t kMaxNameBytes = 1 << 10;    // a kernel name or type (256 bytes, made valid UTF-8)
constexpr size_t kMaxLogPart = 64 << 10;     // each of the log's head and tail, as bytes
constexpr uint64_t kMaxCount = uint64_t{1} << 53;

// Field readers: each checks one key of an object and names it in its error.
struct Fields {
  const json& obj;
  std::string where;

  const json* Get(const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  Status Bad(const char* key, const char* want, const json& v) const {
    return Status::Corruption(fmt::format("{}.{} must be {}, not {}", where, key, want, JsonTypeWords(v)));
  }
  Status Missing(const char* key) const { return Status::Corruption(fmt::format("{}.{} is missing", where, key)); }

  Status Bool(const char* key, bool* out, bool required = true) const {
    const json* v = Get(key);
    if (!v) return required ? Missing(key) : Status::Ok();
    if (!v->is_boolean()) return Bad(key, "true or false", *v);
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status Int(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_number_integer()) return Bad(key, "a whole number", *v);
    const bool neg = v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0;
    if (!neg && v->get<uint64_t>() > static_cast<uint64_t>(hi))
      return Status::Corruption(fmt::format("{}.{} is above {}", where, key, hi));
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) return Status::Corruption(fmt::format("{}.{} = {} is outside {}..{}", where, key, x, lo, hi));
    *out = x;
    return Status::Ok();
  }
  Status Count(const char* key, std::optional<uint64_t>* out) const {
    std::optional<int64_t> x;
    if (Status st = Int(key, 0, static_cast<int64_t>(kMaxCount), &x); !st.ok()) return st;
    if (x) *out = static_cast<uint64_t>(*x);
    return Status::Ok();
  }
  Status Str(const char* key, size_t max_bytes, std::string* out, bool required = false) const {
    const json* v = Get(key);
    if (!v) return required ? Missing(key) : Status::Ok();
    if (!v->is_string()) return Bad(key, "a string", *v);
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > max_bytes)
      return Status::Corruption(fmt::format("{}.{} has {} bytes, more than {}", where, key, s.size(), max_bytes));
    *out = ToValidUtf8(s);
    return Status::Ok();
  }
  Status Obj(const char* key, const json** out) const {
    const json* v = Get(key);
    if (!v) return Status::Ok();
    if (!v->is_object()) return Bad(key, "an object", *v);
    *out = v;
    return Status::Ok();
  }
  // A finite number >= 0 (µs, %, epoch µs).
  Status Num(const char* key, double* out, bool required = true) const {
    const json* v = Get(key);
    if (!v) return required ? Missing(key) : Status::Ok();
    if (!v->is_number()) return Bad(key, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < 0 || x > 1e300)
      return Status::Corruption(fmt::format("{}.{} = {} is not a finite number >= 0", where, key, x));
    *out = x;
    return Status::Ok();
  }
};

#define NPUPROF_TRY(expr)            \
  do {                               \
    if (Status _st = (expr); !_st.ok()) return _st; \
  } while (0)

// Bytes carried as latin-1 code points (U+0000..U+00FF), back to bytes.
Result<std::string> Latin1Bytes(const std::string& utf8, const std::string& where) {
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size() &&
               (static_cast<unsigned char>(utf8[i + 1]) & 0xC0) == 0x80) {
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(utf8[i + 1]) & 0x3F)));
      ++i;
    } else {
      return Status::Corruption(fmt::format("{} holds a character above U+00FF (byte {}): not bytes", where, i));
    }
  }
  return out;
}

Result<json> KernelStatJson(const json& e, const std::string& where, bool with_name) {
  if (!e.is_object()) return Status::Corruption(fmt::format("{} must be an object, not {}", where, JsonTypeWords(e)));
  Fields f{e, where};
  json out = json::object();
  std::string name, type, core;
  if (with_name) {
    NPUPROF_TRY(f.Str("name", kMaxNameBytes, &name, true));
    out["name"] = name;
  }
  NPUPROF_TRY(f.Str("type", kMaxNameBytes, &type, true));
  NPUPROF_TRY(f.Str("core", kMaxNameBytes, &core, true));
  std::optional<uint64_t> count;
  NPUPROF_TRY(f.Count("count", &count));
  if (!count) return f.Missing("count");
  out["type"] = type;
  out["core"] = core;
  out["count"] = *count;
  for (const char* k : {"total_us", "mean_us", "max_us"}) {
    double x = 0;
    NPUPROF_TRY(f.Num(k, &x));
    out[k] = x;
  }
  const json* share = f.Get("share_pct");
  if (!share) return f.Missing("share_pct");
  if (share->is_null()) {
    out["share_pct"] = nullptr;
  } else {
    double x = 0;
    NPUPROF_TRY(f.Num("share_pct", &x));
    out["share_pct"] = x;
  }
  return out;
}

Result<OutputDigest> OutputOf(const json& root, const char* key, bool kernel_details) {
  Fields top{root, "digest"};
  const json* o = nullptr;
  NPUPROF_TRY(top.Obj(key, &o));
  if (!o) return top.Missing(key);
  Fields f{*o, std::string("digest.") + key};
  OutputDigest d;
  NPUPROF_TRY(f.Bool("exists", &d.exists));
  if (!d.exists) return d;
  std::optional<uint64_t> size;
  NPUPROF_TRY(f.Count("size", &size));
  if (!size) return f.Missing("size");
  d.size = *size;
  if (f.Get("valid")) {
    bool valid = false;
    NPUPROF_TRY(f.Bool("valid", &valid));
    d.valid = valid;
  }
  NPUPROF_TRY(f.Count("bytes_read", &d.bytes_read));
  NPUPROF_TRY(f.Str("problem", kMaxShownText, &d.problem));
  if (kernel_details) {
    NPUPROF_TRY(f.Count("columns", &d.columns));
    NPUPROF_TRY(f.Count("data_rows_checked", &d.data_rows));
  } else {
    NPUPROF_TRY(f.Count("event_count", &d.event_count));
  }
  return d;
}

}  // namespace

std::string_view RankDigestSource() { return kRankDigestSource; }

std::vector<std::string> RankDigestArgv(const std::string& dir, const std::string& marker,
                                        std::chrono::milliseconds budget, bool final, bool launch) {
  return {"python3",
          "-c",
          std::string(kRankDigestSource),
          "digest",
          dir,
          marker,
          std::to_string(std::max<int64_t>(budget.count(), 0)),
          final ? "1" : "0",
          launch ? DetachedAnalyseScript() : std::string()};
}

Result<json> CheckKernelSummaryJson(const json& j, const std::string& where) {
  if (!j.is_object()) return Status::Corruption(fmt::format("{} must be an object, not {}", where, JsonTypeWords(j)));
  Fields f{j, where};
  json out = json::object();
  for (const char* k : {"data_rows", "counted_rows", "skipped_rows", "other_rows", "distinct_kernels"}) {
    std::optional<uint64_t> x;
    NPUPROF_TRY(f.Count(k, &x));
    if (!x) return f.Missing(k);
    out[k] = *x;
  }
  double total = 0;
  NPUPROF_TRY(f.Num("total_us", &total));
  out["total_us"] = total;
  for (const auto& [key, max, with_name] :
       {std::tuple<const char*, size_t, bool>{"top", 30, true}, {"by_type", 64, false}}) {
    const json* arr = f.Get(key);
    if (!arr) return f.Missing(key);
    if (!arr->is_array()) return f.Bad(key, "an array", *arr);
    if (arr->size() > max)
      return Status::Corruption(fmt::format("{}.{} has {} entries, more than {}", where, key, arr->size(), max));
    json list = json::array();
    for (size_t i = 0; i < arr->size(); ++i) {
      auto e = KernelStatJson((*arr)[i], fmt::format("{}.{}[{}]", where, key, i), with_name);
      if (!e.ok()) return e.status();
      list.push_back(std::move(*e));
    }
    out[key] = std::move(list);
  }
  const bool has_first = f.Get("first_start_us") != nullptr, has_last = f.Get("last_end_us") != nullptr;
  if (has_first != has_last)
    return Status::Corruption(fmt::format("{} has only one of first_start_us and last_end_us", where));
  if (has_first) {
    double first = 0, last = 0;
    NPUPROF_TRY(f.Num("first_start_us", &first));
    NPUPROF_TRY(f.Num("last_end_us", &last));
    out["first_start_us"] = first;
    out["last_end_us"] = last;
  }
  return out;
}

Result<RankDigest> ParseRankDigest(std::string_view out) {
  RankDigest d;
  d.digest_bytes = out.size();
  if (out.size() > kMaxRankDigestBytes)
    return Status::Corruption(
        fmt::format("the rank digest has {} bytes, more than {}", out.size(), kMaxRankDigestBytes));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.remove_suffix(1);
  if (out.empty()) return Status::Corruption("the rank digest program printed nothing");
  if (!IsValidUtf8(out)) return Status::Corruption("the rank digest is not valid UTF-8");
  auto parsed = ParseJson(out, kMaxDigestDepth);
  if (!parsed.ok()) return Status::Corruption("the rank digest: " + parsed.status().message());
  const json& j = *parsed;
  if (!j.is_object()) return Status::Corruption(fmt::format("the rank digest must be an object, not {}", JsonTypeWords(j)));
  Fields f{j, "digest"};
  std::optional<int64_t> v;
  NPUPROF_TRY(f.Int("v", 1, 1, &v));
  if (!v) return f.Missing("v");
  NPUPROF_TRY(f.Int("launch_exit", -1000, 1000, &d.launch_exit));
  NPUPROF_TRY(f.Str("launch_stderr", kMaxShownText, &d.launch_stderr));
  if (d.launch_exit) return d;
  NPUPROF_TRY(f.Str("launch", 64, &d.launch));
  std::optional<int64_t> polls, waited;
  NPUPROF_TRY(f.Int("polls", 0, int64_t{1} << 40, &polls));
  NPUPROF_TRY(f.Int("waited_ms", 0, int64_t{1} << 40, &waited));
  d.polls = polls.value_or(0);
  d.waited_ms = waited.value_or(0);
  NPUPROF_TRY(f.Bool("finished", &d.finished));
  NPUPROF_TRY(f.Bool("alive", &d.alive));
  NPUPROF_TRY(f.Int("exit_code", -1000, 1000, &d.exit_code));
  if (d.finished && !d.exit_code) return f.Missing("exit_code");
  NPUPROF_TRY(f.Int("device_id", 0, 999999, &d.device_id));
  d.has_outputs = f.Get("kernel_details") != nullptr;
  if (!d.has_outputs) return d;

  const json* log = nullptr;
  NPUPROF_TRY(f.Obj("log", &log));
  if (log) {
    Fields lf{*log, "digest.log"};
    std::optional<uint64_t> size;
    NPUPROF_TRY(lf.Count("size", &size));
    d.log_size = size.value_or(0);
    std::string head, tail;
    NPUPROF_TRY(lf.Str("head", 2 * kMaxLogPart, &head, true));
    NPUPROF_TRY(lf.Str("tail", 2 * kMaxLogPart, &tail));
    auto hb = Latin1Bytes(head, "digest.log.head");
    if (!hb.ok()) return hb.status();
    auto tb = Latin1Bytes(tail, "digest.log.tail");
    if (!tb.ok()) return tb.status();
    if (hb->size() > kMaxLogPart || tb->size() > kMaxLogPart)
      return Status::Corruption(fmt::format("digest.log: a part holds more than {} bytes", kMaxLogPart));
    std::string text = *hb;
    if (f.Get("log")->contains("tail")) {
      const uint64_t shown = hb->size() + tb->size();
      text += ssh::OmittedMarker(d.log_size > shown ? d.log_size - shown : 0) + *tb;
    }
    d.log = std::move(text);
  }
  auto kd = OutputOf(j, "kernel_details", true);
  if (!kd.ok()) return kd.status();
  d.kernel_details = std::move(*kd);
  auto tv = OutputOf(j, "trace_view", false);
  if (!tv.ok()) return tv.status();
  d.trace_view = std::move(*tv);
  const json& kdj = j.at("kernel_details");
  Fields kf{kdj, "digest.kernel_details"};
  NPUPROF_TRY(kf.Str("summary_error", kMaxShownText, &d.summary_error));
  if (auto it = kdj.find("summary"); it != kdj.end()) {
    auto s = CheckKernelSummaryJson(*it, "digest.kernel_details.summary");
    if (!s.ok()) return s.status();
    d.kernel_summary = std::move(*s);
  }
  return d;
}

}  // namespace npuprof::profiling
