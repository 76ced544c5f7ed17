// The cost of one HBM sample of `serve --watch-hbm` (statemachine/
// serve_hbm_watch.h) on a whole local installation (NpuprofHarness: loopback
// sshd, the simulated target, `npuprof server` with 2 local workers): a
// service is started with --watch-hbm 1 and a simulated leak, --samples
// samples are taken, and per sample, from the run's own events:
//
//   remote    the sample task's link figures as its worker recorded them
//             (TaskSucceeded.link: link_ms = wall inside SSH calls, commands,
//             round trips, bytes each way): the remote command;
//   sample    TaskScheduled -> HbmSampled of the same sample (broker clock, ms):
//             dispatch, the remote command, the answer, the decision and the
//             commit of its events;
//   events    events committed per sample and their payload bytes;
//
// and, in process, the decision + fold of one sample's answer and its timer
// (the broker's DecideWithState on the run's state, no store) after 10,
// 1,000 and 10,000 samples folded (decide), with the run's task and timer
// count and the size of its data at each.
// Usage: npuprof_bench_drift [--samples 30] [--interval 1] [--json FILE] [--decide-only]
// Figures: docs/PERFORMANCE.md "HBM drift sampler".
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/sim_bench_util.h"
#include "statemachine/engine.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/serve_machine.h"
#include "statemachine/service_spec.h"
#include "tests/support/lease_inputs.h"

namespace npuprof::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Max(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

struct DecideCost {
  double us = 0;        // per sample (answer + timer)
  size_t tasks = 0;     // the run state's tasks and timers after the samples
  size_t timers = 0;
  size_t data_bytes = 0;  // its data (JSON text)
};

// In process: a serve run driven to `ready`, then samples answered and their
// timers fired; the microseconds of the last `measured` answer+timer pairs
// after `before` samples.
DecideCost DecideMicros(int before, int measured) {
  sm::KindRegistry reg;
  reg.Register(std::make_unique<sm::ServeMachine>());
  sm::RunState s;
  s.run_id = "r1";
  int64_t now = 1'000'000;
  // As the broker decides (broker/commit.cc): on the run's state itself,
  // moved in, the events applied to it by the decision.
  const auto apply = [&](sm::Input in) {
    in.now_ms = (now += 1000);
    auto r = sm::DecideWithState(reg, std::move(s), in);
    if (!r.ok()) {
      std::fprintf(stderr, "decide: %s\n", r.status().ToString().c_str());
      std::exit(1);
    }
    s = std::move(r->state);
  };
  sm::Input sub;
  sub.type = sm::Input::Type::kSubmit;
  sub.kind = "serve";
  sub.spec = {{"machine", "m1"}, {"machine_record", {{"name", "m1"}, {"host", "h"}, {"user", "u"}}},
              {"model", "/m"}, {"tp", 2}, {"watch_hbm_s", 1}};
  apply(sub);
  while (auto lease = sm::testing::NextLeaseInput(s)) apply(*lease);
  const auto answer = [&](const std::string& kind, json result) {
    for (const auto& [id, t] : s.tasks)
      if (t.kind == kind && t.in_flight()) {
        sm::Input in;
        in.type = sm::Input::Type::kTaskResult;
        in.task_id = id;
        in.attempt = t.attempt;
        in.ok = true;
        in.result = std::move(result);
        apply(in);
        return;
      }
  };
  answer(sm::kServiceLaunchTask, {{"runtime_dir", "/rt"}, {"pid", 42}, {"devices", {0, 1}}});
  answer(sm::kServiceWaitReadyTask, {{"ready_after_ms", 1}});
  const auto one = [&](int i) {
    answer(sm::kServiceHbmSampleTask,
           {{"sample_no", i}, {"t_ms", 1'700'000'000'000 + i * 1000}, {"clock", "target"},
            {"devices", {{{"device_id", 0}, {"used_mb", 30000 + i}, {"total_mb", 65536}},
                         {{"device_id", 1}, {"used_mb", 30000}, {"total_mb", 65536}}}}});
    for (const auto& [id, t] : s.timers)
      if (t.armed && t.purpose == sm::kHbmSampleTimer) {
        sm::Input in;
        in.type = sm::Input::Type::kTimerFired;
        in.timer_id = id;
        apply(in);
        break;
      }
  };
  for (int i = 1; i <= before; ++i) one(i);
  const auto t0 = SteadyClock::now();
  for (int i = before + 1; i <= before + measured; ++i) one(i);
  return {SecondsSince(t0) * 1e6 / measured, s.tasks.size(), s.timers.size(), s.data.dump().size()};
}

int Main(int argc, char** argv) {
  CLI::App app("npuprof_bench_drift");
  int samples = 30;
  std::string json_out;
  app.add_option("--samples", samples, "Samples of the watched service")->check(CLI::Range(5, 1000));
  app.add_option("--json", json_out, "Write the figures here");
  std::string interval = "1";
  app.add_option("--interval", interval, "--watch-hbm of the watched service (seconds, 0.1..86400)");
  bool decide_only = false;
  app.add_flag("--decide-only", decide_only, "Only the in-process decision cost (no harness, no service)");
  ParseOrExit(app, argc, argv);
  // In process first: 10, 1,000 and 10,000 samples before the 200 measured.
  const DecideCost d10 = DecideMicros(10, 200), d1k = DecideMicros(1000, 200), d10k = DecideMicros(10000, 200);
  std::printf("decide + fold of one sample (answer + timer), in process: %.0f us after 10, %.0f us after 1,000, "
              "%.0f us after 10,000 samples (run state: %zu/%zu/%zu tasks, %zu/%zu/%zu timers, data %zu/%zu/%zu B)\n",
              d10.us, d1k.us, d10k.us, d10.tasks, d1k.tasks, d10k.tasks, d10.timers, d1k.timers, d10k.timers,
              d10.data_bytes, d1k.data_bytes, d10k.data_bytes);
  const json decide = {{"decide_us_after_10", d10.us},       {"decide_us_after_1000", d1k.us},
                       {"decide_us_after_10000", d10k.us},   {"tasks_after_10", d10.tasks},
                       {"tasks_after_10000", d10k.tasks},    {"timers_after_10", d10.timers},
                       {"timers_after_10000", d10k.timers},  {"data_bytes_after_10", d10.data_bytes},
                       {"data_bytes_after_10000", d10k.data_bytes}};
  if (decide_only) {
    if (!json_out.empty()) std::ofstream(json_out) << decide.dump(2) << "\n";
    return 0;
  }

  const std::string load_start = LoadAvg();
  testing::NpuprofHarness h;
  Status st = h.Start({"--startup-delay", "0", "--set", R"(leak={"mb_per_h": 36, "time_scale": 100})"});
  if (!st.ok()) {
    std::fprintf(stderr, "harness: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  testing::CliResult sv = h.Cli({"submit", "serve", "--machine", "sim1", "--model", model, "--devices", "0",
                                 "--watch-hbm", interval, "--wait"});
  const std::string run = sv.json().is_object() ? sv.json().value("run_id", "") : "";
  if (sv.exit_code != 0 || run.empty()) {
    std::fprintf(stderr, "serve: %s %s\n", sv.out.c_str(), sv.err.c_str());
    return 1;
  }
  json show;
  for (int i = 0; i < samples * 20; ++i) {
    show = h.Cli({"show", run}).json();
    if (show.contains("hbm_watch") && show["hbm_watch"].value("samples", 0) >= samples) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  h.Cli({"stop", run, "--wait"});
  const json evs = h.Cli({"events", run, "--json"}).json();
  h.Stop();

  std::map<std::string, int64_t> scheduled_ms;  // task id -> TaskScheduled time
  std::map<int64_t, std::string> task_of_sample;
  std::vector<double> link_ms, commands, round_trips, bytes_out, bytes_in, sample_ms;
  std::map<std::string, int64_t> sample_event_ms;  // task id -> HbmSampled time
  int64_t first_sample_seq = -1, last_sample_seq = -1, n_sampled = 0, bytes_between = 0, events_between = 0;
  int64_t first_sample_ms = 0, last_sample_ms = 0;
  for (const json& e : evs.value("events", json::array())) {
    const std::string type = e.value("type", "");
    const json& p = e["payload"];
    if (type == "TaskScheduled" && p.value("kind", "") == sm::kServiceHbmSampleTask)
      scheduled_ms[p.value("task_id", "")] = e.value("time_ms", int64_t{0});
    if (type == "TaskSucceeded" && scheduled_ms.count(p.value("task_id", "")) && p.contains("link")) {
      const json& l = p["link"];
      link_ms.push_back(l.value("link_ms", 0.0));
      commands.push_back(l.value("commands", 0.0));
      round_trips.push_back(l.value("round_trips", 0.0));
      bytes_out.push_back(l.value("bytes_out", 0.0));
      bytes_in.push_back(l.value("bytes_in", 0.0));
    }
    if (type == "HbmSampled") {
      // The cause names the task whose answer recorded it: "task:<id>#<attempt>".
      const std::string cause = e.value("cause", "");
      const std::string id = cause.rfind("task:", 0) == 0 ? cause.substr(5, cause.find('#') - 5) : "";
      if (scheduled_ms.count(id)) sample_ms.push_back(double(e.value("time_ms", int64_t{0}) - scheduled_ms[id]));
      const int64_t seq = e.value("seq", int64_t{0});
      if (first_sample_seq < 0) first_sample_seq = seq, first_sample_ms = e.value("time_ms", int64_t{0});
      last_sample_seq = seq;
      last_sample_ms = e.value("time_ms", int64_t{0});
      ++n_sampled;
    }
  }
  for (const json& e : evs.value("events", json::array())) {
    const int64_t seq = e.value("seq", int64_t{0});
    if (seq > first_sample_seq && seq <= last_sample_seq) {
      ++events_between;
      bytes_between += static_cast<int64_t>(e["payload"].dump().size());
    }
  }
  const double per = n_sampled > 1 ? double(n_sampled - 1) : 1;
  const double cycle_s = double(last_sample_ms - first_sample_ms) / 1000;

  std::printf("HBM drift sampler, %lld samples at --watch-hbm %s in %.1f s (load %s at start, %s at end)\n",
              static_cast<long long>(n_sampled), interval.c_str(), cycle_s, load_start.c_str(), LoadAvg().c_str());
  std::printf("  remote: link_ms median %.1f max %.1f; commands %.0f, round trips %.0f, bytes out %.0f in %.0f (medians)\n",
              Median(link_ms), Max(link_ms), Median(commands), Median(round_trips), Median(bytes_out),
              Median(bytes_in));
  std::printf("  sample (TaskScheduled -> HbmSampled): median %.0f ms, max %.0f ms\n", Median(sample_ms),
              Max(sample_ms));
  std::printf("  events per sample: %.1f, payload bytes per sample: %.0f\n", events_between / per,
              bytes_between / per);
  const json out = {{"samples", n_sampled},
                    {"link_ms_median", Median(link_ms)},
                    {"link_ms_max", Max(link_ms)},
                    {"commands_median", Median(commands)},
                    {"round_trips_median", Median(round_trips)},
                    {"bytes_out_median", Median(bytes_out)},
                    {"bytes_in_median", Median(bytes_in)},
                    {"sample_ms_median", Median(sample_ms)},
                    {"sample_ms_max", Max(sample_ms)},
                    {"events_per_sample", events_between / per},
                    {"payload_bytes_per_sample", bytes_between / per},
                    {"interval", interval},
                    {"first_to_last_sample_s", cycle_s},
                    {"decide", decide}};
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  return n_sampled >= samples ? 0 : 1;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
