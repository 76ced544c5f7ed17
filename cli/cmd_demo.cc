// `npuprof demo`: the whole product on this machine. Starts a real loopback
// sshd, a simulated Ascend target (tests/sim), an npuprof server with local
// workers, registers the target as machine "sim1", then drives every run kind
// this build has through the same `npuprof` verbs a user types, printing
// each command and its result. Everything it started is stopped at the end;
// the directory with the store, exports and reports is kept (--clean removes it).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/demo_story.h"
#include "common/terminal_text.h"
#include "statemachine/engine.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::cli {

namespace {

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "npuprof";
  buf[n] = 0;
  return buf;
}

struct Demo {
  testing::NpuprofHarness h;
  json summary = json::object();
  bool ok = true;

  int steps = 0;

  // Runs one `npuprof` verb: the title, the command and a few lines of what
  // it found go to the terminal; its whole output to a file in steps/.
  testing::CliResult Step(const std::string& title, StoryView view, const std::vector<std::string>& args,
                          int timeout_s = 300) {
    ++steps;
    std::cerr << fmt::format("\n== {}. {}\n$ npuprof", steps, title);
    for (const auto& a : args) std::cerr << ' ' << a;
    std::cerr << std::endl;
    testing::CliResult r = h.Cli(args, timeout_s);
    const std::string file = fmt::format("{}/steps/{:02}-{}.txt", h.Dir(), steps, args.empty() ? "npuprof" : args[0]);
    std::error_code ec;
    std::filesystem::create_directories(h.Dir() + "/steps", ec);
    std::ofstream(file) << "$ npuprof" << [&] {
      std::string cmd;
      for (const auto& a : args) cmd += ' ' + a;
      return cmd;
    }() << "\n(exit " << r.exit_code << ")\n\n-- stdout\n" << r.out << "\n-- stderr\n" << r.err;
    // The story reads the step's JSON back: its strings are text from the target again.
    for (const auto& line : StoryLines(view, r.out)) std::cerr << "  " << TerminalLine(line) << '\n';
    if (r.exit_code != 0) {
      const auto err = StoryLines(StoryView::kText, r.err, 12);
      if (err.empty()) std::cerr << fmt::format("  exit {}, with nothing on stderr\n", r.exit_code);
      else std::cerr << fmt::format("  exit {}; the end of its stderr:\n", r.exit_code);
      for (const auto& line : err) std::cerr << "  | " << TerminalLine(line) << '\n';
    }
    std::cerr << "  (all of it: " << file << ")" << std::endl;
    return r;
  }

  void Expect(const testing::CliResult& r, int code, const std::string& what) {
    if (r.exit_code != code) {
      ok = false;
      std::cerr << "demo: " << what << " exited " << r.exit_code << ", expected " << code << std::endl;
    }
  }
};

void RunDemo(bool clean) {
  setenv("NPUPROF_BIN", SelfExe().c_str(), 1);
  if (!clean) setenv("NPUPROF_KEEP_TEST_DIR", "1", 1);
  Demo d;
  std::cerr << "npuprof demo: starting a loopback sshd, a simulated 8-NPU Ascend 910B3 target "
               "(device 3 busy with another process) and an npuprof server..."
            << std::endl;
  Status st = d.h.Start({"--layout", "910B3", "--devices", "8", "--busy", "3:proc"}, 2);
  if (!st.ok()) return Fail(2, "demo could not start its local target: " + st.ToString());
  std::cerr << "data dir: " << d.h.DataDir() << "\nsimulated target: " << d.h.SimRoot() << std::endl;
  d.summary["data_dir"] = d.h.DataDir();
  d.summary["target"] = d.h.SimRoot();

  d.Step("The machine inventory (kept as events)", StoryView::kMachines, {"machine", "list"});
  auto check = d.Step("Check the machine: host key, uname, Ascend tools", StoryView::kCheck, {"machine", "check", "sim1"});
  d.Expect(check, 0, "machine check");

  auto probe = d.Step("Probe the NPUs (npu-smi info, kept as evidence)", StoryView::kProbe, {"submit", "probe", "--machine", "sim1", "--wait"});
  d.Expect(probe, 0, "probe");
  d.summary["probe_run"] = probe.json().value("run_id", "");

  const auto& kinds = sm::DefaultKinds();
  if (kinds.Find("serve")) {
    const std::string model = d.h.MakeModel({"--kind", "dense"});
    auto serve = d.Step("Start a vLLM service on two free NPUs (serve run kind)", StoryView::kService,
                        {"submit", "serve", "--machine", "sim1", "--model", model, "--served-model-name", "demo",
                         "--tp", "2", "--wait"});
    d.Expect(serve, 0, "serve");
    const std::string run = serve.json().value("run_id", "");
    d.summary["serve_run"] = run;
    // A second service on the same NPUs: it waits queued for the device lease.
    std::string devices;
    const sm::json sj = serve.json();
    if (sj.is_object() && sj.contains("service"))
      for (const auto& dev : sj["service"].value("devices", sm::json::array()))
        devices += (devices.empty() ? "" : ",") + dev.dump();
    std::string queued;
    if (!run.empty() && !devices.empty()) {
      auto second = d.Step("Submit a second service on the same NPUs (" + devices + "): it queues for the lease", StoryView::kSubmitted,
                           {"submit", "serve", "--machine", "sim1", "--model", model, "--served-model-name", "demo2",
                            "--tp", "2", "--devices", devices});
      d.Expect(second, 0, "second serve");
      queued = second.json().value("run_id", "");
      d.Step("Runs: the queued one says what it waits for", StoryView::kText, {"runs"});
    }
    if (!run.empty()) {
      auto stop = d.Step("Stop the first service (its NPUs are released)", StoryView::kStopped, {"stop", run, "--wait"});
      d.Expect(stop, 0, "stop");
    }
    if (!queued.empty()) {
      for (int i = 0; i < 600; ++i) {
        const sm::json s = d.h.Cli({"show", queued}).json();
        if (!s.is_object() || s.value("state", "") == "ready" || s.value("status", "running") != "running") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      auto show = d.Step("The queued service got the NPUs and is ready", StoryView::kService, {"show", queued});
      d.Expect(show, 0, "show queued");
      if (show.json().value("state", "") != "ready") {
        std::cerr << "demo: the queued service did not become ready" << std::endl;
        d.ok = false;
      }
      auto stop2 = d.Step("Stop it too", StoryView::kStopped, {"stop", queued, "--wait"});
      d.Expect(stop2, 0, "stop queued");
      d.summary["queued_serve_run"] = queued;
    }
  }
  if (kinds.Find("torch-profile")) {
    const std::string model = d.h.MakeModel({"--kind", "dense"});
    auto tp = d.Step("Torch-profiler collection: profile window, workload wave, analyse() per rank, gates", StoryView::kTorch,
                     {"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "demo",
                      "--tp", "2", "--tag", "demo", "--mode", "enforce_eager", "--request-kind", "text",
                      "--benchmark-output-tokens", "16", "--benchmark-total-requests", "6",
                      "--benchmark-concurrency", "3", "--prompt-tokens", "200", "--wait"},
                     600);
    d.Expect(tp, 0, "torch-profile");
    const std::string run = tp.json().value("session_id", tp.json().value("run_id", ""));
    if (!run.empty()) {
      const std::string out = d.h.Dir() + "/exports/torch-profile";
      auto ex = d.Step("Export the manifest for the downstream analysis tool", StoryView::kFiles, {"export", run, out});
      d.Expect(ex, 0, "export torch-profile");
      d.summary["torch_profile_run"] = run;
      d.summary["torch_profile_manifest"] = out + "/manifest.json";
      const std::string html = out + "/report.html";
      auto rep = d.Step("The torch-profile report as one self-contained HTML page (open it in a browser)", StoryView::kFiles,
                        {"report", run, "--format", "html", "--lang", "en", "-o", html});
      d.Expect(rep, 0, "report --format html (torch-profile)");
      d.summary["torch_profile_report_html"] = html;
    }
  }
  if (kinds.Find("memory-profile")) {
    const std::string model = d.h.MakeModel({"--kind", "dense"});
    auto mem = d.Step("HBM memory profiling under msprof: baseline, after ready, after inference, export, attribution", StoryView::kMemory,
                      {"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "2",
                       "--wait"},
                      600);
    d.Expect(mem, 0, "memory-profile");
    std::string run = mem.json().value("run_id", "");
    if (run.empty()) run = mem.json().value("session_id", "");
    if (!run.empty()) {
      auto text = d.Step("The per-device HBM report (text)", StoryView::kReportText, {"report", run, "--format", "text", "--lang", "en"});
      d.Expect(text, 0, "report");
      const std::string out = d.h.Dir() + "/exports/memory-profile";
      auto ex = d.Step("Export the run directory (manifest, npu-smi snapshots, logs, msprof CSVs, report)", StoryView::kFiles,
                       {"export", run, out});
      d.Expect(ex, 0, "export memory-profile");
      d.summary["memory_profile_run"] = run;
      d.summary["memory_profile_export"] = out;
      d.summary["memory_profile_report_json"] = out + "/report.json";
      const std::string html = out + "/report.html";
      auto rep = d.Step("The HBM report as one self-contained HTML page: per-device bars, HBM over time, evidence", StoryView::kFiles,
                        {"report", run, "--format", "html", "--lang", "en", "-o", html});
      d.Expect(rep, 0, "report --format html (memory-profile)");
      d.summary["memory_profile_report_html"] = html;
      const std::string trace = out + "/trace.json";
      auto tr = d.Step("The run as a Chrome trace (open it at https://ui.perfetto.dev or chrome://tracing)", StoryView::kFiles,
                       {"trace", run, "-o", trace});
      d.Expect(tr, 0, "trace");
      d.summary["memory_profile_trace"] = trace;
      // The comparative question: what does more gpu-memory-utilization buy?
      // A sweep runs one memory profile per grid point (queued for the same
      // NPUs, one after the other); its report is the compare of the points.
      auto sweep = d.Step("A sweep: the same memory profile at --gpu-memory-utilization 0.85 and 0.9, one run per "
                          "point (the NPUs are leased to one point after the other)",
                          StoryView::kSweep,
                          {"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model, "--tp",
                           "2", "--grid", "gpu-memory-utilization=0.85,0.9", "--wait"},
                          900);
      d.Expect(sweep, 0, "sweep (memory-profile)");
      const std::string sweep_run = sweep.json().value("run_id", "");
      if (!sweep_run.empty()) {
        d.summary["sweep_run"] = sweep_run;
        auto cmp = d.Step("The sweep's report: the compare of its points (configuration differences, each HBM "
                          "component with its delta)",
                          StoryView::kCompareText, {"report", sweep_run, "--format", "text", "--lang", "en"});
        d.Expect(cmp, 0, "report SWEEP");
        const std::string cmp_html = out + "/compare.html";
        auto cmph = d.Step("The compare as one HTML page (per device: both points, the deltas, each value's evidence)",
                           StoryView::kFiles,
                           {"report", sweep_run, "--format", "html", "--lang", "en", "-o", cmp_html});
        d.Expect(cmph, 0, "report SWEEP --format html");
        d.summary["memory_profile_compare_html"] = cmp_html;
      }
      // Diagnostics with a remedy: on NPU 3, which another user's process
      // holds, a profile at utilization 0.5 fails (vLLM counts that HBM and
      // logs a negative KV cache); advise names the process and the largest
      // utilization that fits (docs/ADVISE.md).
      auto neg = d.Step("memory-profile on NPU 3 (another user's process holds 30000 MB) at "
                        "--gpu-memory-utilization 0.5: vLLM's KV cache would be negative, it refuses to start",
                        StoryView::kSubmitted,
                        {"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "1", "--devices",
                         "3", "--gpu-memory-utilization", "0.5", "--max-tokens", "8", "--wait", "-q"},
                        300);
      d.Expect(neg, 1, "memory-profile with a negative KV cache");
      std::string neg_run = neg.out;
      while (!neg_run.empty() && (neg_run.back() == '\n' || neg_run.back() == ' ')) neg_run.pop_back();
      if (!neg_run.empty()) {
        // Why it failed, as the run recorded it (submit -q printed only its id).
        const sm::json shown = d.h.Cli({"show", neg_run}).json();
        if (shown.is_object() && shown.contains("error") && shown["error"].is_string()) {
          // Its first line, then the last line of vLLM's stderr (the exception it raised).
          const std::string e = shown["error"].get<std::string>();
          std::string last;
          for (size_t at = 0; at < e.size();) {
            size_t eol = e.find('\n', at);
            if (eol == std::string::npos) eol = e.size();
            const std::string line = e.substr(at, eol - at);
            if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
            at = eol + 1;
          }
          std::cerr << "  the run failed: " << TerminalLine(e.substr(0, std::min(e.find("; stderr tail"), e.find('\n'))))
                    << '\n';
          if (!last.empty() && e.find('\n') != std::string::npos) std::cerr << "  | " << TerminalLine(last) << '\n';
        }
        d.summary["advise_run"] = neg_run;
        auto adv = d.Step("advise: the finding, its cause and evidence, the largest safe utilization and the KV "
                          "tokens it buys, and the sweep that tests it",
                          StoryView::kText, {"advise", neg_run, "--format", "text"});
        d.Expect(adv, 0, "advise");
      }
    }
    // One deployment over two machines (tp 2, dp 2): two more simulated
    // hosts, each behind its own sshd on its own loopback address.
    std::cerr << "\nnpuprof demo: adding two simulated hosts (node-a, node-b; 2 NPUs each) for a memory profile "
                 "across machines..."
              << std::endl;
    bool nodes_up = true;
    for (const char* name : {"node-a", "node-b"})
      if (Status added = d.h.AddNode(name, {"--devices", "2"}); !added.ok()) {
        nodes_up = false;
        d.ok = false;
        std::cerr << "demo: could not add the simulated host " << name << ": " << added.ToString() << std::endl;
      }
    if (nodes_up) {
      auto mn = d.Step("memory-profile across two machines: every node's npu-smi, msprof and vLLM log on that node, "
                       "every node's service started at once",
                       StoryView::kDeploymentRun,
                       {"submit", "memory-profile", "--node", "node-a", "--node", "node-b", "--model", model, "--tp", "2",
                        "--dp", "2", "--wait"},
                       600);
      d.Expect(mn, 0, "memory-profile over two nodes");
      const std::string mn_run = mn.json().value("run_id", "");
      if (!mn_run.empty()) {
        d.summary["memory_profile_multinode_run"] = mn_run;
        auto table = d.Step("Its report per (machine, device), with the totals per node and for the deployment (the JSON's "
                            "devices and totals, as a table)",
                            StoryView::kDeploymentMemory, {"report", mn_run, "--format", "json"});
        d.Expect(table, 0, "report (memory-profile over two nodes)");
      }
    }
  }
  d.Step("All runs", StoryView::kText, {"runs"});
  auto verify = d.Step("Replay every run from its events and check the hash chain", StoryView::kVerify, {"verify"});
  d.Expect(verify, 0, "verify");
  d.summary["steps_dir"] = d.h.Dir() + "/steps";
  d.summary["ok"] = d.ok;
  std::cerr << fmt::format("\n== {}\n", d.ok ? "Done: every step did what it should" : "Done, with the problems above");
  if (!clean) {
    std::cerr << "Open next:\n";
    for (const auto& [key, what] : std::vector<std::pair<std::string, std::string>>{
             {"memory_profile_report_html", "the HBM report (a browser)"},
             {"torch_profile_report_html", "the torch-profile report (a browser)"},
             {"memory_profile_trace", "the memory-profile run's timeline (https://ui.perfetto.dev)"},
             {"memory_profile_compare_html", "0.85 against 0.9 gpu-memory-utilization, per device (a browser)"},
             {"torch_profile_manifest", "the manifest for the downstream analysis tool"},
             {"steps_dir", "the full output of every step"}})
      if (d.summary.contains(key)) std::cerr << fmt::format("  {}:\n    {}\n", what, d.summary[key].get<std::string>());
  }
  std::cerr << "The JSON summary below is the demo's stdout.\n" << std::flush;
  PrintJson(d.summary);
  d.h.Stop();
  std::cerr << (clean ? "" : fmt::format("\nkept: {} (store, exports, reports, steps)\n", d.h.Dir()));
  ExitCode() = d.ok ? 0 : 1;
}

}  // namespace

void AddDemoCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Run every workflow against a simulated Ascend target on this machine");
  auto clean = std::make_shared<bool>(false);
  cmd->add_flag("--clean", *clean, "Remove the demo directory at the end");
  cmd->callback([clean] { RunDemo(*clean); });
}

}  // namespace npuprof::cli
