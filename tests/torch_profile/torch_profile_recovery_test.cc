// torch-profile crash recovery end to end (issue 4, "What must be shown"):
// the server is SIGKILLed during the wave and again while analyse() runs on
// the target; after each restart the run resumes, completes, and its manifest
// equals the one of an uninterrupted run apart from times, latencies and ids;
// analyse() ran exactly once per rank (counted by the simulator in
// <rank dir>/.sim_analyse_invocations, see tests/sim/README.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kAnalyseTask = "torch_profile.analyse_rank";
constexpr const char* kInvocationLog = ".sim_analyse_invocations";

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<std::string> RankDirs(const std::string& profile_root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(profile_root, ec)) return out;
  for (const auto& e : fs::directory_iterator(profile_root, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.size() > 10 && name.ends_with("_ascend_pt")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Files named <dir>/.npuprof_analyse.*.<suffix> (the worker's marker files).
int MarkerCount(const std::string& dir, const std::string& suffix) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".npuprof_analyse.") && name.ends_with("." + suffix)) ++n;
  }
  return n;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

// The manifest with everything that legitimately differs between two runs of
// the same spec removed or replaced by a placeholder. Exactly:
//  dropped:  run_id, session_id (= run id), started_at/completed_at/failed_at
//            (times); every latency_ms; service_result.pid/.pgid,
//            service_result.ready.{pid, ready_after_ms, rounds (poll count)},
//            stop_result.pid (pids; timing-dependent poll counts);
//            benchmark_wall_ms (the wave's wall time);
//            benchmark_results[].body and followup_result.body (generated
//            text, ids, created times); per rank analyse.{marker (task id),
//            launch, reattached, log_tail (times, pids)} (which attempt ran
//            it); per rank outputs.*.{size, data_rows_checked, event_count}
//            and the kernel summary's figures (kept: whether it was built)
//            (trace volume: a re-dispatched wave re-sends its requests into
//            the profile window, and timestamps differ); flush.{waited_ms,
//            polls} and flush.dirs[].size (how long the flush wait polled;
//            the rank dirs' volume, as above).
//  replaced: the run id inside strings -> <RUN>; the service's runtime dir ->
//            <RUNTIME>; the harness temp dir -> <TMP>; each rank dir name
//            (<host>_<rank pid>_<timestamp>_ascend_pt) -> <RANK i>_ascend_pt;
//            the service port (service_result.port, .ready.port and the value
//            after --port in serve_argv, the manifest's and the result's) -> 0.
//  kept:     everything else: spec fields, serve_args, serve_argv modulo the
//            port and paths, devices, start/stop_profile action/ok/status,
//            benchmark and follow-up index/ok/status, workload_status (all
//            gate fields and counts), stop_result flags and signals,
//            remote_profile_root (normalised), per rank path, outputs
//            exists/valid/columns, analysis_status, analyse exit_code and
//            finished, rank_count, expected_ranks, analysis_status, status,
//            error, step_errors, stop_result.stderr_tail (the simulator's
//            start-up bars are deterministic; a traceback would show here).
json Normalise(json m, const std::string& tmp_dir) {
  const std::string run = m.value("run_id", "");
  const std::string runtime =
      m["service_result"].is_object() ? m["service_result"].value("runtime_dir", "") : std::string();
  for (const char* k : {"run_id", "session_id", "started_at", "completed_at", "failed_at"}) m.erase(k);
  // The target's free memory and disk move between two runs (and the reason quotes them).
  for (auto& l : m["analyse_limits"])
    for (const char* k : {"reason", "warning", "mem_available_bytes", "disk_free_bytes", "largest_rank_bytes",
                          "total_rank_bytes"})
      l.erase(k);
  for (const char* k : {"start_profile", "stop_profile", "followup_result"})
    if (m[k].is_object()) {
      m[k].erase("latency_ms");
      m[k].erase("body");
    }
  for (auto& r : m["benchmark_results"]) {
    r.erase("latency_ms");
    r.erase("body");
  }
  json& svc = m["service_result"];
  if (svc.is_object()) {
    svc.erase("pid");
    svc.erase("pgid");
    if (svc.contains("port")) svc["port"] = 0;
    if (svc["ready"].is_object()) {
      // seen_by: whether the start-up line or a plain probe round saw readiness (timing)
      for (const char* k : {"pid", "ready_after_ms", "rounds", "seen_by"}) svc["ready"].erase(k);
      if (svc["ready"].contains("port")) svc["ready"]["port"] = 0;
    }
  }
  for (json* argv : {svc.is_object() && svc.contains("serve_argv") ? &svc["serve_argv"] : nullptr,
                     m.contains("serve_argv") ? &m["serve_argv"] : nullptr}) {
    if (argv == nullptr || !argv->is_array()) continue;
    for (size_t i = 0; i + 1 < argv->size(); ++i)
      if ((*argv)[i] == "--port") (*argv)[i + 1] = "0";
  }
  if (m["stop_result"].is_object()) m["stop_result"].erase("pid");
  m.erase("benchmark_wall_ms");  // timing
  if (m["flush"].is_object()) {
    for (const char* k : {"waited_ms", "polls"}) m["flush"].erase(k);
    for (auto& d : m["flush"]["dirs"]) d.erase("size");
  }
  std::vector<std::pair<std::string, std::string>> rank_names;
  int i = 0;
  for (auto& d : m["remote_profile_dirs"]) {
    if (d["analyse"].is_object())
      for (const char* k : {"marker", "launch", "reattached", "log_tail"}) d["analyse"].erase(k);
    for (auto& [name, out] : d["outputs"].items())
      for (const char* k : {"size", "data_rows_checked", "event_count"}) out.erase(k);
    if (d.contains("kernel_summary"))  // its figures are trace volume too: kept as "built without error"
      d["kernel_summary"] = d["kernel_summary"].is_object() && !d["kernel_summary"].contains("error");
    const std::string base = fs::path(d.value("path", "")).filename().string();
    if (!base.empty()) rank_names.emplace_back(base, "<RANK " + std::to_string(i++) + ">_ascend_pt");
  }
  std::string text = m.dump();
  for (const auto& [from, to] : rank_names) ReplaceAll(text, from, to);
  ReplaceAll(text, runtime, "<RUNTIME>");
  ReplaceAll(text, run, "<RUN>");
  ReplaceAll(text, tmp_dir, "<TMP>");
  return json::parse(text);
}

class TorchProfileRecovery : public ::testing::Test {
 protected:
  std::vector<std::string> Args(const std::string& tag) {
    return {"submit", "torch-profile", "--machine", "sim1", "--model", model_, "--served-model-name", "qwen",
            "--tp", "2", "--tag", tag, "--mode", "enforce_eager", "--request-kind", "text",
            "--benchmark-output-tokens", "120", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
            "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
            "--profile-control-timeout", "30", "--request-timeout", "30"};
  }

  json Show(const std::string& run) { return h_.Cli({"show", run}).json(); }

  std::vector<json> Events(const std::string& run) {
    json ev = h_.Cli({"events", run, "--json"}).json();
    std::vector<json> out;
    if (ev.is_object() && ev["events"].is_array())
      for (const auto& e : ev["events"]) out.push_back(e);
    return out;
  }

  // The analyse tasks the run has scheduled (TaskScheduled events).
  int AnalyseTasksScheduled(const std::string& run) {
    int n = 0;
    for (const auto& e : Events(run))
      if (e.value("type", "") == "TaskScheduled" && e["payload"].is_object() &&
          e["payload"].value("kind", "") == kAnalyseTask)
        ++n;
    return n;
  }

  // The simulator's truth of the instance whose API server has this pid.
  json TruthOf(int64_t main_pid) {
    for (const auto& t : h_.SimTruthFiles())
      if (t.value("main_pid", int64_t{0}) == main_pid) return t;
    return nullptr;
  }

  void WaitForEnd(const std::string& run) {
    const auto deadline = Clock::now() + std::chrono::seconds(90);
    while (Clock::now() < deadline) {
      const json s = Show(run);
      const std::string st = s.is_object() ? s.value("state", "") : "";
      if (st == "completed" || st == "failed" || st == "cancelled") return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "run " << run << " did not end";
  }

  NpuprofHarness h_;
  std::string model_;
};

TEST_F(TorchProfileRecovery, ServerKilledDuringWaveAndDuringAnalyseMatchesUninterruptedRun) {
  // Each wave request takes ~1.2 s (120 tokens x 0.01 s), analyse() 4 s per rank dir.
  ASSERT_TRUE(h_.Start({"--set", "delays.token=0.01", "--set", "delays.analyse=4"}, 2).ok());
  model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});

  // 1. The uninterrupted reference run.
  auto a = Args("rec");
  a.push_back("--wait");
  CliResult ref = h_.Cli(a, 170);
  ASSERT_EQ(ref.exit_code, 0) << ref.err << ref.out;
  const json ref_m = ref.json();
  ASSERT_TRUE(ref_m.is_object()) << ref.out;
  ASSERT_EQ(ref_m["status"], "ok") << ref_m.dump(2);
  ASSERT_EQ(ref_m["remote_profile_dirs"].size(), 2u);
  for (const auto& d : ref_m["remote_profile_dirs"]) {
    EXPECT_EQ(d["analyse"]["reattached"], false) << d.dump();
    EXPECT_EQ(Lines(d.value("path", "") + "/" + kInvocationLog).size(), 1u) << d.dump();
  }
  EXPECT_TRUE(h_.LiveServicePids().empty());

  // 2. The interrupted run: same spec.
  CliResult sub = h_.Cli(Args("rec"));
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string run = sub.json()["run_id"];

  // 2a. SIGKILL while the wave is in the service (state workload, first request arrived).
  bool in_wave = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline && !in_wave;) {
    const json s = Show(run);
    const std::string state = s.value("state", "");
    if (state == "completed" || state == "failed" || state == "cancelled") break;
    if (state == "workload" && s["service"].is_object() && s["service"]["pid"].is_number_integer()) {
      const json truth = TruthOf(s["service"]["pid"].get<int64_t>());
      in_wave = truth.is_object() && truth["first_request_at"].is_number();
    }
    if (!in_wave) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(in_wave) << Show(run).dump(2);
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());

  // 2b. SIGKILL while analyse() runs on the target: state analysing, both
  // analyse tasks scheduled, the simulator has seen both invocations start.
  const json summary = Show(run);
  ASSERT_TRUE(summary["service"].is_object()) << summary.dump(2);
  const std::string runtime = summary["service"].value("runtime_dir", "");
  const std::string profile_root = runtime + "/vllm_profile";
  bool in_analyse = false;
  std::vector<std::string> dirs;
  for (auto deadline = Clock::now() + std::chrono::seconds(60); Clock::now() < deadline && !in_analyse;) {
    const json s = Show(run);
    const std::string state = s.value("state", "");
    if (state == "completed" || state == "failed" || state == "cancelled") break;
    if (state == "analysing" && AnalyseTasksScheduled(run) == 2) {
      dirs = RankDirs(profile_root);
      in_analyse = dirs.size() == 2 && std::all_of(dirs.begin(), dirs.end(), [](const std::string& d) {
                     return !Lines(d + "/" + kInvocationLog).empty();
                   });
    }
    if (!in_analyse) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(in_analyse) << Show(run).dump(2);
  // Sanity: analyse() has not finished anywhere yet, so the kill lands mid-analyse.
  for (const auto& d : dirs) EXPECT_EQ(MarkerCount(d, "rc"), 0) << d;
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());

  // 3. The run completes.
  WaitForEnd(run);
  const json m = h_.Cli({"manifest", run}).json();
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["status"], "ok") << m.dump(2);
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["rank_count"], 2);

  // The run really was recovered twice and re-dispatched work each time.
  int recovered = 0, redispatched_analyse = 0;
  std::set<std::string> analyse_ids;
  for (const auto& e : Events(run)) {
    const std::string type = e.value("type", "");
    if (type == "RunRecovered") ++recovered;
    if (type == "TaskScheduled" && e["payload"].value("kind", "") == kAnalyseTask)
      analyse_ids.insert(e["payload"].value("task_id", ""));
    if (type == "TaskRedispatched" && analyse_ids.count(e["payload"].value("task_id", ""))) ++redispatched_analyse;
  }
  EXPECT_EQ(recovered, 2);
  EXPECT_EQ(analyse_ids.size(), 2u);
  EXPECT_EQ(redispatched_analyse, 2);

  // The manifest equals the uninterrupted one after normalisation.
  const json got = Normalise(m, h_.Dir());
  const json want = Normalise(ref_m, h_.Dir());
  EXPECT_EQ(got, want) << "patch (reference -> recovered): " << json::diff(want, got).dump(2);

  // analyse() ran exactly once per rank; the re-dispatched attempts re-attached.
  ASSERT_EQ(m["remote_profile_dirs"].size(), 2u);
  for (const auto& d : m["remote_profile_dirs"]) {
    const std::string dir = d.value("path", "");
    EXPECT_NE(std::find(dirs.begin(), dirs.end(), dir), dirs.end()) << dir;
    EXPECT_EQ(Lines(dir + "/" + kInvocationLog).size(), 1u) << dir;
    EXPECT_EQ(MarkerCount(dir, "rc"), 1) << dir;
    EXPECT_EQ(d["analyse"]["reattached"], true) << d.dump();
    EXPECT_EQ(d["analyse"]["exit_code"], 0) << d.dump();
  }

  // Nothing left running on the target; the event log replays.
  EXPECT_TRUE(h_.LiveServicePids().empty());
  const std::vector<pid_t> left = h_.TargetProcessesAfter(10);
  EXPECT_TRUE(left.empty()) << left.size() << " target process(es) still running, first pid " << left[0];
  CliResult verify = h_.Cli({"verify", run});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  CliResult verify_ref = h_.Cli({"verify", ref_m["run_id"]});
  EXPECT_EQ(verify_ref.exit_code, 0) << verify_ref.out << verify_ref.err;
}

}  // namespace
}  // namespace npuprof::testing
