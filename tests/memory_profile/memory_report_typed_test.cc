// The memory report reads typed evidence (docs/BEHAVIOUR.md#mem-evidence-errors):
// (1) for valid input the report and its text are byte for byte what the
// builder made before it read typed documents (tests/data/
// memory_report_golden.json, made from memory_report_fixtures.h);
// (2) a malformed document never crashes the report, never becomes a 0: the
// components that depend on it show no figure and "evidence_errors" names the
// field's path, in the JSON and in the text.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "statemachine/memory_manifest.h"
#include "statemachine/memory_report.h"
#include "statemachine/memory_report_input.h"
#include "statemachine/memory_report_text.h"
#include "statemachine/memory_report_view.h"
#include "tests/memory_profile/memory_report_fixtures.h"
#include "tests/support/build_paths.h"
#include "views/html_memory_report.h"

namespace npuprof::sm {
namespace {

json Golden() {
  std::ifstream f(std::string(build_paths::TestDataDir()) + "/memory_report_golden.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

TEST(MemoryReportTyped, ValidRunsAreByteIdenticalToTheGolden) {
  const json golden = Golden();
  const auto inputs = fixtures::ReportInputs();
  ASSERT_EQ(golden.size(), inputs.size() + 1);  // + the manifest
  for (const auto& [name, ev] : inputs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(golden.contains(name));
    const json r = BuildMemoryReport(ev);
    EXPECT_FALSE(r.contains("evidence_errors"));
    EXPECT_EQ(r.dump(), golden[name]["report"].dump());
    EXPECT_EQ(RenderMemoryReportText(r, "zh"), golden[name]["text_zh"].get<std::string>());
    EXPECT_EQ(RenderMemoryReportText(r, "en"), golden[name]["text_en"].get<std::string>());
  }
}

json Manifest(const fixtures::ManifestRun& run) {
  return BuildMemoryManifest(run.state, {{"status", "ok"}}, BuildMemoryReport(run.state.data), run.service);
}

TEST(MemoryReportTyped, ValidManifestIsByteIdenticalToTheGolden) {
  const json m = Manifest(fixtures::TwoNodeRun());
  EXPECT_FALSE(m.contains("evidence_errors"));
  EXPECT_EQ(m.dump(), Golden()["manifest_two_nodes"]["manifest"].dump());
}

TEST(MemoryReportTyped, MalformedManifestInputIsNamedAndLeftOut) {
  struct Case {
    const char* name;
    std::function<void(fixtures::ManifestRun&)> mutate;
    const char* path;
    std::function<void(const json&)> check;
  };
  const std::vector<Case> cases = {
      {"baseline used is text", [](auto& r) { r.state.data["baseline"]["hbm"]["1"]["used_mb"] = "3001"; },
       "baseline.hbm.1.used_mb", [](const json& m) { EXPECT_TRUE(m["baseline_hbm"].is_null()); }},
      {"other node's snapshot is an array",
       [](auto& r) { r.state.data["node_evidence"]["1"]["after_infer"]["hbm"] = json::array(); },
       "node_evidence.1.after_infer.hbm",
       [](const json& m) {
         EXPECT_TRUE(m["nodes"][0]["after_infer_hbm"].is_null());
         EXPECT_FALSE(m["nodes"][0]["after_ready_hbm"].is_null());
       }},
      {"an msprof blob is a number", [](auto& r) { r.state.data["msprof"]["blobs"]["msprof_csvs/x.csv"] = 7; },
       "msprof.blobs.msprof_csvs/x.csv",
       [](const json& m) {
         EXPECT_FALSE(m["files"].contains("msprof_csvs/x.csv"));
         EXPECT_TRUE(m["files"].contains("msprof_csvs/npu_mem_d0.csv"));
       }},
      {"a log blob is an object", [](auto& r) { r.state.data["vllm_log"]["blob"] = json::object(); }, "vllm_log.blob",
       [](const json& m) { EXPECT_FALSE(m["files"].contains("vllm_serve.log")); }},
      {"service tp is text", [](auto& r) { r.service["tp"] = "2"; }, "service.tp",
       [](const json& m) { EXPECT_TRUE(m["tp"].is_null()); }},
      {"spec model is a number",
       [](auto& r) {
         r.service.erase("model");
         r.state.spec["model"] = 3;
       },
       "spec.model", [](const json& m) { EXPECT_EQ(m["model"], ""); }},
      {"serve argv holds a number", [](auto& r) { r.service["serve_argv"][1] = 5; }, "service.serve_argv[1]",
       [](const json& m) { EXPECT_EQ(m["serve_argv"], json::array()); }},
      {"the flush record is text", [](auto& r) { r.state.data["flushed"] = "done"; }, "flushed",
       [](const json& m) { EXPECT_TRUE(m["msprof_flush"].is_null()); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto run = fixtures::TwoNodeRun();
    c.mutate(run);
    json m;
    ASSERT_NO_THROW(m = Manifest(run));
    ASSERT_TRUE(m.contains("evidence_errors"));
    bool named = false;
    for (const auto& e : m["evidence_errors"]) named = named || e["path"] == c.path;
    EXPECT_TRUE(named) << m["evidence_errors"].dump();
    c.check(m);
  }
}

const json* Comp(const json& report, size_t dev, const std::string& key) {
  for (const auto& c : report["devices"][dev]["components"])
    if (c["key"] == key) return &c;
  return nullptr;
}

struct Malformed {
  const char* name;
  const char* fixture;
  std::function<void(json&)> mutate;
  const char* path;                       // the field the error names ("" = no error: an absent value)
  std::vector<size_t> devices;            // the devices whose figures depend on it
  std::vector<const char*> no_figure;     // components that must show no figure there
};

std::vector<Malformed> Table() {
  return {
      {"log figure is a string", "standalone_msprof",
       [](json& e) { e["vllm_log"]["summary"]["kv_cache_available_gib"] = "30.5"; },
       "vllm_log.summary.kv_cache_available_gib", {0, 1}, {"kv_cache", "graph_capture", "residual"}},
      {"rank figure is a bool", "standalone_msprof",
       [](json& e) { e["vllm_log"]["summary"]["ranks"]["Worker_TP1 pid=41"]["weights_gib"] = true; },
       "vllm_log.summary.ranks.Worker_TP1 pid=41.weights_gib", {0, 1}, {"kv_cache", "residual"}},
      {"log line number is text", "standalone_no_msprof",
       [](json& e) { e["vllm_log"]["summary"]["evidence"]["weights_gib"]["line"] = "40"; },
       "vllm_log.summary.evidence.weights_gib.line", {0, 1}, {"kv_cache", "graph_capture", "residual"}},
      {"log summary is an array", "standalone_no_msprof",
       [](json& e) { e["vllm_log"]["summary"] = json::array(); }, "vllm_log.summary", {0}, {"kv_cache", "residual"}},
      {"renamed log key is absent", "standalone_msprof",
       [](json& e) {
         auto& s = e["vllm_log"]["summary"];
         s["kv_cache_gib"] = s["kv_cache_available_gib"];
         s.erase("kv_cache_available_gib");
         s["ranks"]["Worker_TP1 pid=41"].erase("kv_cache_available_gib");
       },
       "", {0, 1}, {"kv_cache"}},
      {"baseline used is a string", "standalone_msprof",
       [](json& e) { e["baseline"]["hbm"]["0"]["used_mb"] = "3000"; }, "baseline.hbm.0.used_mb", {0, 1},
       {"fixed_overhead", "residual"}},
      {"baseline hbm is an array", "attach_baseline_run", [](json& e) { e["baseline"]["hbm"] = json::array(); },
       "baseline.hbm", {0, 1}, {"fixed_overhead", "residual"}},
      {"renamed baseline used is absent", "standalone_no_msprof",
       [](json& e) {
         for (const char* d : {"0", "1"}) {
           e["baseline"]["hbm"][d]["used"] = e["baseline"]["hbm"][d]["used_mb"];
           e["baseline"]["hbm"][d].erase("used_mb");
         }
       },
       "", {0, 1}, {"fixed_overhead"}},
      {"device key is not an id", "standalone_msprof",
       [](json& e) { e["after_infer"]["hbm"]["npu0"] = {{"used_mb", 1.0}}; }, "after_infer.hbm", {0, 1},
       {"residual"}},
      {"after ready is text", "standalone_no_msprof", [](json& e) { e["after_ready"] = "oops"; }, "after_ready",
       {0, 1}, {"activation_peak", "residual"}},
      {"after infer total is text", "standalone_msprof",
       [](json& e) { e["after_infer"]["hbm"]["1"]["total_mb"] = "64G"; }, "after_infer.hbm.1.total_mb", {0, 1},
       {"residual"}},
      {"msprof max is text", "standalone_msprof",
       [](json& e) { e["msprof"]["module_mem"][2]["max_mb"] = "4"; }, "msprof.module_mem[2].max_mb", {0, 1},
       {"hccl", "runtime", "slog", "msprof_other", "activation_peak", "residual"}},
      {"renamed msprof max is an error", "process_level_no_after_infer",
       [](json& e) {
         e["msprof"]["module_mem"][0]["max"] = 600.5;
         e["msprof"]["module_mem"][0].erase("max_mb");
       },
       "msprof.module_mem[0].max_mb", {0, 1}, {"hccl", "runtime", "slog", "msprof_other", "residual"}},
      {"msprof device id is text", "standalone_msprof",
       [](json& e) { e["msprof"]["module_mem"][0]["device_id"] = "0"; }, "msprof.module_mem[0].device_id", {0},
       {"hccl", "residual"}},
      {"series peak is text", "standalone_msprof",
       [](json& e) { e["msprof"]["activation_peaks"][1]["value_mb"] = "211"; },
       "msprof.activation_peaks[1].value_mb", {0, 1}, {"activation_peak", "residual"}},
      {"renamed APP peak is an error", "standalone_msprof",
       [](json& e) { e["msprof"]["npu_mem"][0].erase("max_hbm_mb"); }, "msprof.npu_mem[0].max_hbm_mb", {0},
       {"hccl", "residual"}},
      {"weights bytes are text", "standalone_msprof",
       [](json& e) { e["weights"]["per_device_bytes"] = "16G"; }, "weights.per_device_bytes", {0, 1}, {"residual"}},
      {"weight category bytes are text", "attach_no_baseline",
       [](json& e) {
         e["weights"] = fixtures::Weights();
         e["weights"]["categories"][1]["total_bytes"] = "x";
       },
       "weights.categories[1].total_bytes", {0, 1}, {"residual"}},
      {"theory is an object", "standalone_msprof", [](json& e) { e["theory"]["per_device_bytes"] = json::object(); },
       "theory.per_device_bytes", {0, 1}, {"residual"}},
      {"tp is text", "standalone_msprof", [](json& e) { e["tp"] = "2"; }, "tp", {}, {}},
      {"other node's snapshot is text", "two_nodes",
       [](json& e) { e["nodes"][0]["after_ready"]["hbm"]["0"]["used_mb"] = "x"; },
       "nodes[0].after_ready.hbm.0.used_mb", {2, 3}, {"activation_peak", "residual"}},
  };
}

TEST(MemoryReportTyped, MalformedEvidenceIsNamedNeverDefaulted) {
  const auto inputs = fixtures::ReportInputs();
  for (const auto& m : Table()) {
    SCOPED_TRACE(m.name);
    json ev = inputs.at(m.fixture);
    m.mutate(ev);
    json r;
    ASSERT_NO_THROW(r = BuildMemoryReport(ev));
    const std::string path = m.path;
    if (path.empty()) {
      EXPECT_FALSE(r.contains("evidence_errors")) << r["evidence_errors"].dump();
    } else {
      ASSERT_TRUE(r.contains("evidence_errors"));
      bool named = false;
      for (const auto& e : r["evidence_errors"]) named = named || e["path"] == path;
      EXPECT_TRUE(named) << r["evidence_errors"].dump();
    }
    for (size_t dev : m.devices) {
      ASSERT_LT(dev, r["devices"].size());
      for (const char* key : m.no_figure) {
        const json* c = Comp(r, dev, key);
        ASSERT_NE(c, nullptr) << key;
        EXPECT_TRUE((*c)["value_mb"].is_null()) << key << " on device " << dev << ": " << c->dump();
        EXPECT_NE((*c)["status"], "measured") << key;
        if (!path.empty()) {
          EXPECT_EQ((*c)["status"], "evidence_error") << key << ": " << c->dump();
        }
      }
    }
    std::string zh, en;
    ASSERT_NO_THROW(zh = RenderMemoryReportText(r, "zh"));
    ASSERT_NO_THROW(en = RenderMemoryReportText(r, "en"));
    if (!path.empty()) {
      EXPECT_NE(en.find("[Evidence errors]"), std::string::npos);
      EXPECT_NE(en.find(path), std::string::npos) << en;
      EXPECT_NE(zh.find(path), std::string::npos);
    }
  }
}

TEST(MemoryReportTyped, ErrorSaysTheShapeAndTheOtherDocumentsStillCount) {
  json ev = fixtures::ReportInputs().at("standalone_msprof");
  ev["vllm_log"]["summary"]["kv_cache_available_gib"] = "30.5";
  const json r = BuildMemoryReport(ev);
  ASSERT_EQ(r["evidence_errors"].size(), 1u);
  EXPECT_EQ(r["evidence_errors"][0]["document"], "vllm_log");
  EXPECT_EQ(r["evidence_errors"][0]["message"],
            "vllm_log.summary.kv_cache_available_gib must be a number, not a string");
  // The weights fall back to the safetensors headers; msprof and npu-smi still give theirs.
  EXPECT_EQ((*Comp(r, 0, "weights"))["source"], "safetensors");
  EXPECT_EQ((*Comp(r, 0, "hccl"))["value_mb"], 600.5);
  EXPECT_EQ((*Comp(r, 0, "fixed_overhead"))["value_mb"], 3000.0);
  EXPECT_TRUE(r["devices"][0]["cross_validation"]["unattributed_mb"].is_null());
}

TEST(MemoryReportTyped, HtmlListsTheEvidenceErrors) {
  json ev = fixtures::ReportInputs().at("standalone_msprof");
  ev["msprof"]["module_mem"][2]["max_mb"] = "4";
  auto html = views::RenderMemoryReportHtml(BuildMemoryReport(ev), {}, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_NE(html->find("id=\"evidence-errors\""), std::string::npos);
  EXPECT_NE(html->find("msprof.module_mem[2].max_mb must be a number, not a string"), std::string::npos);
  auto valid = views::RenderMemoryReportHtml(BuildMemoryReport(fixtures::ReportInputs().at("standalone_msprof")));
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(valid->find("evidence-errors"), std::string::npos);
}

TEST(MemoryReportTyped, ViewOfAMalformedReportIsAnErrorNotAZero) {
  json r = BuildMemoryReport(fixtures::ReportInputs().at("standalone_msprof"));
  r["devices"][1]["components"][2]["value_mb"] = "31232";
  auto v = DecodeMemoryReportView(r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "devices[1].components[2].value_mb must be a number, not a string");
  const std::string text = RenderMemoryReportText(r, "en");
  EXPECT_NE(text.find("devices[1].components[2].value_mb"), std::string::npos) << text;
  EXPECT_EQ(text.find("31232"), std::string::npos);
}

TEST(MemoryReportTyped, InputDecoderKeepsAbsentApartFromFailed) {
  json ev = fixtures::ReportInputs().at("attach_no_baseline");
  ev["after_infer"]["hbm"]["0"]["used_mb"] = nullptr;  // null reads as absent
  const MemoryReportInput in = DecodeMemoryReportInput(ev);
  EXPECT_TRUE(in.errors.empty());
  EXPECT_FALSE(in.baseline.present);
  EXPECT_TRUE(in.after_infer.usable());
  EXPECT_FALSE(in.after_infer.Used(0).has_value());
  EXPECT_TRUE(in.after_infer.Used(1).has_value());
  ev["msprof"] = {{"status", 3}};
  const MemoryReportInput bad = DecodeMemoryReportInput(ev, "nodes[2].");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].document, "nodes[2].msprof");
  EXPECT_EQ(bad.errors[0].message, "nodes[2].msprof.status must be a string, not an integer");
  EXPECT_TRUE(bad.msprof.failed());
  EXPECT_EQ(BuildMemoryReport(ev)["msprof"]["status"], "evidence_error");
}

}  // namespace
}  // namespace npuprof::sm
