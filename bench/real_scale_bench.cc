// torch-profile at real scale (issue 38): wall time, bytes over the link and
// npuprof's peak RSS for 1, 8 and 16 ranks of 400,000 kernel rows each,
// against the target's own work.
//
// Each rank count gets a fresh installation (NpuprofHarness: loopback sshd,
// `npuprof server` with 2 local workers) and one simulated host with the
// reference table's delays (bench/reference_workloads.h: start-up 1 s, 10 ms
// per request, set_env.sh 0.1 s), 8 NPUs (16 for more than 8 ranks), every
// rank at scale.rows_per_rank rows (its kernel_details.csv about 95 MB at
// 400,000), analyse() at --analyse-per-mb seconds per MB of a rank's raw
// data (default 0.25: about 4 minutes per GB), 20x a rank's raw size
// claimed while it runs, and the means of a real 8- or 16-NPU host (64
// cores, 256 GiB available), so every rank's analyse() runs at once: one
// batch. The host sits behind the test kit's relay (0.5 ms each way by
// default), which counts the bytes it sent npuprof. torch-profile runs
// with its default wave: tp = ranks up to 8, then tp 8 and dp = ranks / 8.
//
// Per run:
//   wall_s      RunFinished - RunSubmitted (from the events)
//   own_s       the target's own work: the union of its timeline's pieces
//               (state/timeline.jsonl) inside the run: the service's
//               start-up, the requests, profiler control, the ranks'
//               finalise, the shutdown, every analyse() and each tool's own
//               start-up. npuprof's work on the target (its commands, the
//               rank digest's reading of the outputs) is not in it.
//   batch_s     the analyse() batch: the first analyse start to the last
//               analyse end (the longest batch, since there is one)
//   goal        wall_s <= 1.2 x own_s + 2 s
//   relay_in    bytes the relay carried towards npuprof over the whole run
//               (handshakes included); rank_in: the largest analyse_rank
//               attempt's recorded bytes in (`npuprof show`)
//   peak RSS    VmHWM of the server process and of each local worker
//               (/proc/<pid>/status) right after the run; each
//               installation runs only this run
//   npuprof_cpu_s  user + system CPU of the server and the workers over the
//               run (/proc/<pid>/stat before and after)
// and with --spans, every task kind's span (first start, last end, count,
// its attempts' recorded round trips and the longest one's time in SSH calls),
// per rank its analyse_rank task's scheduling, its analyse() on the target's
// timeline and its task's end (the digest reads the outputs in between), and
// each stretch of at least 100 ms of the run that no piece of the target's
// timeline covers, with the tasks in flight then: npuprof's own time,
// located.
//
// Usage: npuprof_bench_real_scale [--ranks 1,8,16] [--rows 400000] [--analyse-per-mb 0.25]
//                                 [--rtt-ms 1] [--runs 1] [--spans] [--json FILE]
// Figures and the exact command: docs/PERFORMANCE.md runs 31 and 52.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/reference_workloads.h"
#include "bench/sim_bench_util.h"
#include "bench/target_timeline.h"

namespace npuprof::bench {
namespace {

struct Options {
  std::vector<int> ranks = {1, 8, 16};
  int rows = 400000;
  double analyse_per_mb = 0.25;
  int rtt_ms = 1;
  int runs = 1;
  bool spans = false;
  std::string json_out;
};

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app{"torch-profile at real scale: wall, bytes and peak RSS against the target's own work"};
  app.add_option("--ranks", o.ranks, "rank counts, comma-separated (1..16)")->delimiter(',')->check(CLI::Range(1, 16));
  app.add_option("--rows", o.rows, "kernel rows per rank (scale.rows_per_rank)")->check(CLI::Range(1, 10000000));
  app.add_option("--analyse-per-mb", o.analyse_per_mb, "analyse() seconds per MB of a rank's raw data")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--rtt-ms", o.rtt_ms, "the relay's round trip time in ms")->check(CLI::Range(0, 60000));
  app.add_option("--runs", o.runs, "runs per rank count")->check(CLI::Range(1, 20));
  app.add_flag("--spans", o.spans, "per run, every task kind's span and the stretches the target's timeline leaves");
  app.add_option("--json", o.json_out, "write the figures as JSON here");
  ParseOrExit(app, argc, argv);
  return o;
}

struct Shape {
  int ranks = 1, tp = 1, dp = 1, devices = 8;
};

Shape ShapeFor(int ranks) {
  if (ranks <= 8) return {ranks, ranks, 1, 8};
  if (ranks % 8 == 0) return {ranks, 8, ranks / 8, ranks};
  return {ranks, ranks, 1, ranks};
}

std::vector<std::string> HostArgs(const Shape& s, const Options& o) {
  std::vector<std::string> a = ReferenceSimArgs();
  a.insert(a.end(), {"--devices", std::to_string(s.devices), "--set", fmt::format("scale.rows_per_rank={}", o.rows),
                     "--set", fmt::format("delays.analyse_per_mb={}", o.analyse_per_mb), "--set",
                     "analyse.peak_mb_per_mb=20", "--set", "host.cores=64", "--set", "host.mem_available_mb=262144"});
  return a;
}

// torch-profile with its default wave (10 requests at concurrency 5, one follow-up).
std::vector<std::string> TorchArgs(const Shape& s, const std::string& model, const std::string& tag) {
  return {"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "qwen",
          "--tp", std::to_string(s.tp), "--dp", std::to_string(s.dp), "--tag", tag, "--mode", "enforce_eager",
          "--request-kind", "text", "--benchmark-output-tokens", "4", "--prompt-tokens", "32",
          "--health-timeout", "120", "--wait"};
}

// utime + stime of a process (/proc/<pid>/stat), seconds; -1 when unreadable.
double ProcCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream in(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i)
    if (i == 14 || i == 15) ticks += std::strtod(field.c_str(), nullptr);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of npuprof's server and local workers together.
double NpuprofCpuSeconds(testing::NpuprofHarness& h) {
  double total = std::max(0.0, ProcCpuSeconds(h.server_pid()));
  for (pid_t pid : h.WorkerPids()) total += std::max(0.0, ProcCpuSeconds(pid));
  return total;
}

struct TaskSpan {
  std::string id, kind, dir;     // dir: an analyse_rank's *_ascend_pt directory
  int64_t start = -1, end = -1;  // ms since the epoch; end -1: not ended
};

struct Row {
  Shape shape;
  std::string run_id, status, load_before, load_after;
  int rank_count = 0, limit = 0;
  int64_t submitted_ms = -1, finished_ms = -1;
  double client_s = 0, wall_s = 0, own_s = 0, own_no_startups_s = 0, batch_s = 0, analyse_sum_s = 0;
  uint64_t relay_in = 0, relay_out = 0, relay_turns = 0, recorded_in = 0, rank_in_max = 0, csv_bytes = 0;
  int64_t server_hwm_kb = -1, worker_hwm_kb = -1;
  double npuprof_cpu_s = 0;  // server + workers, over the run (the CLI's submit and wait)
  std::vector<TaskSpan> spans;
  std::map<std::string, std::pair<int64_t, int64_t>> link_by_kind;  // kind -> round trips (sum), link_ms (largest)
  bool goal_met() const { return status == "ok" && wall_s <= 1.2 * own_s + 2.0; }
};

void FromEvents(const json& events, Row& row) {
  std::map<std::string, size_t> at;
  for (const auto& e : events) {
    const std::string type = e.value("type", "");
    const int64_t t = e.value("time_ms", int64_t{0});
    const json p = e.value("payload", json::object());
    if (type == "RunSubmitted" && row.submitted_ms < 0) row.submitted_ms = t;
    if (type == "RunFinished") row.finished_ms = t;
    const std::string id = p.is_object() ? p.value("task_id", "") : "";
    if (id.empty()) continue;
    if (type == "TaskScheduled" && !at.count(id)) {
      at[id] = row.spans.size();
      const json task_payload = p.value("payload", json::object());
      row.spans.push_back({id, p.value("kind", ""),
                           task_payload.is_object() ? task_payload.value("dir", "") : std::string(), t, -1});
    } else if ((type == "TaskSucceeded" || type == "TaskFailed" || type == "TaskAbandoned") && at.count(id)) {
      row.spans[at[id]].end = t;
    }
  }
  if (row.submitted_ms >= 0 && row.finished_ms >= row.submitted_ms)
    row.wall_s = static_cast<double>(row.finished_ms - row.submitted_ms) / 1000.0;
}

// --spans: per task kind its first start, last end and count; then the
// stretches of the run the target's timeline leaves, with the task kinds in
// flight during each (ms since RunSubmitted).
void PrintSpans(const Row& row, const std::vector<TimelinePiece>& pieces) {
  const double t0 = static_cast<double>(row.submitted_ms);
  struct KindSpan {
    int64_t start = -1, end = -1;
    int n = 0;
  };
  std::map<std::string, KindSpan> kinds;
  std::vector<std::string> order;
  for (const auto& s : row.spans) {
    if (!kinds.count(s.kind)) order.push_back(s.kind);
    KindSpan& k = kinds[s.kind];
    k.start = k.start < 0 ? s.start : std::min(k.start, s.start);
    k.end = std::max(k.end, s.end);
    ++k.n;
  }
  std::fprintf(stderr, "## %d ranks, %s: task kinds (ms since RunSubmitted)\n", row.shape.ranks, row.run_id.c_str());
  for (const auto& kind : order) {
    const KindSpan& k = kinds[kind];
    const auto link = row.link_by_kind.find(kind);
    std::fprintf(stderr, "  %8.0f - %8.0f  %3d x %-34s %s\n", static_cast<double>(k.start) - t0,
                 static_cast<double>(k.end) - t0, k.n, kind.c_str(),
                 link == row.link_by_kind.end()
                     ? ""
                     : fmt::format("round trips {}, in SSH calls {} ms (the longest attempt)", link->second.first,
                                   link->second.second)
                           .c_str());
  }
  // Per rank: its analyse() on the target's timeline, then its analyse_rank
  // task's end (the digest reads the outputs between the two), by end.
  struct RankLine {
    double analyse_start = -1, analyse_end = -1;
    int64_t task_start = -1, task_end = -1;
  };
  std::map<std::string, RankLine> ranks;
  for (const auto& p : pieces) {
    if (p.what != "analyse" || !p.line.is_object() || p.start * 1000.0 < t0) continue;
    RankLine& r = ranks[p.line.value("path", "")];
    r.analyse_start = p.start * 1000.0 - t0;
    r.analyse_end = p.end * 1000.0 - t0;
  }
  for (const auto& t : row.spans) {
    if (t.kind != "torch_profile.analyse_rank" || t.dir.empty()) continue;
    RankLine& r = ranks[t.dir];
    r.task_start = t.start;
    r.task_end = t.end;
  }
  std::vector<std::pair<std::string, RankLine>> by_end(ranks.begin(), ranks.end());
  std::sort(by_end.begin(), by_end.end(),
            [](const auto& a, const auto& b) { return a.second.analyse_end < b.second.analyse_end; });
  std::fprintf(stderr, "## per rank (ms since RunSubmitted): task scheduled, analyse() start - end, task end "
                       "(the digest after analyse())\n");
  for (const auto& [dir, r] : by_end) {
    const std::string name = dir.substr(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/') + 1);
    std::fprintf(stderr, "  %8.0f  %8.0f - %8.0f  %8.0f  (+%5.0f ms)  %s\n",
                 r.task_start < 0 ? -1.0 : static_cast<double>(r.task_start) - t0, r.analyse_start, r.analyse_end,
                 r.task_end < 0 ? -1.0 : static_cast<double>(r.task_end) - t0,
                 r.task_end < 0 ? 0.0 : static_cast<double>(r.task_end) - t0 - r.analyse_end, name.c_str());
  }
  std::fprintf(stderr, "## stretches of 100 ms or more no piece of the target's timeline covers:\n");
  const auto gaps = UncoveredStretches(pieces, t0 / 1000.0, static_cast<double>(row.finished_ms) / 1000.0);
  for (const auto& [s, e] : gaps) {
    if (e - s < 0.1) continue;
    std::map<std::string, int> in_flight;
    for (const auto& t : row.spans)
      if (static_cast<double>(t.start) < e * 1000.0 && (t.end < 0 || static_cast<double>(t.end) > s * 1000.0))
        ++in_flight[t.kind];
    std::string text;
    for (const auto& [k, n] : in_flight) text += fmt::format("{}{} x {}", text.empty() ? "" : ", ", n, k);
    std::fprintf(stderr, "  %8.0f - %8.0f  %6.0f ms  %s\n", s * 1000.0 - t0, e * 1000.0 - t0, (e - s) * 1000.0,
                 text.c_str());
  }
}

Row RunOnce(const Shape& shape, const Options& opt, int index) {
  Row row;
  row.shape = shape;
  row.load_before = LoadAvg();
  testing::NpuprofHarness h;
  h.SetLink({static_cast<int64_t>(opt.rtt_ms) * 500, 0});
  if (Status s = h.Start(HostArgs(shape, opt), 2); !s.ok()) {
    row.status = "harness: " + s.ToString();
    return row;
  }
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  std::fprintf(stderr, "# %d ranks (tp %d, dp %d, %d NPUs): installation in %s\n", shape.ranks, shape.tp, shape.dp,
               shape.devices, h.Dir().c_str());
  const testing::RelayStats before = h.Relay()->Stats();
  const double cpu_before = NpuprofCpuSeconds(h);
  const auto t0 = SteadyClock::now();
  const testing::CliResult r = h.Cli(TorchArgs(shape, model, fmt::format("scale{}", index)), 1800);
  row.client_s = SecondsSince(t0);
  row.npuprof_cpu_s = NpuprofCpuSeconds(h) - cpu_before;
  const testing::RelayStats after = h.Relay()->Stats();
  row.relay_in = after.bytes_to_client - before.bytes_to_client;
  row.relay_out = after.bytes_to_server - before.bytes_to_server;
  row.relay_turns = after.turns - before.turns;
  row.server_hwm_kb = ProcStatusKb(h.server_pid(), "VmHWM");
  for (pid_t pid : h.WorkerPids()) row.worker_hwm_kb = std::max(row.worker_hwm_kb, ProcStatusKb(pid, "VmHWM"));
  row.load_after = LoadAvg();

  const json m = r.json();
  row.run_id = m.is_object() ? m.value("run_id", "") : "";
  row.status = m.is_object() ? m.value("status", "?") : "no manifest (exit " + std::to_string(r.exit_code) + ")";
  if (row.run_id.empty()) {
    std::fprintf(stderr, "%d ranks: no run id: %s\n", shape.ranks, r.err.c_str());
    return row;
  }
  row.rank_count = m.value("rank_count", 0);
  for (const auto& l : m.value("analyse_limits", json::array())) row.limit = std::max(row.limit, l.value("limit", 0));
  for (const auto& d : m.value("remote_profile_dirs", json::array()))
    if (d.contains("outputs") && d["outputs"].contains("kernel_details_csv"))
      row.csv_bytes += d["outputs"]["kernel_details_csv"].value("size", uint64_t{0});

  FromEvents(h.Cli({"events", row.run_id, "--json"}).json().value("events", json::array()), row);
  const json shown = h.Cli({"show", row.run_id}).json();
  if (shown.contains("link_total") && shown["link_total"].is_object())
    row.recorded_in = shown["link_total"].value("bytes_in", uint64_t{0});
  for (const auto& t : shown.value("tasks", json::array())) {
    if (!t.contains("link") || !t["link"].is_object()) continue;
    const std::string kind = t.value("kind", "");
    if (kind == "torch_profile.analyse_rank")
      row.rank_in_max = std::max(row.rank_in_max, t["link"].value("bytes_in", uint64_t{0}));
    auto& [rts, ms] = row.link_by_kind[kind];
    rts += t["link"].value("round_trips", int64_t{0});
    ms = std::max(ms, t["link"].value("link_ms", int64_t{0}));
  }

  const auto pieces = ReadTimeline(h.SimRoot() + "/state/timeline.jsonl");
  const double from = static_cast<double>(row.submitted_ms) / 1000.0, to = static_cast<double>(row.finished_ms) / 1000.0;
  row.own_s = UnionSeconds(pieces, from, to);
  row.own_no_startups_s = UnionSeconds(pieces, from, to, [](const TimelinePiece& p) { return !IsToolStartUp(p.what); });
  double first = -1, last = -1;
  for (const auto& p : pieces) {
    if (p.what != "analyse" || p.start < from || p.end > to) continue;
    first = first < 0 ? p.start : std::min(first, p.start);
    last = std::max(last, p.end);
    row.analyse_sum_s += p.end - p.start;
  }
  row.batch_s = first >= 0 ? last - first : 0;
  std::fprintf(stderr, "# %d ranks %s: %s, wall %.2f s, own work %.2f s, analyse batch %.2f s, npuprof's CPU %.2f s\n",
               shape.ranks, row.run_id.c_str(), row.status.c_str(), row.wall_s, row.own_s, row.batch_s,
               row.npuprof_cpu_s);
  if (opt.spans) PrintSpans(row, pieces);
  h.Stop();
  return row;
}

int Main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  std::vector<Row> rows;
  int index = 0;
  for (int n : opt.ranks)
    for (int i = 0; i < opt.runs; ++i) rows.push_back(RunOnce(ShapeFor(n), opt, index++));

  std::printf("torch-profile at real scale: %d rows per rank, analyse() %.2f s per raw MB, relay RTT %d ms; "
              "goal wall <= 1.2 x the target's own work + 2 s\n",
              opt.rows, opt.analyse_per_mb, opt.rtt_ms);
  std::printf("| ranks | tp x dp | status | wall | target's own work (w/o tool start-ups) | analyse batch "
              "(sum of analyses) | 1.2 x own + 2 s | goal | kernel_details.csv | relay to npuprof (run) | "
              "npuprof's count | largest analyse_rank in | peak RSS server / worker | load before -> after |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  json out = {{"rows_per_rank", opt.rows}, {"analyse_per_mb", opt.analyse_per_mb}, {"rtt_ms", opt.rtt_ms},
              {"runs", json::array()}};
  bool all_ok = true;
  for (const Row& r : rows) {
    all_ok &= r.status == "ok";
    std::printf("| %d | %d x %d | %s | %.2f s | %.2f s (%.2f s) | %.2f s (%.2f s) | %.2f s | %s | %s | %s | %s | %s | "
                "%.1f / %.1f MiB | %s -> %s |\n",
                r.shape.ranks, r.shape.tp, r.shape.dp, r.status.c_str(), r.wall_s, r.own_s, r.own_no_startups_s,
                r.batch_s, r.analyse_sum_s, 1.2 * r.own_s + 2.0, r.goal_met() ? "met" : "missed",
                HumanBytes(static_cast<double>(r.csv_bytes)).c_str(), HumanBytes(static_cast<double>(r.relay_in)).c_str(),
                HumanBytes(static_cast<double>(r.recorded_in)).c_str(),
                HumanBytes(static_cast<double>(r.rank_in_max)).c_str(), static_cast<double>(r.server_hwm_kb) / 1024,
                static_cast<double>(r.worker_hwm_kb) / 1024, r.load_before.c_str(), r.load_after.c_str());
    out["runs"].push_back({{"ranks", r.shape.ranks}, {"tp", r.shape.tp}, {"dp", r.shape.dp},
                           {"devices", r.shape.devices}, {"run_id", r.run_id}, {"status", r.status},
                           {"rank_count", r.rank_count}, {"analyse_limit", r.limit}, {"wall_s", r.wall_s},
                           {"client_s", r.client_s}, {"own_s", r.own_s},
                           {"own_without_tool_start_ups_s", r.own_no_startups_s}, {"analyse_batch_s", r.batch_s},
                           {"analyse_sum_s", r.analyse_sum_s}, {"goal_s", 1.2 * r.own_s + 2.0},
                           {"goal_met", r.goal_met()}, {"kernel_details_bytes", r.csv_bytes},
                           {"relay_bytes_to_npuprof", r.relay_in}, {"relay_bytes_to_target", r.relay_out},
                           {"relay_turns", r.relay_turns}, {"recorded_bytes_in", r.recorded_in},
                           {"largest_analyse_rank_bytes_in", r.rank_in_max}, {"server_hwm_kb", r.server_hwm_kb},
                           {"worker_hwm_kb", r.worker_hwm_kb}, {"npuprof_cpu_s", r.npuprof_cpu_s},
                           {"load_before", r.load_before},
                           {"load_after", r.load_after}});
  }
  if (!opt.json_out.empty()) std::ofstream(opt.json_out) << out.dump(2) << "\n";
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
