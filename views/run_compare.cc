// BuildRunCompare: see run_compare.h for the contract and the rules.
#include "views/run_compare.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "statemachine/memory_report.h"
#include "views/charts.h"
#include "views/compare_deltas.h"
#include "views/kernel_compare.h"
#include "views/torch_rank_positions.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

std::string RunId(const json& m) { return StrField(m, "run_id", "?"); }

// {"key", "values_mb"|"values", deltas} from one value per run.
json MetricRow(const std::string& key, json values, bool mb) {
  json row = {{"key", key}};
  AddDeltas(row, values, mb ? "delta_mb" : "delta", "delta_pct");
  row[mb ? "values_mb" : "values"] = std::move(values);
  return row;
}

// ---- refusals -----------------------------------------------------------

Status CheckRuns(const std::vector<json>& ms, std::string* kind) {
  if (ms.size() < 2)
    return Status::Invalid(fmt::format("compare needs at least 2 runs, got {}: give RUN_A RUN_B [RUN_C ...] "
                                       "(`npuprof runs` lists them)",
                                       ms.size()));
  for (const auto& m : ms)
    if (!m.is_object())
      return Status::Invalid("compare: every input must be a run's manifest (a JSON object)");
  *kind = StrField(ms[0], "kind");
  std::vector<std::string> kinds;
  bool differ = false;
  for (const auto& m : ms) {
    kinds.push_back(fmt::format("{} is {}", RunId(m), StrField(m, "kind", "of unknown kind")));
    differ |= StrField(m, "kind") != *kind;
  }
  if (differ)
    return Status::Invalid(fmt::format("compare: the runs are of different kinds ({}); compare runs of one kind",
                                       fmt::join(kinds, ", ")));
  if (*kind != "memory-profile" && *kind != "torch-profile")
    return Status::Invalid(fmt::format("compare: runs {} are {} runs; compare supports memory-profile and "
                                       "torch-profile runs",
                                       RunId(ms[0]), kind->empty() ? "unknown-kind" : *kind));
  std::vector<std::string> unfinished, no_report;
  for (const auto& m : ms) {
    const std::string status = StrField(m, "status");
    if (status.empty() || status == "running")
      unfinished.push_back(fmt::format("{} ({})", RunId(m), StrField(m, "state", status.empty() ? "no status" : status)));
    else if (*kind == "memory-profile" && !Field(Field(m, "report"), "devices").is_array())
      no_report.push_back(fmt::format("{} (status {})", RunId(m), status));
  }
  if (!unfinished.empty())
    return Status::Invalid(fmt::format("compare: run(s) not finished: {}; wait for them (`npuprof watch RUN`) "
                                       "and compare again",
                                       fmt::join(unfinished, ", ")));
  if (!no_report.empty())
    return Status::Invalid(fmt::format("compare: run(s) without a memory report: {}; only runs that reached "
                                       "their report can be compared (`npuprof show RUN` says why it failed)",
                                       fmt::join(no_report, ", ")));
  return Status::Ok();
}

// ---- shared parts ---------------------------------------------------------

// A torch-profile run's machines in node order: [machine] for one node.
json NodeMachines(const json& m) {
  json out = json::array();
  for (const auto& n : ArrField(m, "nodes")) out.push_back(Field(n, "machine"));
  if (out.empty()) out.push_back(Field(m, "machine"));
  return out;
}

json RunsHeader(const std::vector<json>& ms) {
  json runs = json::array();
  for (const auto& m : ms) {
    json r = json::object();
    for (const char* k : {"run_id", "status", "tag", "machine", "model", "tp", "dp", "started_at", "completed_at",
                          "failed_at"})
      if (!Field(m, k).is_null()) r[k] = Field(m, k);
    if (ArrField(m, "nodes").size() > 1) r["nodes"] = NodeMachines(m);
    runs.push_back(std::move(r));
  }
  return runs;
}

template <size_t N>
void ConfigDiff(const std::vector<json>& ms, const char* const (&fields)[N], json& out) {
  json diff = json::array(), same = json::array();
  for (const char* f : fields) {
    json values = json::array();
    bool differ = false, any = false;
    for (const auto& m : ms) {
      json v = Field(m, f);
      // A served name made from the run's own id (npuprof's default,
      // npuprof-mem-<run id>) is the same choice in every run.
      if (std::string_view(f) == "served_model_name" && v.is_string() && !RunId(m).empty()) {
        std::string name = v.get<std::string>();
        if (const size_t at = name.find(RunId(m)); at != std::string::npos) name.replace(at, RunId(m).size(), "<run id>");
        v = name;
      }
      values.push_back(std::move(v));
      differ |= values.back() != values[0];
      any |= !values.back().is_null();
    }
    if (differ) diff.push_back({{"field", f}, {"values", std::move(values)}});
    else if (any) same.push_back(f);
  }
  out["config_diff"] = std::move(diff);
  out["same_fields"] = std::move(same);
}

// ---- memory-profile -------------------------------------------------------

// The devices of a report in rank order.
std::vector<json> DevicesInRankOrder(const json& report) {
  std::vector<json> devs;
  for (const auto& d : ArrField(report, "devices")) devs.push_back(d);
  const bool ranked = std::all_of(devs.begin(), devs.end(), [](const json& d) { return NumField(d, "rank"); });
  if (ranked)
    std::stable_sort(devs.begin(), devs.end(),
                     [](const json& a, const json& b) { return *NumField(a, "rank") < *NumField(b, "rank"); });
  return devs;
}

const json* FindComponent(const json& dev, const std::string& key) {
  for (const auto& c : ArrField(dev, "components"))
    if (StrField(c, "key") == key) return &c;
  return nullptr;
}

// Component keys in report order: the known ones, then any other a report has.
std::vector<std::string> ComponentKeys(const std::vector<std::vector<json>>& devs) {
  std::vector<std::string> keys(std::begin(sm::kMemComponentKeys), std::end(sm::kMemComponentKeys));
  for (const auto& run : devs)
    for (const auto& d : run)
      for (const auto& c : ArrField(d, "components")) {
        const std::string k = StrField(c, "key");
        if (!k.empty() && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      }
  return keys;
}

// The kv_cache_tokens evidence entry of a device's kv_cache component.
const json* TokensEvidence(const json& dev) {
  const json* kv = FindComponent(dev, "kv_cache");
  if (!kv) return nullptr;
  for (const auto& e : ArrField(*kv, "evidence"))
    if (StrField(e, "field") == "kv_cache_tokens" && Field(e, "value").is_number()) return &e;
  return nullptr;
}

json ComponentRow(const std::string& key, const std::vector<json>& ms, const std::vector<const json*>& at) {
  json values = json::array(), sources = json::array(), statuses = json::array(), evidence = json::array(),
       notes = json::array();
  std::string label_zh, label_en;
  for (size_t i = 0; i < at.size(); ++i) {
    const json* c = at[i] ? FindComponent(*at[i], key) : nullptr;
    if (c && label_en.empty()) {
      label_zh = StrField(*c, "label_zh", key);
      label_en = StrField(*c, "label_en", key);
    }
    const json& v = c ? Field(*c, "value_mb") : Field(json(), "");
    values.push_back(v.is_number() ? v : json(nullptr));
    sources.push_back(c ? Field(*c, "source") : json(nullptr));
    statuses.push_back(c ? Field(*c, "status") : json(nullptr));
    evidence.push_back(c ? Field(*c, "evidence") : json(nullptr));
    if (!at[i]) continue;  // the whole position is absent: said once on the device
    if (!c)
      notes.push_back(fmt::format("{}: no {} component in its report", RunId(ms[i]), key));
    else if (!v.is_number())
      notes.push_back(fmt::format("{}: {} {}{}", RunId(ms[i]), key, StrField(*c, "status", "has no value"),
                                  Field(*c, "note").is_string() ? " (" + StrField(*c, "note") + ")" : ""));
  }
  json row = MetricRow(key, std::move(values), true);
  row["label_zh"] = label_zh.empty() ? key : label_zh;
  row["label_en"] = label_en.empty() ? key : label_en;
  row["sources"] = std::move(sources);
  row["statuses"] = std::move(statuses);
  row["evidence"] = std::move(evidence);
  row["notes"] = std::move(notes);
  return row;
}

json DeviceNumberRow(const char* key, const std::vector<const json*>& at) {
  json values = json::array(), phases = json::array();
  for (const json* d : at) {
    auto v = d ? NumField(*d, key) : std::nullopt;
    values.push_back(v ? json(*v) : json(nullptr));
    phases.push_back(d && Field(*d, "hbm_used_phase").is_string() ? Field(*d, "hbm_used_phase") : json(nullptr));
  }
  json row = MetricRow(key, std::move(values), true);
  if (std::string(key) == "hbm_used_mb") row["phases"] = std::move(phases);
  return row;
}

json TokensRow(const std::vector<const json*>& at) {
  json values = json::array(), evidence = json::array();
  for (const json* d : at) {
    const json* e = d ? TokensEvidence(*d) : nullptr;
    values.push_back(e ? Field(*e, "value") : json(nullptr));
    evidence.push_back(e ? *e : json(nullptr));
  }
  json row = MetricRow("kv_cache_tokens", std::move(values), false);
  row["evidence"] = std::move(evidence);
  return row;
}

void MemoryCompare(const std::vector<json>& ms, json& out) {
  std::vector<std::vector<json>> devs;
  size_t positions = 0;
  for (const auto& m : ms) {
    devs.push_back(DevicesInRankOrder(Field(m, "report")));
    positions = std::max(positions, devs.back().size());
  }
  const std::vector<std::string> keys = ComponentKeys(devs);
  json devices = json::array();
  for (size_t p = 0; p < positions; ++p) {
    std::vector<const json*> at;
    json ids = json::array(), machines = json::array(), notes = json::array();
    bool any_machine = false;
    for (size_t i = 0; i < ms.size(); ++i) {
      at.push_back(p < devs[i].size() ? &devs[i][p] : nullptr);
      ids.push_back(at.back() ? Field(*at.back(), "device_id") : json(nullptr));
      const json machine = at.back() ? Field(*at.back(), "machine") : json(nullptr);
      any_machine = any_machine || machine.is_string();
      machines.push_back(machine.is_string() ? machine : json(nullptr));
      if (!at.back())
        notes.push_back(fmt::format("{} has no device at position {} ({} device(s))", RunId(ms[i]), p,
                                    devs[i].size()));
    }
    json comps = json::array();
    for (const auto& k : keys) comps.push_back(ComponentRow(k, ms, at));
    json row = {{"position", p}, {"device_ids", std::move(ids)}};
    if (any_machine) row["machines"] = std::move(machines);  // a multi-node run's devices: (machine, device)
    devices.push_back(std::move(row));
    devices.back().update(json{
                       {"components", std::move(comps)},
                       {"kv_cache_tokens", TokensRow(at)},
                       {"hbm_used_mb", DeviceNumberRow("hbm_used_mb", at)},
                       {"hbm_total_mb", DeviceNumberRow("hbm_total_mb", at)},
                       {"notes", std::move(notes)}});
  }
  out["devices"] = devices;

  // Totals: per run the sum over its devices.
  json counts = json::array();
  for (const auto& d : devs) counts.push_back(d.size());
  auto total_row = [&](const std::string& key, auto value_of) {
    json values = json::array(), incomplete = json::array();
    for (size_t i = 0; i < ms.size(); ++i) {
      double sum = 0;
      size_t have = 0;
      for (const auto& d : devs[i])
        if (auto v = value_of(d)) {
          sum += *v;
          ++have;
        }
      values.push_back(have ? json(R3(sum)) : json(nullptr));
      if (have && have < devs[i].size()) incomplete.push_back(RunId(ms[i]));
    }
    json row = MetricRow(key, std::move(values), true);
    row["incomplete"] = std::move(incomplete);
    return row;
  };
  json tcomps = json::array();
  for (const auto& k : keys) {
    json row = total_row(k, [&k](const json& d) -> std::optional<double> {
      const json* c = FindComponent(d, k);
      return c ? NumField(*c, "value_mb") : std::nullopt;
    });
    for (const auto& dv : devices)
      for (const auto& c : dv["components"])
        if (c["key"] == k && !c["label_en"].is_null()) {
          row["label_zh"] = c["label_zh"];
          row["label_en"] = c["label_en"];
        }
    tcomps.push_back(std::move(row));
  }
  out["totals"] = {
      {"device_counts", std::move(counts)},
      {"components", std::move(tcomps)},
      {"hbm_used_mb", total_row("hbm_used_mb", [](const json& d) { return NumField(d, "hbm_used_mb"); })},
      {"hbm_total_mb", total_row("hbm_total_mb", [](const json& d) { return NumField(d, "hbm_total_mb"); })}};
}

// ---- torch-profile --------------------------------------------------------

struct Bench {
  std::optional<double> total, ok, failed, rate, min, mean, p50, p90, p99, max, tokens;
  std::optional<double> wall_s, rps, tokens_per_s;  // from the wave's wall time (benchmark_wall_ms)
};

Bench BenchOf(const json& m) {
  Bench b;
  const json& results = ArrField(m, "benchmark_results");
  std::vector<double> lat;
  double ok = 0, tokens = 0;
  bool have_tokens = false;
  for (const auto& r : results) {
    const bool good = Field(r, "ok").is_boolean() && Field(r, "ok").get<bool>();
    ok += good ? 1 : 0;
    if (auto v = NumField(r, "latency_ms")) lat.push_back(*v);
    if (auto t = NumField(Field(Field(r, "body"), "usage"), "completion_tokens")) {
      tokens += *t;
      have_tokens = true;
    }
  }
  if (!results.empty()) {
    b.total = static_cast<double>(results.size());
    b.ok = ok;
    b.failed = *b.total - ok;
    b.rate = R3(ok / *b.total);
  }
  if (!lat.empty()) {
    b.min = *std::min_element(lat.begin(), lat.end());
    b.max = *std::max_element(lat.begin(), lat.end());
    double s = 0;
    for (double v : lat) s += v;
    b.mean = R3(s / static_cast<double>(lat.size()));
    b.p50 = NearestRankPercentile(lat, 50);
    b.p90 = NearestRankPercentile(lat, 90);
    b.p99 = NearestRankPercentile(lat, 99);
  }
  if (have_tokens) b.tokens = tokens;
  if (auto w = NumField(m, "benchmark_wall_ms"); w && *w > 0) {
    b.wall_s = R3(*w / 1000.0);
    b.rps = R3(ok / (*w / 1000.0));
    if (have_tokens) b.tokens_per_s = R3(tokens / (*w / 1000.0));
  }
  return b;
}

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json SideBySide(const std::string& key, const std::vector<json>& values) {
  json row = {{"key", key}, {"values", values}};
  bool same = true;
  for (const auto& v : values) same &= v == values[0];
  row["same"] = same;
  return row;
}

void TorchCompare(const std::vector<json>& ms, json& out) {
  std::vector<Bench> b;
  for (const auto& m : ms) b.push_back(BenchOf(m));
  json bench = json::array();
  const std::pair<const char*, std::optional<double> Bench::*> rows[] = {
      {"requests_total", &Bench::total}, {"requests_ok", &Bench::ok},         {"requests_failed", &Bench::failed},
      {"success_rate", &Bench::rate},    {"latency_min_ms", &Bench::min},     {"latency_mean_ms", &Bench::mean},
      {"latency_p50_ms", &Bench::p50},   {"latency_p90_ms", &Bench::p90},     {"latency_p99_ms", &Bench::p99},
      {"latency_max_ms", &Bench::max},   {"completion_tokens", &Bench::tokens},
      {"wave_wall_s", &Bench::wall_s},   {"throughput_ok_req_per_s", &Bench::rps},
      {"output_tokens_per_s", &Bench::tokens_per_s}};
  for (const auto& [key, field] : rows) {
    json values = json::array();
    for (const auto& x : b) values.push_back(Opt(x.*field));
    bench.push_back(MetricRow(key, std::move(values), false));
  }
  out["benchmark"] = std::move(bench);

  std::vector<json> wl, an, ranks;
  for (const auto& m : ms) {
    wl.push_back(Field(Field(m, "workload_status"), "status"));
    an.push_back(Field(m, "analysis_status"));
    ranks.push_back(json::array({Field(m, "rank_count"), Field(m, "expected_ranks")}));
  }
  out["gates"] = json::array({SideBySide("workload_gate", wl), SideBySide("analysis_gate", an),
                              SideBySide("ranks_found_expected", ranks)});

  // Ranks matched by their place in the deployment (torch_rank_positions.h).
  std::vector<std::vector<RankAt>> placed;
  for (const auto& m : ms) placed.push_back(RankPositions(m));
  const std::vector<RankKey> keys = UnionOfPositions(placed);
  json rank_rows = json::array();
  std::map<std::string, std::vector<std::string>> missing;  // run id -> positions it lacks
  for (size_t p = 0; p < keys.size(); ++p) {
    json paths = json::array(), statuses = json::array(), outputs = json::array(), machines = json::array(),
         present = json::array(), notes = json::array();
    std::vector<const json*> at;
    for (size_t i = 0; i < ms.size(); ++i) {
      const RankAt* r = FindPosition(placed[i], keys[p]);
      at.push_back(r ? r->dir : nullptr);
      paths.push_back(at.back() ? Field(*at.back(), "path") : json(nullptr));
      statuses.push_back(at.back() ? Field(*at.back(), "analysis_status") : json(nullptr));
      machines.push_back(r ? json(r->machine) : json(nullptr));
      if (r) present.push_back(RunId(ms[i]));
      else {
        notes.push_back(fmt::format("{} has no rank at {} ({})", RunId(ms[i]), PositionText(keys[p]),
                                    ShapeText(placed[i])));
        missing[RunId(ms[i])].push_back(PositionText(keys[p]));
      }
    }
    for (const char* o : {"kernel_details_csv", "trace_view_json"}) {
      json exists = json::array(), sizes = json::array();
      for (const json* d : at) {
        const json& rec = d ? Field(Field(*d, "outputs"), o) : Field(json(), "");
        exists.push_back(Field(rec, "exists").is_boolean() ? Field(rec, "exists") : json(nullptr));
        sizes.push_back(Field(rec, "size").is_number() ? Field(rec, "size") : json(nullptr));
      }
      json row = MetricRow(o, std::move(sizes), false);
      row["size_bytes"] = row["values"];
      row.erase("values");
      row["exists"] = std::move(exists);
      outputs.push_back(std::move(row));
    }
    std::vector<json> summaries;
    for (const json* d : at) summaries.push_back(d ? Field(*d, "kernel_summary") : json(nullptr));
    json row = {{"position", p},
                {"node", keys[p].node},
                {"rank_in_node", keys[p].rank_in_node},
                {"machines", std::move(machines)},
                {"paths", std::move(paths)},
                {"analysis_statuses", std::move(statuses)},
                {"outputs", std::move(outputs)},
                {"kernels", CompareKernelSummaries(summaries)},
                {"notes", std::move(notes)}};
    if (present.size() < ms.size()) row["only_in"] = std::move(present);
    rank_rows.push_back(std::move(row));
  }
  json shapes = json::array();
  for (const auto& r : placed) shapes.push_back(ShapeJson(r));
  out["rank_shapes"] = std::move(shapes);
  for (const auto& [run, positions] : missing)
    out["notes"].push_back(fmt::format("{} has no rank at {} ({}): those positions exist in the other run(s) only",
                                       run, fmt::join(positions, ", "),
                                       ShapeText(placed[static_cast<size_t>(
                                           std::find_if(ms.begin(), ms.end(), [&](const json& m) { return RunId(m) == run; }) -
                                           ms.begin())])));
  out["ranks"] = std::move(rank_rows);
  for (size_t i = 0; i < ms.size(); ++i)
    if (!b[i].wall_s)
      out["notes"].push_back(fmt::format("{}: no wave wall time in its manifest (a run from before it was "
                                         "recorded): its throughput is null",
                                         RunId(ms[i])));
}

}  // namespace

Result<json> BuildRunCompare(const std::vector<json>& given) {
  std::string kind;
  if (Status st = CheckRuns(given, &kind); !st.ok()) return st;
  std::vector<json> manifests = given;
  if (kind == "torch-profile")
    for (auto& m : manifests) m["node_machines"] = NodeMachines(m);
  json out = json::object();
  out["schema_version"] = 1;
  out["kind"] = kind;
  out["runs"] = RunsHeader(manifests);
  out["reference_run"] = RunId(manifests[0]);
  out["notes"] = json::array();
  try {
    if (kind == "memory-profile") {
      ConfigDiff(manifests, kMemoryConfigFields, out);
      MemoryCompare(manifests, out);
    } else {
      ConfigDiff(manifests, kTorchConfigFields, out);
      TorchCompare(manifests, out);
    }
  } catch (const std::exception& e) {
    return Status::Invalid(std::string("compare: a manifest has an unexpected shape: ") + e.what());
  }
  return out;
}

}  // namespace npuprof::views
