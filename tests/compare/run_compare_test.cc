// The pure compare of runs (views/run_compare.h) and its text and HTML
// renderings, on manifests saved from real runs over the simulated target
// (tests/data/views) and variations of them made here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "views/charts.h"
#include "views/html_run_compare.h"
#include "views/run_compare.h"
#include "views/run_compare_text.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Load(const std::string& rel) {
  std::ifstream f(std::string(npuprof::build_paths::TestDataDir()) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

json MemoryManifest(const std::string& run_id) {
  json m = Load("views/memory_profile.manifest.json");
  m["run_id"] = run_id;
  return m;
}

json& ComponentOf(json& report_dev, const std::string& key) {
  for (auto& c : report_dev["components"])
    if (c["key"] == key) return c;
  ADD_FAILURE() << "no component " << key;
  static json none;
  return none;
}

const json& Row(const json& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r["key"] == key) return r;
  ADD_FAILURE() << "no row " << key;
  static const json none;
  return none;
}

json Compare(const std::vector<json>& ms) {
  auto c = views::BuildRunCompare(ms);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : json();
}

TEST(RunCompare, SameRunsHaveZeroDeltasAndNoConfigDiff) {
  const json a = MemoryManifest("rA"), b = MemoryManifest("rB");
  ASSERT_TRUE(a.is_object());
  const json c = Compare({a, b});
  EXPECT_EQ(c["kind"], "memory-profile");
  EXPECT_EQ(c["reference_run"], "rA");
  EXPECT_TRUE(c["config_diff"].empty()) << c["config_diff"].dump();
  EXPECT_NE(std::find(c["same_fields"].begin(), c["same_fields"].end(), "gpu_memory_utilization"),
            c["same_fields"].end());
  ASSERT_EQ(c["devices"].size(), a["report"]["devices"].size());
  size_t checked = 0;
  for (const auto& d : c["devices"]) {
    EXPECT_EQ(d["device_ids"][0], d["device_ids"][1]);
    for (const auto& comp : d["components"]) {
      ASSERT_EQ(comp["values_mb"].size(), 2u);
      if (!comp["values_mb"][0].is_number()) continue;
      EXPECT_EQ(comp["delta_mb"][0], 0.0);
      EXPECT_EQ(comp["delta_mb"][1], 0.0) << comp.dump();
      ++checked;
    }
    EXPECT_EQ(d["hbm_used_mb"]["delta_mb"][1], 0.0);
    EXPECT_EQ(d["kv_cache_tokens"]["delta"][1], 0.0);
  }
  EXPECT_GE(checked, 2u * 9u);
  for (const auto& t : c["totals"]["components"])
    if (t["values_mb"][0].is_number()) {
      EXPECT_EQ(t["delta_mb"][1], 0.0) << t.dump();
    }
}

// One-node reports carry no machine: no "machines" row. A multi-node
// report's devices do: each position names its machine in every run (null
// where a run has no device there or names none).
TEST(RunCompare, MultiNodeDevicesNameTheirMachinePerPosition) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB");
  ASSERT_GE(a["report"]["devices"].size(), 2u);
  EXPECT_FALSE(Compare({a, b})["devices"][0].contains("machines"));
  for (json* m : {&a, &b}) {
    (*m)["report"]["devices"][0]["machine"] = "head";
    (*m)["report"]["devices"][1]["machine"] = "worker";
  }
  b["report"]["devices"].erase(1);
  const json c = Compare({a, b});
  EXPECT_EQ(c["devices"][0]["machines"], json::array({"head", "head"}));
  EXPECT_EQ(c["devices"][1]["machines"], json::array({"worker", nullptr}));
  const std::string text = views::RenderRunCompareText(c, "en");
  EXPECT_NE(text.find("A=worker:"), std::string::npos) << text;
}

TEST(RunCompare, DefaultServedNamesMadeFromTheRunIdAreNoDifference) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB"), c = MemoryManifest("rC");
  a["served_model_name"] = "npuprof-mem-rA";
  b["served_model_name"] = "npuprof-mem-rB";
  c["served_model_name"] = "qwen";
  const json same = Compare({a, b});
  EXPECT_TRUE(same["config_diff"].empty()) << same["config_diff"].dump();
  const json differ = Compare({a, c});
  ASSERT_EQ(differ["config_diff"].size(), 1u) << differ["config_diff"].dump();
  EXPECT_EQ(differ["config_diff"][0]["values"], json::array({"npuprof-mem-<run id>", "qwen"}));
}

TEST(RunCompare, ConfigDiffAndKvDeltaKeepEachRunsEvidence) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB");
  b["gpu_memory_utilization"] = 0.9;
  b["serve_args"][1] = "0.9";
  for (auto& d : b["report"]["devices"]) {
    json& kv = ComponentOf(d, "kv_cache");
    kv["value_mb"] = kv["value_mb"].get<double>() + 6553.6;
    kv["evidence"][0]["line"] = 99;
  }
  const json c = Compare({a, b});
  bool found = false;
  for (const auto& f : c["config_diff"])
    if (f["field"] == "gpu_memory_utilization") {
      found = true;
      EXPECT_EQ(f["values"], json::array({0.85, 0.9}));
    }
  EXPECT_TRUE(found) << c["config_diff"].dump();
  const json& kv = Row(c["devices"][0]["components"], "kv_cache");
  EXPECT_NEAR(kv["delta_mb"][1].get<double>(), 6553.6, 1e-6);
  const double a_kv = kv["values_mb"][0].get<double>();
  EXPECT_NEAR(kv["delta_pct"][1].get<double>(), 6553.6 / a_kv * 100, 0.001);
  EXPECT_EQ(kv["evidence"][0], ComponentOf(a["report"]["devices"][0], "kv_cache")["evidence"]);
  EXPECT_EQ(kv["evidence"][1][0]["line"], 99);
  EXPECT_EQ(kv["sources"], json::array({"vllm_log", "vllm_log"}));
  EXPECT_EQ(Row(c["devices"][0]["components"], "weights")["delta_mb"][1], 0.0);
  const json& tkv = Row(c["totals"]["components"], "kv_cache");
  EXPECT_NEAR(tkv["delta_mb"][1].get<double>(), 6553.6 * 2, 1e-3);
}

// tp=2 against tp=4: positions 2 and 3 exist only in B; totals sum each run's devices.
TEST(RunCompare, DifferentDeviceCountsGiveNullPositionsAndTotals) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB");
  b["tp"] = 4;
  b["devices"] = json::array({0, 1, 2, 3});
  json devs = b["report"]["devices"];
  for (int i = 0; i < 2; ++i) {
    json d = devs[i];
    d["device_id"] = 2 + i;
    d["rank"] = 2 + i;
    devs.push_back(d);
  }
  b["report"]["devices"] = devs;
  const json c = Compare({a, b});
  ASSERT_EQ(c["devices"].size(), 4u);
  EXPECT_EQ(c["totals"]["device_counts"], json::array({2, 4}));
  const json& p2 = c["devices"][2];
  EXPECT_EQ(p2["device_ids"], json::array({nullptr, 2}));
  const json& kv = Row(p2["components"], "kv_cache");
  EXPECT_TRUE(kv["values_mb"][0].is_null());
  EXPECT_TRUE(kv["values_mb"][1].is_number());
  EXPECT_TRUE(kv["delta_mb"][1].is_null());
  EXPECT_TRUE(kv["evidence"][0].is_null());
  ASSERT_FALSE(p2["notes"].empty());
  EXPECT_NE(p2["notes"][0].get<std::string>().find("rA"), std::string::npos);
  const json& tw = Row(c["totals"]["components"], "weights");
  EXPECT_NEAR(tw["values_mb"][1].get<double>(), 2 * tw["values_mb"][0].get<double>(), 1e-3);
  EXPECT_NEAR(tw["delta_pct"][1].get<double>(), 100.0, 1e-3);
  EXPECT_TRUE(tw["incomplete"].empty());
  bool tp = false;
  for (const auto& f : c["config_diff"])
    if (f["field"] == "tp") tp = f["values"] == json::array({2, 4});
  EXPECT_TRUE(tp) << c["config_diff"].dump();
  // The text and the page show the null positions as "-".
  const std::string text = views::RenderRunCompareText(c, "en");
  EXPECT_NE(text.find("Position 3"), std::string::npos) << text;
  EXPECT_NE(text.find("has no device at position 3"), std::string::npos) << text;
}

TEST(RunCompare, MissingComponentsAreNullAndSaySo) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB");
  json& dev0 = b["report"]["devices"][0];
  json comps = json::array();
  for (const auto& comp : dev0["components"])
    if (comp["key"] != "graph_capture") comps.push_back(comp);
  dev0["components"] = comps;
  json& hccl = ComponentOf(dev0, "hccl");
  hccl["value_mb"] = nullptr;
  hccl["status"] = "unavailable";
  hccl["note"] = "msprof data missing";
  const json c = Compare({a, b});
  const json& d0 = c["devices"][0]["components"];
  const json& g = Row(d0, "graph_capture");
  EXPECT_TRUE(g["values_mb"][1].is_null());
  EXPECT_TRUE(g["delta_mb"][1].is_null());
  EXPECT_TRUE(g["delta_pct"][1].is_null());
  ASSERT_EQ(g["notes"].size(), 1u);
  EXPECT_EQ(g["notes"][0], "rB: no graph_capture component in its report");
  const json& h = Row(d0, "hccl");
  EXPECT_TRUE(h["delta_mb"][1].is_null());
  ASSERT_EQ(h["notes"].size(), 1u);
  EXPECT_EQ(h["notes"][0], "rB: hccl unavailable (msprof data missing)");
  EXPECT_EQ(h["statuses"][1], "unavailable");
  // Device 1 of B still has them: the totals of B miss one device.
  const json& tg = Row(c["totals"]["components"], "graph_capture");
  EXPECT_EQ(tg["incomplete"], json::array({"rB"}));
  EXPECT_TRUE(Row(c["totals"]["components"], "weights")["incomplete"].empty());
}

TEST(RunCompare, RefusesDifferentKinds) {
  json t = Load("views/torch_profile.manifest.json");
  auto c = views::BuildRunCompare({MemoryManifest("rA"), t});
  ASSERT_FALSE(c.ok());
  const std::string msg = c.status().message();
  EXPECT_NE(msg.find("different kinds"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rA is memory-profile"), std::string::npos) << msg;
  EXPECT_NE(msg.find(t["run_id"].get<std::string>() + " is torch-profile"), std::string::npos) << msg;
}

TEST(RunCompare, RefusesUnfinishedFewerThanTwoAndReportless) {
  json b = MemoryManifest("rB");
  b["status"] = "running";
  b["state"] = "collecting";
  auto c = views::BuildRunCompare({MemoryManifest("rA"), b});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not finished: rB (collecting)"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("npuprof watch"), std::string::npos);

  auto one = views::BuildRunCompare({MemoryManifest("rA")});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("at least 2 runs, got 1"), std::string::npos);

  json r = MemoryManifest("rR");
  r["status"] = "failed";
  r.erase("report");
  auto nr = views::BuildRunCompare({MemoryManifest("rA"), r});
  ASSERT_FALSE(nr.ok());
  EXPECT_NE(nr.status().message().find("without a memory report: rR (status failed)"), std::string::npos)
      << nr.status().message();

  json s = MemoryManifest("rS");
  json s2 = MemoryManifest("rS2");
  s["kind"] = s2["kind"] = "serve";
  auto sv = views::BuildRunCompare({s, s2});
  ASSERT_FALSE(sv.ok());
  EXPECT_NE(sv.status().message().find("memory-profile and torch-profile"), std::string::npos);
}

TEST(RunCompare, TorchProfileSideBySide) {
  json a = Load("views/torch_profile.manifest.json");
  json b = a;
  a["run_id"] = "tA";
  b["run_id"] = "tB";
  b["mode"] = "piecewise_graph";
  b["benchmark_results"][0]["ok"] = false;
  b["benchmark_results"][1]["latency_ms"] = 500;
  b["workload_status"]["status"] = "failed";
  a["benchmark_wall_ms"] = 2000;
  b["benchmark_wall_ms"] = 1000;
  const double size_a = a["remote_profile_dirs"][0]["outputs"]["kernel_details_csv"]["size"].get<double>();
  b["remote_profile_dirs"][0]["outputs"]["kernel_details_csv"]["size"] = size_a + 1000;
  b["remote_profile_dirs"].erase(1);
  const json c = Compare({a, b});
  EXPECT_EQ(c["kind"], "torch-profile");
  const json& ok = Row(c["benchmark"], "requests_ok");
  const double n = static_cast<double>(a["benchmark_results"].size());
  EXPECT_EQ(ok["values"], json::array({n, n - 1}));
  EXPECT_EQ(ok["delta"][1], -1.0);
  EXPECT_EQ(Row(c["benchmark"], "requests_failed")["values"][1], 1.0);
  EXPECT_EQ(Row(c["benchmark"], "latency_max_ms")["values"][1], 500.0);
  // Throughput from the wave's wall time: ok requests / s.
  EXPECT_EQ(Row(c["benchmark"], "wave_wall_s")["values"], json::array({2.0, 1.0}));
  EXPECT_EQ(Row(c["benchmark"], "throughput_ok_req_per_s")["values"], json::array({n / 2.0, (n - 1) / 1.0}));
  json old_run = a;
  old_run.erase("benchmark_wall_ms");
  const json c_old = Compare({old_run, b});
  EXPECT_TRUE(Row(c_old["benchmark"], "throughput_ok_req_per_s")["values"][0].is_null());
  EXPECT_NE(c_old["notes"].dump().find("no wave wall time"), std::string::npos) << c_old["notes"].dump();
  const json& wl = Row(c["gates"], "workload_gate");
  EXPECT_EQ(wl["values"], json::array({"ok", "failed"}));
  EXPECT_FALSE(wl["same"].get<bool>());
  EXPECT_TRUE(Row(c["gates"], "analysis_gate")["same"].get<bool>());
  ASSERT_EQ(c["ranks"].size(), 2u);
  const json& kd = Row(c["ranks"][0]["outputs"], "kernel_details_csv");
  EXPECT_EQ(kd["delta"][1], 1000.0);
  EXPECT_EQ(kd["exists"], json::array({true, true}));
  EXPECT_TRUE(c["ranks"][1]["paths"][1].is_null());
  bool mode = false;
  for (const auto& f : c["config_diff"]) mode |= f["field"] == "mode";
  EXPECT_TRUE(mode);
  const std::string text = views::RenderRunCompareText(c, "en");
  EXPECT_NE(text.find("requests_ok"), std::string::npos);
  EXPECT_NE(text.find("(differs)"), std::string::npos);
  auto html = views::RenderRunCompareHtml(c, "en");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("kernel_details_csv"), std::string::npos);
}

TEST(RunCompare, TextAndHtmlShowEveryRunAndDelta) {
  json a = MemoryManifest("rA"), b = MemoryManifest("rB"), c3 = MemoryManifest("rC");
  for (auto* m : {&b, &c3}) {
    const double add = m == &b ? 1024.0 : 2048.0;
    for (auto& d : (*m)["report"]["devices"]) {
      json& kv = ComponentOf(d, "kv_cache");
      kv["value_mb"] = kv["value_mb"].get<double>() + add;
    }
  }
  const json c = Compare({a, b, c3});
  const json& kv = Row(c["devices"][0]["components"], "kv_cache");
  EXPECT_EQ(kv["delta_mb"], json::array({0.0, 1024.0, 2048.0}));
  for (const std::string lang : {"zh", "en"}) {
    const std::string text = views::RenderRunCompareText(c, lang);
    EXPECT_NE(text.find("+1024.0"), std::string::npos) << text;
    EXPECT_NE(text.find("+2048.0"), std::string::npos);
    EXPECT_NE(text.find("rC"), std::string::npos);
    auto html = views::RenderRunCompareHtml(c, lang);
    ASSERT_TRUE(html.ok()) << html.status().message();
    EXPECT_NE(html->find(views::FormatMbValue(kv["values_mb"][2].get<double>())), std::string::npos);
    EXPECT_NE(html->find("+" + views::FormatMbValue(2048.0)), std::string::npos);
    EXPECT_NE(html->find("Content-Security-Policy"), std::string::npos);
  }
  EXPECT_FALSE(views::RenderRunCompareHtml(json::array()).ok());
}

}  // namespace
}  // namespace npuprof::testing
