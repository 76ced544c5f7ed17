// The memory report of a real run whose stored vLLM log summary was edited
// behind the server's back (a figure turned into a string, as a buggy writer
// or an edited store would leave it): `npuprof report` (json and text),
// `show` and `manifest` still answer; the KV cache shows no figure and the
// error names the field; the figures from the other documents are still the
// simulator's ground truth (docs/BEHAVIOUR.md#mem-evidence-errors).
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <iostream>

#include "store/event_store.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

const json* Component(const json& dev, const std::string& key) {
  for (const auto& c : dev["components"])
    if (c["key"] == key) return &c;
  return nullptr;
}

// Turns every run-level "kv_cache_available_gib" number of a vLLM log
// summary (an object under "summary") into a string; true when it found one.
bool BreakKvFigure(json& j) {
  bool found = false;
  if (j.is_object()) {
    if (j.contains("summary") && j["summary"].is_object() && j["summary"].contains("kv_cache_available_gib") &&
        j["summary"]["kv_cache_available_gib"].is_number()) {
      j["summary"]["kv_cache_available_gib"] = j["summary"]["kv_cache_available_gib"].dump();
      found = true;
    }
    for (auto& [k, v] : j.items()) found = BreakKvFigure(v) || found;
  } else if (j.is_array()) {
    for (auto& v : j) found = BreakKvFigure(v) || found;
  }
  return found;
}

TEST(MemoryTypedE2E, AnEditedLogSummaryIsNamedAndCostsOnlyItsFigures) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--export-delay", "0.5"}).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  CliResult r = h.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "2", "--wait"}, 200);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string run = r.json().value("run_id", "");
  ASSERT_FALSE(run.empty());
  ASSERT_EQ(r.json()["status"], "ok") << r.out;
  const auto truths = h.SimTruthFiles();
  ASSERT_EQ(truths.size(), 1u);
  const json& truth = truths[0]["per_device"];

  // Edit the stored answer that carries the log summary.
  h.KillServer(SIGTERM);
  {
    auto store = store::EventStore::Open(h.DataDir() + "/store");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto evs = (*store)->ReadRun(run);
    ASSERT_TRUE(evs.ok());
    bool edited = false;
    for (proto::Event e : *evs) {
      if (e.payload_json().find("kv_cache_available_gib") == std::string::npos) continue;
      json p = json::parse(e.payload_json());
      if (!BreakKvFigure(p)) continue;
      std::cerr << "edited event #" << e.seq() << " " << e.type() << "\n";
      e.set_payload_json(p.dump());
      e.set_hash(store::EventHash(e));
      ASSERT_TRUE((*store)->RawOverwriteEventForTest(e).ok());
      edited = true;
    }
    ASSERT_TRUE(edited) << "no stored event carries the vLLM log summary";
  }
  ASSERT_TRUE(h.RestartServer().ok());

  CliResult rep = h.Cli({"report", run, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  const json report = rep.json();
  ASSERT_TRUE(report.contains("evidence_errors")) << rep.out;
  bool named = false;
  for (const auto& e : report["evidence_errors"])
    named = named || (e.value("path", "") == "vllm_log.summary.kv_cache_available_gib" &&
                      e.value("message", "").find("must be a number, not a string") != std::string::npos);
  EXPECT_TRUE(named) << report["evidence_errors"].dump();
  ASSERT_EQ(report["devices"].size(), truth.size());
  for (const auto& dev : report["devices"]) {
    const std::string id = std::to_string(dev["device_id"].get<int>());
    SCOPED_TRACE("device " + id);
    for (const char* key : {"kv_cache", "graph_capture", "residual"}) {
      const json* c = Component(dev, key);
      ASSERT_NE(c, nullptr) << key;
      EXPECT_TRUE((*c)["value_mb"].is_null()) << key << ": " << c->dump();
      EXPECT_EQ((*c)["status"], "evidence_error") << key;
    }
    // The other documents' figures are still the target's truth.
    const json& comps = truth[id]["components_mb"];
    for (const auto& [tk, rk] : {std::pair{"fixed", "fixed_overhead"}, std::pair{"hccl", "hccl"},
                                 std::pair{"runtime", "runtime"}, std::pair{"activation_peak", "activation_peak"}}) {
      const json* c = Component(dev, rk);
      ASSERT_NE(c, nullptr) << rk;
      ASSERT_TRUE((*c)["value_mb"].is_number()) << rk << ": " << c->dump();
      EXPECT_NEAR((*c)["value_mb"].get<double>(), comps[tk].get<double>(), 1.0) << rk;
    }
  }

  CliResult text = h.Cli({"report", run, "--format", "text", "--lang", "en"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("[Evidence errors]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("vllm_log.summary.kv_cache_available_gib must be a number"), std::string::npos);
  EXPECT_EQ(h.Cli({"show", run}).exit_code, 0);
  EXPECT_EQ(h.Cli({"manifest", run}).exit_code, 0);
  h.Stop();
}

}  // namespace
}  // namespace npuprof::testing
