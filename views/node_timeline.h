// The nodes of a torch-profile run (or of a memory-profile over several
// machines, whose manifest has no ranks: its nodes hold their HBM series,
// views/chrome_trace.h) as the trace shows them: per node its
// machine, the clock offset recorded for it (machine.clock, see
// statemachine/clock_offsets.h) and each of its ranks' kernel windows on the
// node's own clock (the first kernel's start to the last kernel's end, from
// the kernel summary the analyse step recorded: parsers/kernel_summary.h).
// Pure: a projection of the manifest `npuprof manifest RUN` prints.
//
// One clock: a timestamp t of node M becomes npuprof's host time as
// t − offset_ms(M) (offset = M's clock − the measuring worker's, as
// recorded). The offset is the one measured at the run's start, else the one
// measured at its end; a node with neither (a failed measure, or a one-node
// run, which measures nothing) keeps its own clock (offset 0,
// `measured` "none") and the trace says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::views {

struct RankWindow {
  std::string rank_dir;            // basename of the *_ascend_pt dir
  std::string path;                // on the node
  std::optional<int> device_id;
  double start_us = 0;             // node clock, µs since the epoch
  double end_us = 0;
};

struct NodeTimeline {
  int node = 0;                    // 0 = the head (or the only machine)
  std::string machine;
  double offset_ms = 0;            // 0 when not measured
  std::optional<double> uncertainty_ms;
  std::string measured = "none";   // "start", "end" or "none"
  std::vector<RankWindow> ranks;   // ranks whose summary has a kernel window, in listing order
};

// Nodes in deployment order (the head first); empty for a manifest without
// remote_profile_dirs or machine.
std::vector<NodeTimeline> NodeTimelinesFromManifest(const nlohmann::json& manifest);

}  // namespace npuprof::views
