#include "cli/demo_story.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/json_field.h"
#include "common/utf8.h"
#include "statemachine/sweep_machine.h"

namespace npuprof::cli {

namespace {

using json = nlohmann::json;

std::string S(const json& j, const char* key, const std::string& dflt = "") {
  if (!j.is_object()) return dflt;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

int64_t I(const json& j, const char* key, int64_t dflt = 0) {
  if (!j.is_object()) return dflt;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : dflt;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string Base(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Mb(double mb) { return fmt::format("{:.1f} GiB", mb / 1024.0); }

std::string RunLine(const json& j) {
  // A manifest has no state, only the status.
  std::string line = j.contains("state") ? fmt::format("run {}: {} ({})", S(j, "run_id"), S(j, "state"), S(j, "status", "?"))
                                         : fmt::format("run {}: {}", S(j, "run_id"), S(j, "status", "?"));
  if (std::string err = S(j, "error"); !err.empty()) line += ": " + err;
  return line;
}

std::vector<std::string> Machines(const json& j) {
  std::vector<std::string> out;
  for (const auto& m : Field(j, "machines"))
    out.push_back(fmt::format("{}: {}@{}:{} (runtime base {})", S(m, "name"), S(m, "user"), S(m, "host"),
                              S(m, "port", "22"), S(m, "runtime_base")));
  if (out.empty()) out.push_back("no machines");
  return out;
}

std::vector<std::string> Check(const json& j) {
  const json& c = Field(j, "check");
  std::vector<std::string> out = {RunLine(j)};
  out.push_back("endpoint " + S(c, "endpoint") + ", host key " + S(c, "host_key_fingerprint"));
  out.push_back("uname: " + S(c, "uname"));
  std::string tools;
  const json& found = Field(c, "tools");
  if (found.is_object())
    for (auto it = found.begin(); it != found.end(); ++it)
      tools += fmt::format("{}{} ({})", tools.empty() ? "" : ", ", it.key(),
                           it.value().is_string() ? it.value().get<std::string>() : std::string("missing"));
  out.push_back("tools: " + (tools.empty() ? std::string("none found") : tools));
  return out;
}

std::vector<std::string> Probe(const json& j) {
  const json& p = Field(j, "probe");
  std::vector<std::string> out = {RunLine(j)};
  std::map<int64_t, std::string> busy;
  for (const auto& b : Field(p, "busy_devices")) busy[I(b, "logical_id", -1)] = S(b, "reason");
  out.push_back(fmt::format("{:>3}  {:>3} {:>4}  {:<6} {:>18}  {:<6}  {}", "dev", "npu", "chip", "name", "HBM used / total",
                            "health", "state"));
  int64_t i = 0;
  for (const auto& d : Field(p, "devices")) {
    auto it = busy.find(i);
    out.push_back(fmt::format("{:>3}  {:>3} {:>4}  {:<6} {:>8} / {:<8}  {:<6}  {}", i, I(d, "npu"), I(d, "chip"),
                              S(d, "name"), Mb(static_cast<double>(I(d, "hbm_used_mb"))),
                              Mb(static_cast<double>(I(d, "hbm_total_mb"))), S(d, "health"),
                              it == busy.end() ? "free" : "busy: " + it->second));
    ++i;
  }
  out.push_back(fmt::format("{} device(s): free {}; busy above {} MB or with a process: {}", I(p, "device_count"),
                            Field(p, "free_devices").dump(), I(p, "busy_threshold_mb"), busy.size()));
  return out;
}

std::vector<std::string> Service(const json& j, bool stopped) {
  std::vector<std::string> out = {RunLine(j)};
  const json& svc = Field(j, "service");
  if (svc.is_object()) {
    out.push_back(fmt::format("service {}: devices {}, pid {}, 127.0.0.1:{}, served model '{}'", S(svc, "status"),
                              Field(svc, "devices").dump(), S(svc, "pid"), S(svc, "port"), S(svc, "served_model_name")));
    if (const json& r = Field(svc, "ready"); r.is_object() && !stopped) {
      const std::string by = S(r, "seen_by");
      const std::string how = by == "log"     ? "; HTTP asked as soon as its log said start-up complete"
                              : by == "probe" ? "; found by the HTTP probe"
                                              : "";
      out.push_back(fmt::format("ready after {} ms ({} rounds{})", I(r, "ready_after_ms"), I(r, "rounds"), how));
    }
  }
  if (const json& l = Field(j, "devices_lease"); l.is_object())
    out.push_back(fmt::format("NPU lease: {} {} on {}", S(l, "phase"), Field(l, "devices").dump(), S(l, "machine")));
  return out;
}

std::vector<std::string> Torch(const json& j) {
  std::vector<std::string> out = {RunLine(j)};
  const json& w = Field(j, "workload_status");
  if (w.is_object())
    out.push_back(fmt::format("workload gate: {} — {}/{} benchmark requests ok (needs {:.0f}%), follow-up {}",
                              S(w, "status"), I(w, "bench_ok"), I(w, "bench_total"),
                              100.0 * (Field(w, "bench_threshold").is_number() ? Field(w, "bench_threshold").get<double>() : 0),
                              S(w, "followup_ok") == "true" ? "ok" : "failed"));
  out.push_back(fmt::format("analysis gate: {} ({} of {} expected ranks found)", S(j, "analysis_status"),
                            I(j, "rank_count"), I(j, "expected_ranks")));
  for (const auto& r : Field(j, "remote_profile_dirs")) {
    const json& o = Field(r, "outputs");
    const json& tv = Field(o, "trace_view_json");
    const json& kd = Field(o, "kernel_details_csv");
    out.push_back(fmt::format("  {}: analyse exit {}, {}; trace_view.json {} events ({:.1f} MB), kernel_details.csv "
                              "{}",
                              Base(S(r, "path")), S(Field(r, "analyse"), "exit_code", "?"), S(r, "analysis_status"),
                              I(tv, "event_count"), static_cast<double>(I(tv, "size")) / 1e6,
                              S(kd, "exists") == "true" ? fmt::format("{} rows", I(kd, "data_rows_checked"))
                                                        : std::string("absent")));
  }
  for (const auto& e : Field(j, "step_errors")) out.push_back("  step error: " + (e.is_string() ? e.get<std::string>() : e.dump()));
  return out;
}

std::vector<std::string> Memory(const json& j) {
  std::vector<std::string> out = {RunLine(j)};
  out.push_back(fmt::format("mode {}, tp {}, msprof {}, devices {}", S(j, "mode"), S(j, "tp"), S(j, "msprof_status"),
                            Field(j, "devices").dump()));
  out.push_back(fmt::format("{:>6}  {:>12}  {:>12}  {:>15}", "device", "baseline", "after ready", "after inference"));
  for (const auto& d : Field(j, "devices")) {
    const std::string key = d.is_string() ? d.get<std::string>() : d.dump();
    auto used = [&](const char* phase) {
      const json& v = Field(Field(Field(j, phase), key.c_str()), "used_mb");
      return v.is_number() ? Mb(v.get<double>()) : std::string("-");
    };
    out.push_back(fmt::format("{:>6}  {:>12}  {:>12}  {:>15}", key, used("baseline_hbm"), used("after_ready_hbm"),
                              used("after_infer_hbm")));
  }
  return out;
}

// A memory-profile over several nodes: the head's fields at the top level,
// every other node in `nodes`; each node's service and HBM after the
// inference, then the clock offsets measured at the start.
std::vector<std::string> DeploymentRun(const json& j) {
  std::vector<std::string> out = {RunLine(j)};
  const json& others = Field(j, "nodes");
  out.push_back(fmt::format("tp {}, dp {} over {} nodes, msprof {}", S(j, "tp"), S(j, "dp"),
                            1 + (others.is_array() ? others.size() : 0), S(j, "msprof_status")));
  auto node_line = [](const json& n, const std::string& machine, int64_t index) {
    const json& svc = Field(n, "service");
    std::string hbm;
    const json& after = Field(n, "after_infer_hbm");
    if (after.is_object())
      for (const auto& [dev, v] : after.items())
        hbm += fmt::format("{}{} {}", hbm.empty() ? "" : ", ", dev,
                           Field(v, "used_mb").is_number() ? Mb(Field(v, "used_mb").get<double>()) : std::string("-"));
    return fmt::format("  node {} {}{}: devices {}, pid {}; HBM after inference: {}", index, machine,
                       index == 0 ? " (head)" : "", Field(svc, "devices").dump(), S(svc, "pid", "-"),
                       hbm.empty() ? std::string("-") : hbm);
  };
  out.push_back(node_line(j, S(j, "machine"), 0));
  if (others.is_array())
    for (const auto& n : others) out.push_back(node_line(n, S(n, "machine"), I(n, "node")));
  const json& start = Field(Field(j, "clock_offsets"), "start");
  std::string clocks;
  for (const auto& o : Field(start, "offsets")) {
    const json& off = Field(o, "offset_ms");
    const json& unc = Field(o, "uncertainty_ms");
    clocks += fmt::format("{}{} {}", clocks.empty() ? "" : ", ", S(o, "machine"),
                          off.is_number() && unc.is_number()
                              ? fmt::format("{:+.3f} ms (±{:.3f})", off.get<double>(), unc.get<double>())
                              : std::string("not measured"));
  }
  if (!clocks.empty()) out.push_back("clock offsets from npuprof's host at the start: " + clocks);
  return out;
}

// A memory report over several machines: one line per (machine, device)
// with the main components, then the totals per node and in all (MB).
std::vector<std::string> DeploymentMemory(const json& r) {
  static constexpr const char* kKeys[] = {"weights", "kv_cache", "activation_peak", "residual"};
  const auto mb = [](const json& v) { return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : std::string("-"); };
  std::vector<std::string> out = {fmt::format("{:<12} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}", "machine", "device",
                                              "used MB", "weights", "KV cache", "activation", "residual")};
  for (const auto& d : Field(r, "devices")) {
    std::string line = fmt::format("{:<12} {:>6} {:>10}", S(d, "machine", "-"), S(d, "device_id"), mb(Field(d, "hbm_used_mb")));
    for (const char* k : kKeys) {
      json v;
      for (const auto& c : Field(d, "components"))
        if (S(c, "key") == k) v = Field(c, "value_mb");
      line += fmt::format(" {:>10}", mb(v));
    }
    out.push_back(line);
  }
  const auto totals = [&](const std::string& name, const json& t) {
    std::string line = fmt::format("{:<12} {:>6} {:>10}", name, S(t, "devices"), mb(Field(t, "hbm_used_mb")));
    for (const char* k : kKeys) line += fmt::format(" {:>10}", mb(Field(Field(t, "components_mb"), k)));
    out.push_back(line);
  };
  out.push_back("totals");
  for (const auto& n : Field(r, "nodes")) totals(S(n, "machine"), Field(n, "totals"));
  totals("deployment", Field(r, "totals"));
  return out;
}

std::vector<std::string> ReportText(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& l : Lines(text)) {
    const auto first = l.find_first_not_of(' ');
    if (first != std::string::npos && first >= 8 && (l.compare(first, 2, "<-") == 0 || l.compare(first, 1, "~") == 0))
      continue;  // evidence lines: in the full report and the HTML page
    out.push_back(l);
  }
  return out;
}

// The compare's title, its [Runs] and [Configuration differences] and its
// totals; the per-position tables (one per device) are in the full output.
std::vector<std::string> CompareText(const std::string& text) {
  std::vector<std::string> out;
  bool keep = true;
  for (const auto& l : Lines(text)) {
    if (l.rfind("[", 0) == 0)
      keep = l.rfind("[Notes]", 0) != 0 && l.rfind("[说明]", 0) != 0 && l.rfind("[Position", 0) != 0 &&
             l.rfind("[位置", 0) != 0;
    if (keep) out.push_back(l);
  }
  return out;
}

std::vector<std::string> Files(const json& j) {
  std::vector<std::string> out;
  if (j.contains("dir")) {
    const size_t n = Field(j, "files").size();
    out.push_back(fmt::format("wrote {} file{} to {}", n, n == 1 ? "" : "s", S(j, "dir")));
  } else if (j.contains("file")) {
    std::string line = "wrote " + S(j, "file");
    if (j.contains("trace_events"))
      line += fmt::format(" ({} trace events, {} HBM series)", I(j, "trace_events"), I(j, "hbm_series"));
    out.push_back(line);
    if (j.contains("open_with")) out.push_back("open it with " + S(j, "open_with"));
  } else {
    out.push_back(j.dump());
  }
  return out;
}

std::vector<std::string> Sweep(const json& j) {
  std::vector<std::string> out = {fmt::format("sweep {}: {} ({} of {} points ok)", S(j, "run_id"),
                                              S(j, "sweep_status", S(j, "status")), S(j, "points_ok"),
                                              S(j, "points"))};
  if (j.contains("children") && j["children"].is_array())
    for (const auto& c : j["children"]) {
      const std::string point = sm::SweepPointText(c.contains("point") ? c["point"] : json(nullptr));
      out.push_back(fmt::format("  {:<40} {:<32} {}", S(c, "run_id"), point, S(c, "status")));
    }
  return out;
}

std::vector<std::string> Verify(const json& j) {
  std::vector<std::string> out;
  int64_t events = 0, bad = 0;
  for (const auto& r : Field(j, "runs")) {
    events += I(r, "events");
    if (S(r, "ok") != "true") {
      ++bad;
      out.push_back(fmt::format("  {}: {}", S(r, "run_id"), S(r, "error")));
    }
  }
  const json& la = Field(j, "lease_audit");
  out.insert(out.begin(), fmt::format("{}: {} streams, {} events replayed; {} with a problem; lease audit {} ({} lease events)",
                                      S(j, "ok") == "true" ? "verified" : "NOT verified", Field(j, "runs").size(), events,
                                      bad, S(la, "ok") == "true" ? "ok" : "FAILED: " + S(la, "error"),
                                      I(la, "lease_events")));
  return out;
}

}  // namespace

std::vector<std::string> StoryLines(StoryView view, const std::string& out, size_t max_lines) {
  std::vector<std::string> lines;
  const std::string text = ToValidUtf8(out);
  if (view == StoryView::kText) {
    lines = Lines(text);
  } else if (view == StoryView::kReportText) {
    lines = ReportText(text);
  } else if (view == StoryView::kCompareText) {
    lines = CompareText(text);
  } else {
    Result<json> parsed = ParseJson(text, kMaxOwnJsonDepth);
    const json j = parsed.ok() ? std::move(parsed).value() : json(nullptr);
    if (!j.is_object()) {
      lines = Lines(text);
    } else {
      switch (view) {
        case StoryView::kMachines: lines = Machines(j); break;
        case StoryView::kCheck: lines = Check(j); break;
        case StoryView::kProbe: lines = Probe(j); break;
        case StoryView::kService: lines = Service(j, false); break;
        case StoryView::kSubmitted:
          lines = {fmt::format("run {} submitted{}", S(j, "run_id"),
                               j.contains("state") ? " (" + S(j, "state") + ")" : std::string())};
          break;
        case StoryView::kStopped: lines = Service(j, true); break;
        case StoryView::kTorch: lines = Torch(j); break;
        case StoryView::kMemory: lines = Memory(j); break;
        case StoryView::kFiles: lines = Files(j); break;
        case StoryView::kVerify: lines = Verify(j); break;
        case StoryView::kSweep: lines = Sweep(j); break;
        case StoryView::kDeploymentMemory: lines = DeploymentMemory(j); break;
        case StoryView::kDeploymentRun: lines = DeploymentRun(j); break;
        default: lines = Lines(text); break;
      }
    }
  }
  if (lines.size() > max_lines) {
    const size_t left = lines.size() - (max_lines - 1);
    lines.resize(max_lines - 1);
    lines.push_back(fmt::format("… ({} more lines in the step's file)", left));
  }
  return lines;
}

}  // namespace npuprof::cli
