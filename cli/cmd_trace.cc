// `npuprof trace RUN [-o FILE]`: the run's event log as a Chrome Trace Event
// file for Perfetto UI (ui.perfetto.dev -> Open trace file) or
// chrome://tracing: states, task attempts per worker, timers and key events,
// and the HBM counters of the run's devices when the run has a series
// (cli/run_hbm_series.h); for torch-profile and analyse-root runs one
// process per node with its ranks' kernel windows on one clock
// (views/node_timeline.h, from the manifest), and for a memory-profile over
// several machines one process per node holding its devices' HBM counters. Built by views/chrome_trace.h
// from what the server serves; nothing is recomputed.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/terminal_text.h"
#include "cli/output_file.h"
#include "cli/run_hbm_series.h"
#include "views/chrome_trace.h"
#include "views/hbm_series_from_run.h"
#include "views/node_timeline.h"

namespace npuprof::cli {

void AddTraceCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace", "Write a run's timeline as a Chrome Trace Event file (Perfetto UI, chrome://tracing)");
  auto addr = std::make_shared<ServerAddress>();
  auto run = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUN", *run, "Run id")->required();
  cmd->add_option("-o,--output", *out, "Write the trace to FILE (default: stdout)");
  cmd->callback([addr, run, out] {
    Client client(*addr);
    auto evs = client.CallJson("events", json{{"run_id", *run}}, std::chrono::seconds(60));
    if (!evs.ok()) return Fail(2, evs.status().message());
    views::HbmSeriesSet hbm = RunHbmSeries(client, *evs);
    // The trace is on the server's clock; msprof's series on the target's,
    // unless a deployment's offsets already put them on npuprof's.
    if (hbm.clock == "target") {
      const double offset_us = views::TargetClockOffsetUs(*evs);
      for (auto& s : hbm.series)
        for (auto& p : s.samples) p.t_us -= offset_us;
    }
    std::vector<views::NodeTimeline> nodes;
    if (auto m = client.CallJson("manifest", json{{"run_id", *run}}); m.ok()) {
      const std::string kind = m->value("kind", "");
      // memory-profile: a deployment over several machines (its manifest lists the other nodes).
      const bool deployment = kind == "memory-profile" && m->contains("nodes") && (*m)["nodes"].is_array() &&
                              !(*m)["nodes"].empty();
      if (kind == "torch-profile" || kind == "analyse-root" || deployment) nodes = views::NodeTimelinesFromManifest(*m);
    }
    auto trace = views::BuildChromeTrace(*evs, hbm.series, nodes);
    if (!trace.ok()) return Fail(2, fmt::format("run {}: {}", *run, trace.status().message()));
    const std::string text = trace->dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    if (out->empty()) {
      std::cout << TerminalJsonText(text);
      return;
    }
    if (Status st = WriteFileAtomic(*out, text); !st.ok()) return Fail(2, st.message());
    PrintJson(json{{"run_id", *run},
                   {"file", *out},
                   {"trace_events", (*trace)["traceEvents"].size()},
                   {"hbm_series", hbm.series.size()},
                   {"nodes", nodes.size()},
                   {"open_with", "https://ui.perfetto.dev (Open trace file) or chrome://tracing"}});
  });
}

}  // namespace npuprof::cli
