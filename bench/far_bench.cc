// Far targets: torch-profile and memory-profile on the reference table's
// target (bench/reference_workloads.h), with the simulated host behind the
// test kit's latency relay (tests/support/latency_relay.h) at several round
// trip times. RTT 0 still goes through the relay, so its turns and bytes
// are counted the same way.
//
// For every run it prints:
//   wall_s   RunFinished - RunSubmitted (from the events)
//   added_s  wall_s - the median wall_s of the same kind at RTT 0: what
//            the link added
//   turns    the round trips the relay counted while the run ran (its
//            connections' turns: client->server followed by server->client)
//   rts      the round trips the run's tasks recorded (their TaskSucceeded /
//            TaskFailed link figures, views/task_link_table.h: what the
//            workers counted, ssh_stats.h "Round trips"); rts/turn beside it
//   link_s   the tasks' recorded time inside SSH calls, summed
//   own_s    the target's own work inside the run: the union of the
//            simulator's timeline pieces (state/timeline.jsonl, as in
//            npuprof_bench_overhead), which the link does not stretch
//   over_s   wall_s - own_s: npuprof's time and the link's
//   s/turn   added_s / turns: near the RTT when the turns are what the run
//            waited for one after another
//   conns    SSH connections opened during the run
//   to_target, from_target: bytes through the relay each way (SSH wire
//            bytes, encrypted, with the SSH protocol's own)
// and, per run, the recorded round trips by task kind (the top 5) and the
// turns by task kind (bench/turn_attribution.h): which
// kinds of task the round trips were spent in; then, per task kind, how long
// its attempts were in flight (median over the runs), what the link added to
// that against RTT 0 and that over the RTT ("waits": the round trips the kind
// waited for one after another; turns over-count where data streams).
//
// Each (RTT, kind) gets a fresh installation: its first run is a cold
// server's (SSH connections opened, their handshakes' turns included).
//
// Usage: npuprof_bench_far [--rtt-ms 0,50,200] [--runs N] [--kinds torch,memory]
//                          [--bytes-per-s B] [--json FILE]
// Figures and their meaning: docs/PERFORMANCE.md, "Far targets".
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench/reference_workloads.h"
#include "bench/sim_bench_util.h"
#include "bench/target_timeline.h"
#include "bench/turn_attribution.h"
#include "tests/support/latency_relay.h"
#include "tests/support/sshd_fixture.h"
#include "views/task_link_table.h"

namespace npuprof::bench {
namespace {

struct Options {
  std::vector<int> rtt_ms = {0, 50, 200};
  int runs = 2;
  std::vector<std::string> kinds = {"torch", "memory"};
  int64_t bytes_per_s = 0;
  std::string json_out;
};

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app{"npuprof far-target benchmark: runs behind a latency relay (docs/PERFORMANCE.md \"Far targets\")"};
  app.add_option("--rtt-ms", o.rtt_ms, "round trip times in ms, comma-separated (0 first: the base of added_s)")
      ->delimiter(',')
      ->check(CLI::Range(0, 60000));
  app.add_option("--runs", o.runs, "runs per RTT and kind")->check(CLI::Range(1, 1000));
  app.add_option("--kinds", o.kinds, "run kinds, comma-separated")->delimiter(',')->check(CLI::IsMember({"torch", "memory"}));
  app.add_option("--bytes-per-s", o.bytes_per_s, "bandwidth cap per direction (0: none)")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--json", o.json_out, "write the results as JSON to this file");
  ParseOrExit(app, argc, argv);
  return o;
}

struct Row {
  int rtt_ms = 0;
  std::string kind, run_id, status;
  bool cold = false;
  double wall_s = 0, client_s = 0, own_s = 0;
  uint64_t turns = 0, conns = 0, to_target = 0, from_target = 0;
  int64_t round_trips = 0, link_ms = 0, recorded = 0, unrecorded = 0;
  std::map<std::string, double> rts_by_kind;  // recorded round trips per task kind
  std::map<std::string, double> bytes_in_by_kind;  // recorded bytes from the target per task kind
  std::map<std::string, double> turns_by_kind;
  std::map<std::string, double> span_s_by_kind;
};

// The run's wall (RunSubmitted..RunFinished) and its task attempts.
void FromEvents(const json& events, Row& row, int64_t* from_ms, int64_t* to_ms, std::vector<TaskSpan>* spans) {
  std::map<std::string, size_t> open;  // task id -> index in spans
  *from_ms = -1;
  *to_ms = -1;
  for (const auto& e : events) {
    const std::string type = e.value("type", "");
    const int64_t t = e.value("time_ms", int64_t{0});
    const json p = e.value("payload", json::object());
    const std::string task = p.is_object() ? p.value("task_id", "") : "";
    if (type == "RunSubmitted" && *from_ms < 0) *from_ms = t;
    if (type == "RunFinished") *to_ms = t;
    if (type == "TaskScheduled" && !task.empty()) {
      open[task] = spans->size();
      spans->push_back({p.value("kind", "?"), t, t});
    } else if (type == "TaskRedispatched" && open.count(task)) {
      const std::string kind = (*spans)[open[task]].kind;
      open[task] = spans->size();
      spans->push_back({kind, t, t});
    } else if ((type == "TaskSucceeded" || type == "TaskFailed" || type == "TaskAbandoned") && open.count(task)) {
      (*spans)[open[task]].end_ms = t;
      open.erase(task);
    }
  }
  for (const auto& [task, i] : open) (*spans)[i].end_ms = *to_ms;  // never ended: up to the run's end
  if (*from_ms >= 0 && *to_ms >= *from_ms) row.wall_s = static_cast<double>(*to_ms - *from_ms) / 1000.0;
}

std::string KindsText(const std::map<std::string, double>& by) {
  std::vector<std::pair<double, std::string>> v;
  for (const auto& [k, n] : by) v.emplace_back(-n, k);
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [n, k] : v) out += fmt::format("{}{} {:.1f}", out.empty() ? "" : ", ", k, -n);
  return out;
}

int Main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  const std::string load_before = LoadAvg();
  std::vector<Row> rows;
  int seq = 0;
  for (const int rtt : opt.rtt_ms) {
    for (const auto& kind : opt.kinds) {
      testing::NpuprofHarness h;
      h.SetLink({static_cast<int64_t>(rtt) * 500, opt.bytes_per_s});
      if (Status s = h.Start(ReferenceSimArgs(), 2); !s.ok()) {
        std::fprintf(stderr, "harness: %s\n", s.ToString().c_str());
        return 1;
      }
      const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
      if (model.empty()) {
        std::fprintf(stderr, "make_model failed\n");
        return 1;
      }
      std::fprintf(stderr, "# RTT %d ms, %s: installation in %s\n", rtt, kind.c_str(), h.Dir().c_str());
      for (int i = 0; i < opt.runs; ++i) {
        Row row;
        row.rtt_ms = rtt;
        row.kind = kind == "torch" ? "torch-profile" : "memory-profile";
        row.cold = i == 0;
        const auto argv = kind == "torch" ? ReferenceTorchArgs(model, fmt::format("far{}", seq++))
                                          : MemoryArgs(model, testing::FreeLoopbackPort());
        const testing::RelayStats before = h.Relay()->Stats();
        const auto t0 = SteadyClock::now();
        testing::CliResult r = h.Cli(argv, 900);
        row.client_s = SecondsSince(t0);
        const testing::RelayStats after = h.Relay()->Stats();
        const json m = r.json();
        row.run_id = m.is_object() ? m.value("run_id", "") : "";
        row.status = m.is_object() ? m.value("status", "?") : "?";
        if (row.run_id.empty()) {
          std::fprintf(stderr, "%s at RTT %d run %d: no run id (exit %d): %s\n", row.kind.c_str(), rtt, i,
                       r.exit_code, r.err.c_str());
          return 1;
        }
        const json events = h.Cli({"events", row.run_id, "--json"}).json().value("events", json::array());
        int64_t from_ms = -1, to_ms = -1;
        std::vector<TaskSpan> spans;
        FromEvents(events, row, &from_ms, &to_ms, &spans);
        if (from_ms >= 0 && to_ms >= from_ms)
          row.own_s = TimelineUnionSeconds(h.SimRoot() + "/state/timeline.jsonl", from_ms, to_ms);
        const views::TaskLinkTable links = views::BuildTaskLinkTable(events);
        row.round_trips = links.total.round_trips();
        row.link_ms = links.total.link_ms();
        row.recorded = links.recorded;
        row.unrecorded = links.unrecorded;
        for (const auto& a : links.attempts)
          if (a.link) {
            row.rts_by_kind[a.kind] += static_cast<double>(a.link->round_trips());
            row.bytes_in_by_kind[a.kind] += static_cast<double>(a.link->bytes_in());
          }
        row.turns = after.turns - before.turns;
        row.conns = after.connections - before.connections;
        row.to_target = after.bytes_to_server - before.bytes_to_server;
        row.from_target = after.bytes_to_client - before.bytes_to_client;
        std::vector<int64_t> turn_ms;
        for (const auto& c : after.per_connection) turn_ms.insert(turn_ms.end(), c.turn_ms.begin(), c.turn_ms.end());
        row.turns_by_kind = TurnsByTaskKind(turn_ms, spans, from_ms, to_ms);
        row.span_s_by_kind = SpanSecondsByKind(spans);
        std::fprintf(stderr, "# RTT %d ms %s %s: %s, %.2f s, %llu turns\n", rtt, row.kind.c_str(), row.run_id.c_str(),
                     row.status.c_str(), row.wall_s, static_cast<unsigned long long>(row.turns));
        rows.push_back(row);
      }
      h.Stop();
    }
  }
  const std::string load_after = LoadAvg();

  std::map<std::string, double> base;  // kind -> median wall at the smallest RTT measured, if 0
  for (const auto& kind : {"torch-profile", "memory-profile"}) {
    std::vector<double> v;
    for (const auto& r : rows)
      if (r.kind == kind && r.rtt_ms == 0) v.push_back(r.wall_s);
    if (!v.empty()) base[kind] = Median(v);
  }
  std::printf("far targets: reference delays, behind the latency relay; load %s -> %s\n", load_before.c_str(),
              load_after.c_str());
  std::printf("%6s %-14s %-5s %-9s %7s %8s %6s %6s %6s %6s %8s %7s %7s %5s %10s %11s\n", "rtt_ms", "kind", "run",
              "status", "wall_s", "added_s", "own_s", "over_s", "turns", "rts", "rts/turn", "link_s", "s/turn", "conns", "to_target", "from_target");
  json out = {{"load_before", load_before}, {"load_after", load_after}, {"bytes_per_s", opt.bytes_per_s},
              {"runs", json::array()}};
  for (const auto& r : rows) {
    const bool has_base = base.count(r.kind) > 0;
    const double added = has_base ? r.wall_s - base[r.kind] : 0;
    std::printf("%6d %-14s %-5s %-9s %7.2f %8s %6.2f %6.2f %6llu %6lld %8s %7.2f %7s %5llu %10s %11s\n", r.rtt_ms,
                r.kind.c_str(), r.cold ? "cold" : "warm", r.status.c_str(), r.wall_s,
                has_base ? fmt::format("{:.2f}", added).c_str() : "-", r.own_s, r.wall_s - r.own_s,
                static_cast<unsigned long long>(r.turns),
                static_cast<long long>(r.round_trips),
                r.turns > 0 ? fmt::format("{:.2f}", static_cast<double>(r.round_trips) / static_cast<double>(r.turns)).c_str()
                            : "-",
                static_cast<double>(r.link_ms) / 1000.0,
                has_base && r.turns > 0 && r.rtt_ms > 0 ? fmt::format("{:.3f}", added / static_cast<double>(r.turns)).c_str()
                                                        : "-",
                static_cast<unsigned long long>(r.conns), HumanBytes(static_cast<double>(r.to_target)).c_str(),
                HumanBytes(static_cast<double>(r.from_target)).c_str());
    out["runs"].push_back({{"rtt_ms", r.rtt_ms}, {"kind", r.kind}, {"run_id", r.run_id}, {"status", r.status},
                           {"cold", r.cold}, {"wall_s", r.wall_s}, {"client_s", r.client_s},
                           {"added_s", has_base ? json(added) : json()}, {"own_s", r.own_s},
                           {"over_s", r.wall_s - r.own_s}, {"turns", r.turns},
                           {"connections", r.conns}, {"bytes_to_target", r.to_target},
                           {"round_trips", r.round_trips}, {"link_ms", r.link_ms},
                           {"recorded_attempts", r.recorded}, {"unrecorded_attempts", r.unrecorded},
                           {"round_trips_by_task_kind", r.rts_by_kind},
                           {"bytes_in_by_task_kind", r.bytes_in_by_kind},
                           {"bytes_from_target", r.from_target}, {"turns_by_task_kind", r.turns_by_kind},
                           {"span_s_by_task_kind", r.span_s_by_kind}});
  }
  std::printf("recorded round trips by task kind (top 5):\n");
  for (const auto& r : rows) {
    std::map<std::string, double> top;
    std::vector<std::pair<double, std::string>> v;
    for (const auto& [k, n] : r.rts_by_kind) v.emplace_back(-n, k);
    std::sort(v.begin(), v.end());
    for (size_t i = 0; i < v.size() && i < 5; ++i) top[v[i].second] = -v[i].first;
    std::printf("  %4d ms %-14s %-4s %s\n", r.rtt_ms, r.kind.c_str(), r.cold ? "cold" : "warm", KindsText(top).c_str());
  }
  std::printf("recorded bytes from the target by task kind (top 5):\n");
  for (const auto& r : rows) {
    std::vector<std::pair<double, std::string>> v;
    for (const auto& [k, n] : r.bytes_in_by_kind) v.emplace_back(-n, k);
    std::sort(v.begin(), v.end());
    std::string text;
    for (size_t i = 0; i < v.size() && i < 5; ++i)
      text += fmt::format("{}{} {}", i ? ", " : "", v[i].second, HumanBytes(-v[i].first));
    std::printf("  %4d ms %-14s %-4s %s\n", r.rtt_ms, r.kind.c_str(), r.cold ? "cold" : "warm", text.c_str());
  }
  std::printf("turns by task kind (a turn shared by n tasks in flight counts 1/n to each):\n");
  for (const auto& r : rows)
    std::printf("  %4d ms %-14s %-4s %s\n", r.rtt_ms, r.kind.c_str(), r.cold ? "cold" : "warm",
                KindsText(r.turns_by_kind).c_str());
  // Time per task kind against RTT 0 (medians over the runs): what the link
  // added to each kind, and that over the RTT: round trips it waited for.
  std::printf("time in flight per task kind, median over the runs; added = against RTT 0; waits = added / RTT:\n");
  std::map<std::tuple<std::string, int, std::string>, std::vector<double>> spans;  // (run kind, rtt, task kind)
  for (const auto& r : rows)
    for (const auto& [k, s] : r.span_s_by_kind) spans[{r.kind, r.rtt_ms, k}].push_back(s);
  out["span_medians"] = json::array();
  for (const auto& [key, v] : spans) {
    const auto& [kind, rtt, task_kind] = key;
    const auto b = spans.find({kind, 0, task_kind});
    const double med = Median(v), added = b == spans.end() ? 0 : med - Median(b->second);
    json j = {{"kind", kind}, {"rtt_ms", rtt}, {"task_kind", task_kind}, {"span_s", med}};
    std::string text = fmt::format("  {:4d} ms {:<14} {:<32} {:7.2f} s", rtt, kind, task_kind, med);
    if (rtt > 0 && b != spans.end()) {
      j["added_s"] = added;
      j["waits"] = added * 1000.0 / rtt;
      text += fmt::format("  added {:6.2f} s  waits {:5.1f}", added, added * 1000.0 / rtt);
    }
    std::printf("%s\n", text.c_str());
    out["span_medians"].push_back(j);
  }
  if (!opt.json_out.empty()) std::ofstream(opt.json_out) << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
