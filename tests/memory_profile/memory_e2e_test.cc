// memory-profile end to end: `npuprof server` + local workers, a real loopback
// sshd and the simulated Ascend target (tests/sim), whose ground truth per
// device (state/truth/*.json) every report line is compared with.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kTruthKeys[][2] = {
    {"fixed", "fixed_overhead"}, {"weights", "weights"}, {"kv_cache", "kv_cache"},
    {"graph_capture", "graph_capture"}, {"hccl", "hccl"}, {"runtime", "runtime"}, {"slog", "slog"},
    {"msprof_other", "msprof_other"}, {"activation_peak", "activation_peak"}, {"residual", "residual"}};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json Component(const json& dev, const std::string& key) {
  for (const auto& c : dev["components"])
    if (c["key"] == key) return c;
  return nullptr;
}

class MemoryE2E : public ::testing::Test {
 protected:
  void StartHarness(const std::vector<std::string>& sim_args = {}) {
    std::vector<std::string> args = {"--export-delay", "0.5"};
    args.insert(args.end(), sim_args.begin(), sim_args.end());
    Status st = h_.Start(args);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  std::string Track(const CliResult& r) {
    json j = r.json();
    std::string id = j.is_object() ? j.value("run_id", "") : "";
    if (!id.empty()) runs_.push_back(id);
    return id;
  }
  static int FreePort() {
    static int next = 20000 + (::getpid() % 2000) * 7;
    return next++;
  }
  json WaitForEnd(const std::string& run, int timeout_s = 150) {
    json s;
    for (int i = 0; i < timeout_s * 5; ++i) {
      s = h_.Cli({"show", run}).json();
      if (s.is_object() && s.value("status", "running") != "running") return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  json WaitForState(const std::string& run, const std::string& state, int timeout_s = 120) {
    json s;
    for (int i = 0; i < timeout_s * 5; ++i) {
      s = h_.Cli({"show", run}).json();
      if (s.is_object() && (s.value("state", "") == state || s.value("status", "running") != "running")) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  // How the msprof flush wait ended, for the log (figures, not assertions).
  static void LogFlush(const json& m) {
    const json f = m.value("msprof_flush", json::object());
    std::cerr << "[flush] " << ::testing::UnitTest::GetInstance()->current_test_info()->name() << ": signal "
              << f.value("signal", "") << ", waited_ms " << f.value("waited_ms", -1) << ", polls "
              << f.value("polls", -1) << std::endl;
  }
  // The truth record of the instance that served on `port`.
  json TruthForPort(int port) {
    for (const auto& t : h_.SimTruthFiles())
      if (t.value("port", 0) == port) return t;
    return nullptr;
  }
  void ExpectMatchesTruth(const json& report, const json& truth) {
    ASSERT_TRUE(truth.is_object());
    ASSERT_EQ(report["devices"].size(), truth["per_device"].size());
    for (const auto& dev : report["devices"]) {
      const std::string id = std::to_string(dev["device_id"].get<int>());
      ASSERT_TRUE(truth["per_device"].contains(id)) << id;
      const json& comps = truth["per_device"][id]["components_mb"];
      for (const auto& [tk, rk] : kTruthKeys) {
        json c = Component(dev, rk);
        ASSERT_TRUE(c.is_object()) << rk;
        ASSERT_TRUE(c["value_mb"].is_number()) << rk << ": " << c.dump();
        EXPECT_NEAR(c["value_mb"].get<double>(), comps[tk].get<double>(), 1.0) << "device " << id << " " << rk;
      }
    }
  }

  // A standalone tp=2 memory-profile of the dense model on `port`, waited
  // for; its `show` JSON (null, with a test failure, when the CLI failed).
  json SubmitTp2AndWait(int port) {
    CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                          std::to_string(port), "--wait"},
                         200);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    json m = r.json();
    EXPECT_TRUE(m.is_object()) << r.out;
    if (!m.is_object()) return nullptr;
    runs_.push_back(m.value("run_id", ""));
    return m;
  }
  // A tp-2 run whose report is whole and matches the truth; its export record.
  json ExportOfAWholeRun() {
    const int port = FreePort();
    const json m = SubmitTp2AndWait(port);
    if (!m.is_object()) return json::object();
    EXPECT_EQ(m["status"], "ok");
    EXPECT_EQ(m["report"]["msprof"]["available"], true);
    ExpectMatchesTruth(m["report"], TruthForPort(port));
    EXPECT_EQ(m["msprof_export"]["status"], "ok") << m["msprof_export"].dump();
    return m["msprof_export"].is_object() ? m["msprof_export"] : json::object();
  }
  // How many tasks of each kind the last run scheduled (from its events).
  std::map<std::string, int> TaskKindsOfLastRun() {
    std::map<std::string, int> n;
    if (runs_.empty()) return n;
    json ev = h_.Cli({"events", runs_.back(), "--json"}).json();
    const json events = ev.is_array() ? ev : ev.value("events", json::array());
    for (const auto& e : events)
      if (e["type"] == "TaskScheduled") ++n[e["payload"]["kind"].get<std::string>()];
    return n;
  }
  // The activation peak came from the msprof series (cut on the target's
  // clock) and equals the truth; the npu-smi delta beside it shows the
  // activation only when the allocator kept it.
  void ExpectSeriesActivation(const json& dev, const json& truth, bool released) {
    const std::string id = std::to_string(dev["device_id"].get<int>());
    const json act = Component(dev, "activation_peak");
    ASSERT_TRUE(act.is_object());
    EXPECT_EQ(act["source"], "series") << act.dump();
    ASSERT_TRUE(act["value_mb"].is_number()) << act.dump();
    EXPECT_NEAR(act["value_mb"].get<double>(),
                truth["per_device"][id]["components_mb"]["activation_peak"].get<double>(), 1.0);
    EXPECT_EQ(act["evidence"][0]["clock"], "target") << act.dump();
    ASSERT_TRUE(act.contains("corroboration")) << act.dump();
    EXPECT_EQ(act["corroboration"][0]["source"], "npu_smi_delta");
    EXPECT_NEAR(act["corroboration"][0]["value_mb"].get<double>(),
                released ? 0.0 : act["value_mb"].get<double>(), 1.0);
    EXPECT_EQ(dev["hbm_used_phase"], "inference_peak");
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

TEST_F(MemoryE2E, StandaloneTp2DenseMatchesGroundTruthAndExports) {
  StartHarness();
  const int port = FreePort();
  json m = SubmitTp2AndWait(port);
  ASSERT_TRUE(m.is_object());
  const std::string run = m.value("run_id", "");
  EXPECT_EQ(m["status"], "ok");
  // No fixed window: msprof had exited with every PROF dir complete (end_info).
  LogFlush(m);
  EXPECT_EQ(m["msprof_flush"]["signal"], "end_info") << m["msprof_flush"].dump();
  EXPECT_EQ(m["service"]["status"], "stopped") << m["service"].dump();  // not the launch record's "starting"
  EXPECT_EQ(m["msprof_flush"]["flush_timed_out"], false);
  EXPECT_EQ(m["msprof_flush"]["min_wait_s"], 0);
  EXPECT_GE(m["msprof_flush"]["prof_dirs"].size(), 3u);  // the API server's and one per rank
  const json truth = TruthForPort(port);
  ExpectMatchesTruth(m["report"], truth);
  EXPECT_EQ(m["report"]["msprof"]["available"], true);
  for (const auto& dev : m["report"]["devices"]) {
    EXPECT_EQ(dev["msprof_scope"], "device");
    EXPECT_EQ(Component(dev, "weights")["source"], "vllm_log");
    EXPECT_EQ(Component(dev, "residual")["status"], "unattributed");
    // Retained activation: the series peak is the measurement, the snapshot delta agrees.
    ExpectSeriesActivation(dev, truth, /*released=*/false);
  }
  // safetensors per-device bytes = the true sharded bytes.
  EXPECT_NEAR(m["report"]["weights_breakdown"]["per_device_gib"].get<double>(),
              truth["weights"]["per_device_bytes"].get<double>() / (1 << 30), 0.001);
  const json cor = Component(m["report"]["devices"][0], "weights")["corroboration"][0];
  EXPECT_EQ(cor["source"], "safetensors");
  EXPECT_NEAR(cor["value_mb"].get<double>(), truth["weights"]["per_device_bytes"].get<double>() / (1 << 20), 0.01);
  // The reference scripts' manifest keys (docs/BEHAVIOUR.md#mem-manifest).
  for (const char* k : {"baseline_hbm", "after_ready_hbm", "after_infer_hbm", "msprof_csvs", "model_config", "tp", "dp", "mode"})
    EXPECT_TRUE(m.contains(k) && !m[k].is_null()) << k;
  EXPECT_TRUE(m["msprof_csvs"].contains("__prof_device_map__"));
  EXPECT_TRUE(h_.LiveServicePids().empty());

  // Report verb: json and text (zh, en).
  CliResult rj = h_.Cli({"report", run});
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  EXPECT_EQ(rj.json()["devices"].size(), 2u);
  CliResult rt = h_.Cli({"report", run, "--format", "text"});
  EXPECT_NE(rt.out.find("未归因残差"), std::string::npos) << rt.out;
  EXPECT_NE(rt.out.find("HCCL 缓冲"), std::string::npos);
  CliResult re = h_.Cli({"report", run, "--format", "text", "--lang", "en"});
  EXPECT_NE(re.out.find("Unattributed residual"), std::string::npos);

  // Export: the reference scripts' run directory (docs/BEHAVIOUR.md#mem-manifest).
  const std::string dir = h_.Dir() + "/export-" + run;
  CliResult ex = h_.Cli({"export", run, dir});
  ASSERT_EQ(ex.exit_code, 0) << ex.out << ex.err;
  for (const char* f : {"manifest.json", "baseline_npu_smi.txt", "after_ready_npu_smi.txt", "after_infer_npu_smi.txt",
                        "vllm_serve.log", "model_config.json", "weight_manifest.json", "report.txt", "report.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / f)) << f;
  json exported = json::parse(ReadAll(dir + "/manifest.json"), nullptr, false);
  ASSERT_TRUE(exported.is_object());
  int csvs = 0;
  for (const auto& [name, path] : exported["msprof_csvs"].items()) {
    if (name == "__prof_device_map__") continue;
    EXPECT_TRUE(fs::exists(fs::path(dir) / path.get<std::string>())) << path;
    EXPECT_GT(fs::file_size(fs::path(dir) / path.get<std::string>()), 100u);
    ++csvs;
  }
  EXPECT_GT(csvs, 0);

  // Offline inspect of the exported evidence gives the same numbers.
  CliResult iv = h_.CliRaw({"inspect", "vllm-log", dir + "/vllm_serve.log"});
  ASSERT_EQ(iv.exit_code, 0) << iv.err;
  EXPECT_NEAR(iv.json()["kv_cache_available_gib"].get<double>() * 1024,
              truth["per_device"]["0"]["components_mb"]["kv_cache"].get<double>(), 1.0);
  for (const auto& [name, path] : exported["msprof_csvs"].items()) {
    if (name.rfind("npu_module_mem", 0) != 0) continue;
    CliResult ic = h_.CliRaw({"inspect", "msprof-csv", dir + "/" + path.get<std::string>()});
    ASSERT_EQ(ic.exit_code, 0) << ic.err;
    EXPECT_EQ(ic.json()["kind"], "npu_module_mem");
  }
  CliResult is = h_.CliRaw({"inspect", "safetensors", model_, "--tp", "2"});
  ASSERT_EQ(is.exit_code, 0) << is.err;
  EXPECT_EQ(is.json()["per_device_bytes"].get<double>(), truth["weights"]["per_device_bytes"].get<double>());
}

// Released activation: the allocator gives the request's memory back before
// the after-inference snapshot, so npu-smi sees 0 MB; msprof's series saw the
// peak while the request ran, and the report takes it (and the residual at
// that peak) per device.
TEST_F(MemoryE2E, ReleasedActivationIsMeasuredOnTheSeries) {
  StartHarness({"--activation", "released"});
  const int port = FreePort();
  json m = SubmitTp2AndWait(port);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok");
  const json truth = TruthForPort(port);
  ASSERT_TRUE(truth.is_object());
  EXPECT_EQ(truth["activation_mode"], "released");
  ExpectMatchesTruth(m["report"], truth);
  for (const auto& dev : m["report"]["devices"]) ExpectSeriesActivation(dev, truth, /*released=*/true);
}

// Shared host: two standalone profiles at once on disjoint NPUs of one target,
// with the defaults (no --port, no --served-model-name): each picks its own
// free port and a per-run served name, so each report measures its own
// service and matches that service's truth.
TEST_F(MemoryE2E, TwoStandaloneProfilesAtOnceOnDisjointNpusEachMeasureTheirOwnService) {
  StartHarness();
  std::vector<std::string> runs;
  for (const char* devices : {"0,1", "2,3"}) {
    CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2",
                          "--devices", devices, "--flush-seconds", "1"});
    runs.push_back(Track(r));
    ASSERT_FALSE(runs.back().empty()) << r.out << r.err;
  }
  std::vector<json> manifests;
  for (const auto& run : runs) {
    json end = WaitForEnd(run, 200);
    ASSERT_EQ(end.value("status", ""), "ok") << end.dump();
    manifests.push_back(h_.Cli({"manifest", run}).json());
    ASSERT_TRUE(manifests.back().is_object());
  }
  const json& a = manifests[0];
  const json& b = manifests[1];
  EXPECT_EQ(a["devices"], json({0, 1}));
  EXPECT_EQ(b["devices"], json({2, 3}));
  EXPECT_EQ(a["served_model_name"], "npuprof-mem-" + runs[0]);
  EXPECT_EQ(b["served_model_name"], "npuprof-mem-" + runs[1]);
  ASSERT_TRUE(a["port"].is_number_integer() && b["port"].is_number_integer()) << a["port"] << b["port"];
  EXPECT_NE(a["port"], b["port"]);
  for (const json& m : manifests) {
    const json truth = TruthForPort(m["port"].get<int>());
    ASSERT_TRUE(truth.is_object()) << "no simulated service served on port " << m["port"];
    EXPECT_EQ(truth["served_model_name"], m["served_model_name"]);
    // The inference went to this run's own service.
    EXPECT_EQ(m["inference"].value("http_status", 0), 200) << m["inference"].dump();
    ExpectMatchesTruth(m["report"], truth);
  }
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(MemoryE2E, MsprofMissingFailsBeforeLaunch) {
  StartHarness({"--msprof-missing"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--wait"});
  Track(r);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json m = r.json();
  ASSERT_TRUE(m.is_object()) << r.out;
  EXPECT_EQ(m["status"], "failed");
  EXPECT_NE(m["error"].get<std::string>().find("msprof"), std::string::npos);
  EXPECT_NE(m["error"].get<std::string>().find("CANN"), std::string::npos);
  EXPECT_TRUE(m["service"].is_null());
  EXPECT_TRUE(h_.SimTruthFiles().empty());  // no service ever started
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(MemoryE2E, AttachWithMsprofWrapperContinuesAfterServeStops) {
  StartHarness();
  // The wrapper a serve run uses: written on the target by --install-wrapper.
  CliResult w = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--install-wrapper", "--wait"});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  const std::string wrap = w.json().value("wrap_script", "");
  ASSERT_FALSE(wrap.empty()) << w.out;
  // A saved npu-smi file as the baseline (taken before the service starts).
  CliResult probe = h_.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const std::string probe_run = probe.json().value("run_id", "");

  const int port = FreePort();
  CliResult s = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(port), "--wrap-script", wrap, "--wait"});
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  const std::string serve = s.json().value("run_id", "");
  runs_.push_back(serve);

  CliResult a = h_.Cli({"submit", "memory-profile", "--attach", serve, "--baseline-from", probe_run,
                        "--flush-seconds", "1"});
  const std::string mem = Track(a);
  ASSERT_FALSE(mem.empty()) << a.out << a.err;
  json st = WaitForState(mem, "awaiting_service_stop");
  ASSERT_EQ(st.value("state", ""), "awaiting_service_stop") << st.dump();
  EXPECT_FALSE(h_.LiveServicePids().empty());  // attach never stops the service

  CliResult stop = h_.Cli({"stop", serve});
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  // Under heavy load the simulated msprof sometimes outlives SIGINT+SIGTERM
  // (the serve run then stays "ready", reported to the lead); force it then.
  bool forced = false;
  if (WaitForEnd(serve, 60).value("status", "running") == "running") {
    forced = true;
    h_.Cli({"stop", serve, "--force"});
  }
  json end = WaitForEnd(mem);
  ASSERT_EQ(end.value("status", ""), "ok") << end.dump();

  json report = h_.Cli({"report", mem}).json();
  if (!forced) ExpectMatchesTruth(report, TruthForPort(port));
  EXPECT_EQ(report["mode"], "attach");
  EXPECT_EQ(Component(report["devices"][0], "fixed_overhead")["source"], "baseline_run");
}

TEST_F(MemoryE2E, AttachWithoutWrapperAndSavedNpuSmiBaseline) {
  StartHarness();
  // Saved `npu-smi info` text, as a user would keep it.
  const std::string saved = h_.Dir() + "/baseline.txt";
  const std::string cmd = ". '" + h_.SimRoot() + "/set_env.sh' && npu-smi info > '" + saved + "'";
  ASSERT_EQ(std::system(("bash -c \"" + cmd + "\"").c_str()), 0);
  const int port = FreePort();
  CliResult s = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(port), "--wait"});
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  const std::string serve = s.json().value("run_id", "");
  runs_.push_back(serve);
  CliResult a = h_.Cli({"submit", "memory-profile", "--attach", serve, "--baseline-from", saved});
  const std::string mem = Track(a);
  ASSERT_FALSE(mem.empty()) << a.out << a.err;
  json st = WaitForState(mem, "awaiting_service_stop");
  ASSERT_EQ(st.value("state", ""), "awaiting_service_stop") << st.dump();
  ASSERT_EQ(h_.Cli({"stop", serve}).exit_code, 0);
  json end = WaitForEnd(mem);
  ASSERT_EQ(end.value("status", ""), "ok") << end.dump();
  json report = h_.Cli({"report", mem}).json();
  EXPECT_EQ(report["msprof"]["status"], "not_wrapped");
  const json truth = TruthForPort(port);
  for (const auto& dev : report["devices"]) {
    const std::string id = std::to_string(dev["device_id"].get<int>());
    const json& tc = truth["per_device"][id]["components_mb"];
    EXPECT_NEAR(Component(dev, "fixed_overhead")["value_mb"].get<double>(), tc["fixed"].get<double>(), 1.0);
    EXPECT_EQ(Component(dev, "fixed_overhead")["source"], "baseline_file");
    EXPECT_TRUE(Component(dev, "hccl")["value_mb"].is_null());
    const json res = Component(dev, "residual");
    EXPECT_EQ(res["status"], "unattributed_msprof_missing");
    // Without msprof the residual holds exactly what msprof would have split out.
    const double expect = tc["residual"].get<double>() + tc["hccl"].get<double>() + tc["runtime"].get<double>() +
                          tc["slog"].get<double>() + tc["msprof_other"].get<double>();
    EXPECT_NEAR(res["value_mb"].get<double>(), expect, 1.0);
  }
  // Exported: the saved baseline text travels with the run.
  const std::string dir = h_.Dir() + "/export-attach";
  ASSERT_EQ(h_.Cli({"export", mem, dir}).exit_code, 0);
  EXPECT_EQ(ReadAll(dir + "/baseline_npu_smi.txt"), ReadAll(saved));
}


TEST_F(MemoryE2E, NeverReadyCollectsLogsAndStopsTheService) {
  StartHarness({"--fault", "crash_on_start=torch_npu"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--health-timeout", "20", "--wait"});
  Track(r);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json m = r.json();
  ASSERT_TRUE(m.is_object()) << r.out;
  EXPECT_EQ(m["status"], "failed");
  EXPECT_NE(m["error"].get<std::string>().find("torch_npu"), std::string::npos) << m["error"];
  EXPECT_TRUE(m["files"].contains("vllm_serve.log"));   // logs collected
  EXPECT_TRUE(m["summary"]["service"].is_object());
  EXPECT_TRUE(h_.LiveServicePids().empty());             // service stopped
  bool stop_scheduled = false;
  json ev = h_.Cli({"events", runs_.back(), "--json"}).json();
  const json events = ev.is_array() ? ev : ev.value("events", json::array());
  for (const auto& e : events)
    if (e["type"] == "TaskScheduled" && e["payload"]["kind"] == "service.stop") stop_scheduled = true;
  EXPECT_TRUE(stop_scheduled);
}

// msprof's own export at the service's exit is off here, so that the run's
// `msprof --export` is needed, and it hangs.
TEST_F(MemoryE2E, ExportTimeoutReportsWhatExists) {
  StartHarness({"--fault", "export_hang", "--set", "msprof_auto_export=false"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--flush-seconds", "1", "--export-timeout", "3", "--wait"},
                       200);
  Track(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json m = r.json();
  EXPECT_EQ(m["report"]["msprof"]["status"], "export_timeout");
  bool noted = false;
  for (const auto& n : m["report"]["notes"]) noted = noted || n.get<std::string>().find("timed out") != std::string::npos;
  EXPECT_TRUE(noted);
  // Nothing was exported: the report says the msprof series is missing
  // rather than failing the run.
  EXPECT_EQ(m["report"]["msprof"]["available"], false) << m["report"]["msprof"].dump();
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

// msprof in application mode exports every PROF dir itself when the service
// exits (2 s here), and the stop waits for msprof to end: the run uses that
// export and does not run `msprof --export` (another 2 s) on the same data.
TEST_F(MemoryE2E, MsprofsOwnExportAtTheServicesExitIsNotDoneTwice) {
  StartHarness({"--export-delay", "2", "--auto-export-delay", "2"});
  const json ex = ExportOfAWholeRun();
  EXPECT_EQ(ex["already_exported"], true) << ex.dump();
  EXPECT_GE(ex.value("prof_dirs", 0), 2) << "the ranks' PROF dirs, each checked: " << ex.dump();
  EXPECT_NE(ex.value("note", "").find("not exported again"), std::string::npos) << ex.dump();
  EXPECT_TRUE(h_.InvocationLogs(".sim_export_invocations").empty()) << "msprof --export ran";
  // The flush wait's one command also found that export and read the CSVs
  // (the report above matches the simulator's truth): neither the export
  // nor the collection ran as a task of its own (issue 38); and the wait
  // itself ran in the stop's task, after it found the service gone
  // (ServiceStop.then_flush): no task of its own either.
  const auto kinds = TaskKindsOfLastRun();
  EXPECT_EQ(kinds.count("memory.wait_flush"), 0u) << "the stop did not answer for the flush wait";
  EXPECT_EQ(kinds.count("service.stop") ? kinds.at("service.stop") : 0, 1);
  EXPECT_EQ(kinds.count("memory.export"), 0u) << "memory.export was scheduled";
  EXPECT_EQ(kinds.count("memory.collect_csvs"), 0u) << "memory.collect_csvs was scheduled";
}

// Without msprof's own export (or with it incomplete) the run exports once.
TEST_F(MemoryE2E, WithoutMsprofsOwnExportTheRunExportsOnce) {
  StartHarness({"--set", "msprof_auto_export=false"});
  const json ex = ExportOfAWholeRun();
  EXPECT_NE(ex.value("already_exported", false), true) << ex.dump();
  const auto exported = h_.InvocationLogs(".sim_export_invocations");
  EXPECT_EQ(exported.size(), 1u);
  for (const auto& [dir, n] : exported) EXPECT_EQ(n, 1u) << "msprof exports of " << dir;
  // Nothing exported at the flush: the export and the collection are tasks.
  const auto kinds = TaskKindsOfLastRun();
  EXPECT_EQ(kinds.count("memory.export") ? kinds.at("memory.export") : 0, 1);
  EXPECT_EQ(kinds.count("memory.collect_csvs") ? kinds.at("memory.collect_csvs") : 0, 1);
}


// A slow msprof flush (2 s after the service exits): msprof is a process of
// the service's group, so the stop already waits for it; the flush wait then
// finds every end_info and the completion lines, and the report is whole.
TEST_F(MemoryE2E, SlowMsprofFlushEndsOnItsEndInfo) {
  StartHarness({"--msprof-flush-delay", "2"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--wait"},
                       200);
  Track(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json m = r.json();
  EXPECT_EQ(m["status"], "ok");
  LogFlush(m);
  EXPECT_EQ(m["msprof_flush"]["signal"], "end_info") << m["msprof_flush"].dump();
  EXPECT_EQ(m["msprof_flush"]["msprof_alive"], false);
  EXPECT_GE(m["msprof_flush"]["complete_lines"].get<int>(), 2);  // one per PROF dir with device data
  for (const auto& p : m["msprof_flush"]["prof_dirs"]) EXPECT_EQ(p["complete"], true) << p.dump();
  EXPECT_EQ(m["report"]["msprof"]["available"], true);
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

// msprof dies half-way through its flush: its end_info never comes. The wait
// sees msprof gone with incomplete PROF dirs and ends at once (nothing more
// can come), records it, and the export works from the raw data.
TEST_F(MemoryE2E, MsprofFlushNeverCompletesIsRecordedAndTheExportJudges) {
  StartHarness({"--fault", "msprof_flush_crash"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--flush-timeout", "60", "--wait"},
                       200);
  Track(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json m = r.json();
  LogFlush(m);
  EXPECT_EQ(m["msprof_flush"]["signal"], "msprof_exited_incomplete") << m["msprof_flush"].dump();
  EXPECT_EQ(m["msprof_flush"]["flush_timed_out"], false);
  EXPECT_EQ(m["msprof_flush"]["complete_lines"], 0);
  bool incomplete = false;
  for (const auto& p : m["msprof_flush"]["prof_dirs"]) incomplete = incomplete || p["complete"] == false;
  EXPECT_TRUE(incomplete);
  EXPECT_EQ(m["msprof_export"]["status"], "ok");  // --export=on of the raw data still works
  EXPECT_EQ(m["report"]["msprof"]["available"], true);
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

// msprof never finishes its flush and ignores SIGINT and SIGTERM (the
// simulator's msprof_flush_hang). msprof is a process of the service's
// group, so it is service.stop that meets it: after SIGINT and SIGTERM with
// their grace the group is still there, and the run must say so rather than
// wait for ever or report a clean stop.
TEST_F(MemoryE2E, MsprofFlushHangIsCaughtByTheStop) {
  StartHarness({"--fault", "msprof_flush_hang"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(FreePort()), "--flush-timeout", "3", "--stop-grace", "3", "--wait"},
                       200);
  Track(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json m = r.json();
  LogFlush(m);
  EXPECT_EQ(m["status"], "ok");
  // The graceful stop: SIGINT and SIGTERM, both waited out, still running.
  // The escalation went straight to SIGKILL.
  int still_running = 0;
  std::string forced_task;
  json forced_result;
  for (const auto& e : h_.Cli({"events", m.value("run_id", ""), "--json"}).json().value("events", json::array())) {
    const json& p = e["payload"];
    if (e.value("type", "") == "TaskFailed" && p.value("error_kind", "") == "still_running") ++still_running;
    if (e.value("type", "") == "TaskScheduled" && p.value("kind", "") == "service.stop" &&
        p["payload"].value("kill_at_once", false)) {
      EXPECT_TRUE(p["payload"].value("force", false));
      forced_task = p.value("task_id", "");
    }
    if (e.value("type", "") == "TaskSucceeded" && !forced_task.empty() && p.value("task_id", "") == forced_task)
      forced_result = p["result"];
  }
  EXPECT_EQ(still_running, 1) << "one graceful stop left msprof running";
  ASSERT_FALSE(forced_task.empty()) << "the escalation asks for SIGKILL at once";
  EXPECT_EQ(forced_result["signals"], json::array({"SIGKILL"})) << forced_result.dump();
  // msprof died with its PROF dirs incomplete, which the flush wait records
  // at once (no timeout); the export judges the raw data.
  EXPECT_EQ(m["msprof_flush"]["signal"], "msprof_exited_incomplete") << m["msprof_flush"].dump();
  EXPECT_EQ(m["msprof_flush"]["flush_timed_out"], false);
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(MemoryE2E, MoeTp4Dp2ExpertParallelMatchesGroundTruth) {
  StartHarness();
  const std::string moe = h_.MakeModel({"--kind", "moe"});
  ASSERT_FALSE(moe.empty());
  const int port = FreePort();
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", moe, "--tp", "4", "--dp", "2",
                        "--enable-expert-parallel", "--port", std::to_string(port), "--flush-seconds", "1", "--wait"},
                       220);
  Track(r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json m = r.json();
  ASSERT_EQ(m["report"]["devices"].size(), 8u);
  ExpectMatchesTruth(m["report"], TruthForPort(port));
  EXPECT_EQ(m["report"]["weights_breakdown"]["ep"], 8);
}

TEST_F(MemoryE2E, ServerKilledDuringExportReattaches) {
  StartHarness({"--export-delay", "6", "--set", "msprof_auto_export=false"});
  const int port = FreePort();
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2", "--port",
                        std::to_string(port), "--flush-seconds", "1"});
  const std::string run = Track(r);
  ASSERT_FALSE(run.empty()) << r.out << r.err;
  json st = WaitForState(run, "export");
  ASSERT_EQ(st.value("state", ""), "export") << st.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the detached export is running
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());
  json end = WaitForEnd(run);
  ASSERT_EQ(end.value("status", ""), "ok") << end.dump();
  json m = h_.Cli({"manifest", run}).json();
  EXPECT_EQ(m["msprof_export"]["status"], "ok");
  EXPECT_EQ(m["msprof_export"]["adopted"], true);  // the second attempt waited for the first export
  // A graceful stop keeps msprof's raw data; when the simulator's msprof
  // outlived SIGINT+SIGTERM the run escalated to SIGKILL (no raw data then).
  if (m["stop_escalated"].is_null()) ExpectMatchesTruth(m["report"], TruthForPort(port));
}

}  // namespace
}  // namespace npuprof::testing
