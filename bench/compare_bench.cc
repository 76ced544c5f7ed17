// Wall time of `npuprof compare` and of `npuprof report SWEEP` on a whole
// local installation (NpuprofHarness: loopback sshd, the simulated target
// with its delays at zero, `npuprof server` with 2 local workers): a sweep
// of --points memory-profile runs (tp 1, one after the other on NPU 0) is
// collected once, then each command is run --reps times as a fresh client
// process, and the median and the maximum are printed:
//
//   compare2/FMT  `npuprof compare P0 P1 --format FMT` (two of the points)
//   sweepN/FMT    `npuprof report SWEEP --format FMT` (all N points)
//
// The time is the client's start, one `manifest` round trip per run and the
// rendering. Usage: npuprof_bench_compare [--points 16] [--reps 10] [--json FILE]
// Figures: docs/COMPARE.md "Measured".
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/sim_bench_util.h"

namespace npuprof::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  CLI::App app("npuprof_bench_compare");
  int points = 16, reps = 10;
  std::string json_out;
  app.add_option("--points", points, "Points of the sweep (gpu-memory-utilization values)")->check(CLI::Range(2, 64));
  app.add_option("--reps", reps, "Runs of each command")->check(CLI::Range(1, 1000));
  app.add_option("--json", json_out, "Write the figures here");
  ParseOrExit(app, argc, argv);

  testing::NpuprofHarness h;
  Status st = h.Start({"--startup-delay", "0", "--token-delay", "0", "--export-delay", "0", "--msprof-flush-delay",
                       "0"});
  if (!st.ok()) {
    std::fprintf(stderr, "harness: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  std::string values;
  for (int i = 0; i < points; ++i) values += fmt::format("{}{:.3f}", i ? "," : "", 0.5 + 0.45 * i / (points - 1));
  const auto t0 = SteadyClock::now();
  testing::CliResult sw = h.Cli({"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model,
                                 "--tp", "1", "--max-tokens", "8", "--grid", "gpu-memory-utilization=" + values,
                                 "--run-id", "bench-sweep", "--wait", "-q"},
                                3600);
  const double sweep_s = SecondsSince(t0);
  if (sw.exit_code != 0) {
    std::fprintf(stderr, "sweep failed: %s\n%s\n", sw.out.c_str(), sw.err.c_str());
    return 1;
  }
  std::printf("# %d-point sweep collected in %.1f s (load %s)\n", points, sweep_s, LoadAvg().c_str());
  json out = {{"points", points}, {"reps", reps}, {"sweep_collect_s", sweep_s}, {"load_before", LoadAvg()}};
  std::printf("%-16s %10s %10s  %s\n", "command", "median_s", "max_s", "output bytes");
  for (const char* format : {"json", "text", "html"}) {
    for (const bool sweep : {false, true}) {
      std::vector<std::string> args =
          sweep ? std::vector<std::string>{"report", "bench-sweep", "--format", format}
                : std::vector<std::string>{"compare", "bench-sweep-p0", "bench-sweep-p1", "--format", format};
      std::vector<double> times;
      size_t bytes = 0;
      for (int r = 0; r < reps; ++r) {
        const auto t = SteadyClock::now();
        testing::CliResult c = h.Cli(args, 120);
        times.push_back(SecondsSince(t));
        if (c.exit_code != 0) {
          std::fprintf(stderr, "%s failed: %s\n", args[0].c_str(), c.err.c_str());
          return 1;
        }
        bytes = c.out.size();
      }
      const std::string name = fmt::format("{}/{}", sweep ? fmt::format("sweep{}", points) : "compare2", format);
      const double med = Median(times), mx = *std::max_element(times.begin(), times.end());
      std::printf("%-16s %10.3f %10.3f  %zu\n", name.c_str(), med, mx, bytes);
      out["figures"][name] = {{"median_s", med}, {"max_s", mx}, {"bytes", bytes}};
    }
  }
  out["load_after"] = LoadAvg();
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  h.Stop();
  return 0;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
