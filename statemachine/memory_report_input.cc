// DecodeMemoryReportInput: see memory_report_input.h.
#include "statemachine/memory_report_input.h"

#include <algorithm>

#include <fmt/format.h>

#include "statemachine/evidence_doc.h"

namespace npuprof::sm {

namespace {

using Doc = EvidenceDoc;
#define NP_TRY(expr) NP_EVIDENCE_TRY(expr)

Status Missing(const Doc& d, const char* key) {
  return Status::Corruption(fmt::format("{} is missing", d.PathOf(key)));
}

bool IsDeviceKey(const std::string& key) {
  return !key.empty() && key.size() <= 6 && key.find_first_not_of("0123456789") == std::string::npos;
}

Status DecodeProcesses(const Doc& dev, HbmReading& out) {
  NP_TRY(dev.Array("processes"));
  if (!dev.Has("processes")) return Status::Ok();
  out.process_table = true;
  size_t i = 0;
  for (const auto& p : dev.At("processes")) {
    const Doc pd(p, dev.PathOf(fmt::format("processes[{}]", i++)));
    if (!p.is_object()) return Status::Corruption(fmt::format("{} must be an object", pd.path()));
    std::optional<int64_t> pid, mem;
    NpuProcessInput proc;
    NP_TRY(pd.Int("pid", pid));
    NP_TRY(pd.Int("memory_mb", mem));
    NP_TRY(pd.Str("name", proc.name));
    if (!pid) continue;  // names no process
    proc.pid = *pid;
    proc.memory_mb = mem.value_or(0);
    out.processes.push_back(std::move(proc));
  }
  return Status::Ok();
}

Status DecodeSnapshot(const Doc& d, SnapshotInput& out) {
  NP_TRY(d.Str("source", out.source));
  NP_TRY(d.Str("origin", out.origin));
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  NP_TRY(d.Object("hbm"));
  const Doc hbm = d.Sub("hbm");
  if (!hbm.present()) return Status::Ok();
  for (auto it = hbm.raw().begin(); it != hbm.raw().end(); ++it) {
    if (!IsDeviceKey(it.key()))
      return Status::Corruption(fmt::format("{}: key '{}' must be a device id", hbm.path(), it.key()));
    const Doc dev(it.value(), hbm.PathOf(it.key()));
    NP_TRY(dev.IsObject());
    HbmReading r;
    NP_TRY(dev.Num("used_mb", r.used_mb));
    NP_TRY(dev.Num("total_mb", r.total_mb));
    NP_TRY(DecodeProcesses(dev, r));
    out.hbm[std::stoll(it.key())] = std::move(r);
  }
  return Status::Ok();
}

Status DecodeCites(const Doc& d, std::map<std::string, LogCite>& out) {
  NP_TRY(d.Object("evidence"));
  const Doc ev = d.Sub("evidence");
  if (!ev.present()) return Status::Ok();
  for (auto it = ev.raw().begin(); it != ev.raw().end(); ++it) {
    if (it.value().is_null()) continue;  // a field the log did not print
    const Doc line(it.value(), ev.PathOf(it.key()));
    NP_TRY(line.IsObject());
    LogCite c;
    NP_TRY(line.Int("line", c.line));
    NP_TRY(line.Str("text", c.text));
    out[it.key()] = std::move(c);
  }
  return Status::Ok();
}

Status DecodeFigures(const Doc& d, LogFigures& out) {
  NP_TRY(d.Num("weights_gib", out.weights_gib));
  NP_TRY(d.Num("kv_cache_available_gib", out.kv_cache_available_gib));
  NP_TRY(d.Num("graph_capture_gib", out.graph_capture_gib));
  return DecodeCites(d, out.evidence);
}

Status DecodeVllmLog(const Doc& d, VllmLogInput& out) {
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  NP_TRY(d.Object("summary"));
  const Doc s = d.Sub("summary");
  if (!s.present()) return Status::Ok();
  NP_TRY(DecodeFigures(s, out.run));
  NP_TRY(s.Num("kv_cache_tokens", out.kv_cache_tokens));
  NP_TRY(s.Num("gpu_memory_utilization", out.gpu_memory_utilization));
  NP_TRY(s.Int("graph_capture_count", out.graph_capture_count));
  NP_TRY(s.Int("gpu_blocks", out.gpu_blocks));
  NP_TRY(s.Object("ranks"));
  const Doc ranks = s.Sub("ranks");
  if (!ranks.present()) return Status::Ok();
  for (auto it = ranks.raw().begin(); it != ranks.raw().end(); ++it) {
    const Doc r(it.value(), ranks.PathOf(it.key()));
    NP_TRY(r.IsObject());
    LogFigures f;
    NP_TRY(DecodeFigures(r, f));
    out.ranks.emplace_back(it.key(), std::move(f));
  }
  return Status::Ok();
}

Status DecodeModuleMem(const Doc& d, std::vector<ModuleMemRow>& out) {
  NP_TRY(d.Array("module_mem"));
  if (!d.Has("module_mem")) return Status::Ok();
  size_t i = 0;
  for (const auto& r : d.At("module_mem")) {
    const Doc rd(r, d.PathOf(fmt::format("module_mem[{}]", i++)));
    if (!r.is_object()) return Status::Corruption(fmt::format("{} must be an object", rd.path()));
    ModuleMemRow m;
    std::optional<double> max;
    std::optional<int64_t> row;
    NP_TRY(rd.Int("device_id", m.device_id));
    NP_TRY(rd.Str("component", m.component));
    NP_TRY(rd.Str("file", m.file));
    NP_TRY(rd.Str("blob", m.blob));
    NP_TRY(rd.Str("prof_dir", m.prof_dir));
    NP_TRY(rd.Str("raw", m.raw));
    NP_TRY(rd.Str("timestamp", m.timestamp));
    NP_TRY(rd.Num("max_mb", max));
    NP_TRY(rd.Int("row", row));
    if (m.component.empty()) continue;  // a row that names no component attributes nothing
    if (!max) return Missing(rd, "max_mb");
    m.max_mb = *max;
    m.row = row.value_or(0);
    out.push_back(std::move(m));
  }
  return Status::Ok();
}

Status DecodeNpuMem(const Doc& d, std::vector<NpuMemRow>& out) {
  NP_TRY(d.Array("npu_mem"));
  if (!d.Has("npu_mem")) return Status::Ok();
  size_t i = 0;
  for (const auto& r : d.At("npu_mem")) {
    const Doc rd(r, d.PathOf(fmt::format("npu_mem[{}]", i++)));
    if (!r.is_object()) return Status::Corruption(fmt::format("{} must be an object", rd.path()));
    NpuMemRow m;
    std::optional<int64_t> row;
    NP_TRY(rd.Int("device_id", m.device_id));
    NP_TRY(rd.Str("event", m.event));
    NP_TRY(rd.Str("file", m.file));
    NP_TRY(rd.Str("blob", m.blob));
    NP_TRY(rd.Num("max_hbm_mb", m.max_hbm_mb));
    NP_TRY(rd.Int("row", row));
    if (m.event == "APP" && !m.max_hbm_mb) return Missing(rd, "max_hbm_mb");
    m.row = row.value_or(0);
    out.push_back(std::move(m));
  }
  return Status::Ok();
}

Status DecodeWindow(const Doc& d, json& out) {
  NP_TRY(d.Object("window"));
  if (!d.Has("window")) return Status::Ok();
  const Doc w = d.Sub("window");
  std::optional<double> start, end;
  NP_TRY(w.Num("start_us", start));
  NP_TRY(w.Num("end_us", end));
  out = w.raw();  // cited verbatim: the numbers as the collect step wrote them
  return Status::Ok();
}

Status DecodePeaks(const Doc& d, std::vector<SeriesPeakInput>& out) {
  NP_TRY(d.Array("activation_peaks"));
  if (!d.Has("activation_peaks")) return Status::Ok();
  size_t i = 0;
  for (const auto& r : d.At("activation_peaks")) {
    const Doc rd(r, d.PathOf(fmt::format("activation_peaks[{}]", i++)));
    if (!r.is_object()) return Status::Corruption(fmt::format("{} must be an object", rd.path()));
    SeriesPeakInput p;
    std::optional<int64_t> dev;
    NP_TRY(rd.Int("device_id", dev));
    NP_TRY(rd.Bool("ok", p.ok));
    NP_TRY(rd.Str("file", p.file));
    NP_TRY(rd.Str("blob", p.blob));
    NP_TRY(rd.Str("event", p.event));
    NP_TRY(rd.Str("reason", p.reason));
    NP_TRY(rd.Str("message", p.message));
    NP_TRY(rd.Str("clock", p.clock));
    NP_TRY(rd.Num("value_mb", p.value_mb));
    NP_TRY(rd.Num("peak_mb", p.peak_mb));
    NP_TRY(rd.Num("base_mb", p.base_mb));
    NP_TRY(rd.Object("peak"));
    NP_TRY(rd.Sub("peak").Int("row", p.peak_row));
    NP_TRY(rd.Ints("base_rows", p.base_rows));
    NP_TRY(rd.Ints("window_rows", p.window_rows));
    NP_TRY(DecodeWindow(rd, p.window));
    if (p.ok && !p.value_mb) return Missing(rd, "value_mb");
    if (!dev) continue;  // a peak of no device attributes nothing
    p.device_id = *dev;
    out.push_back(std::move(p));
  }
  return Status::Ok();
}

Status DecodeMsprof(const Doc& d, MsprofInput& out) {
  NP_TRY(d.Str("status", out.status));
  NP_TRY(DecodeModuleMem(d, out.module_mem));
  NP_TRY(DecodeNpuMem(d, out.npu_mem));
  return DecodePeaks(d, out.activation_peaks);
}

Status DecodeWeights(const Doc& d, WeightsInput& out) {
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  NP_TRY(d.Num("per_device_bytes", out.per_device_bytes));
  NP_TRY(d.Num("total_bytes", out.total_bytes));
  NP_TRY(d.Int("tp", out.tp));
  NP_TRY(d.Int("dp", out.dp));
  NP_TRY(d.Int("ep", out.ep));
  NP_TRY(d.Array("categories"));
  if (!d.Has("categories")) return Status::Ok();
  size_t i = 0;
  for (const auto& c : d.At("categories")) {
    const Doc cd(c, d.PathOf(fmt::format("categories[{}]", i++)));
    if (!c.is_object()) return Status::Corruption(fmt::format("{} must be an object", cd.path()));
    WeightCategoryInput w;
    std::optional<int64_t> count;
    std::optional<double> total, per_device, share;
    NP_TRY(cd.Str("category", w.category));
    NP_TRY(cd.Str("display_name", w.display_name));
    NP_TRY(cd.Int("tensor_count", count));
    NP_TRY(cd.Num("total_bytes", total));
    NP_TRY(cd.Num("per_device_bytes", per_device));
    NP_TRY(cd.Num("share_of_per_device", share));
    NP_TRY(cd.Strs("dtypes", w.dtypes));
    NP_TRY(cd.Strs("shard_strategies", w.shard_strategies));
    if (!total) return Missing(cd, "total_bytes");
    if (!per_device) return Missing(cd, "per_device_bytes");
    w.tensor_count = count.value_or(0);
    w.total_bytes = *total;
    w.per_device_bytes = *per_device;
    w.share_of_per_device = share.value_or(0);
    out.categories.push_back(std::move(w));
  }
  return Status::Ok();
}

// Decodes the document at `key` into `out` with `fn`; a failure marks it and
// lists the error.
template <typename T, typename Fn>
void DecodeDoc(const Doc& in, const char* key, const std::string& prefix, T& out, Fn fn,
               std::vector<ReportEvidenceError>& errors) {
  const Doc d = in.Sub(key);
  if (!d.present()) return;
  out.present = true;
  Status st = d.IsObject();
  if (st.ok()) st = fn(d, out);
  if (st.ok()) return;
  out.error = prefix + st.message();
  errors.push_back({prefix + key, out.error});
}

}  // namespace

json ReportEvidenceError::ToJson() const {
  // The messages are "PATH must be ...", "PATH is missing" or "PATH: key ...";
  // a path may hold spaces (a vLLM log prefix is a key).
  size_t end = message.size();
  for (const char* marker : {" must be ", " is missing", ": key "}) end = std::min(end, message.find(marker));
  return {{"document", document}, {"path", message.substr(0, end)}, {"message", message}};
}

std::optional<double> SnapshotInput::Used(int64_t dev) const {
  auto it = hbm.find(dev);
  return usable() && it != hbm.end() ? it->second.used_mb : std::nullopt;
}

std::optional<double> SnapshotInput::Total(int64_t dev) const {
  auto it = hbm.find(dev);
  return usable() && it != hbm.end() ? it->second.total_mb : std::nullopt;
}

std::optional<double> LogFigures::Get(const std::string& field) const {
  if (field == "weights_gib") return weights_gib;
  if (field == "kv_cache_available_gib") return kv_cache_available_gib;
  if (field == "graph_capture_gib") return graph_capture_gib;
  return std::nullopt;
}

SnapshotInput DecodeSnapshotDoc(const json& parent, const char* key, const std::string& prefix,
                                std::vector<ReportEvidenceError>& errors) {
  SnapshotInput out;
  DecodeDoc(Doc(parent.is_object() ? parent : Doc::Null(), ""), key, prefix, out, DecodeSnapshot, errors);
  return out;
}

MemoryReportInput DecodeMemoryReportInput(const json& evidence, const std::string& prefix) {
  MemoryReportInput out;
  const Doc in(evidence.is_object() ? evidence : Doc::Null(), "");
  // The node's own settings: one field at a time, a wrong one reads as absent.
  auto setting = [&](Status st) {
    if (!st.ok()) out.errors.push_back({prefix + "settings", prefix + st.message()});
  };
  std::optional<int64_t> tp, dp, rank_offset;
  setting(in.Str("mode", out.mode));
  setting(in.Int("tp", tp));
  setting(in.Int("dp", dp));
  setting(in.Int("rank_offset", rank_offset));
  setting(in.Str("machine", out.machine));
  setting(in.Ints("devices", out.devices));
  out.tp = tp.value_or(1);
  out.dp = dp.value_or(1);
  out.rank_offset = rank_offset.value_or(0);

  DecodeDoc(in, "baseline", prefix, out.baseline, DecodeSnapshot, out.errors);
  DecodeDoc(in, "after_ready", prefix, out.after_ready, DecodeSnapshot, out.errors);
  DecodeDoc(in, "after_infer", prefix, out.after_infer, DecodeSnapshot, out.errors);
  DecodeDoc(in, "vllm_log", prefix, out.vllm_log, DecodeVllmLog, out.errors);
  DecodeDoc(in, "msprof", prefix, out.msprof, DecodeMsprof, out.errors);
  DecodeDoc(in, "weights", prefix, out.weights, DecodeWeights, out.errors);
  DecodeDoc(in, "theory", prefix, out.theory, DecodeWeights, out.errors);
  return out;
}

}  // namespace npuprof::sm
