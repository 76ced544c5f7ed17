#include "views/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/time_util.h"
#include "common/utf8.h"
#include "statemachine/task_link.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

constexpr int kRunPid = 1;
constexpr int kNoWorkerPid = 2;
constexpr int kFirstWorkerPid = 10;
constexpr int kHbmPid = 1000;
constexpr int kFirstNodePid = 2000;
constexpr int kStateTid = 1;
constexpr int kEventsTid = 2;
constexpr int kTimersTid = 3;

// One task attempt, from its dispatch decision to its outcome.
struct Attempt {
  std::string task_id;
  std::string name;
  int64_t attempt = 1;
  std::string dispatch;  // first | retry | worker_lost | recovery
  double start_us = 0;
  double end_us = 0;
  bool open = true;
  std::string worker;
  std::string outcome;
  json args = json::object();
};

struct TaskMeta {
  std::string kind;
  std::string detail;  // role, phase or action
};

struct Instant {
  int tid;
  double ts;
  std::string name;
  json args;
};

struct Span {
  double ts, dur;
  std::string name;
  json args;
};

std::string Text(std::string_view s, size_t max = 300) { return TruncateUtf8(s, max); }

std::string TaskDetail(const json& payload) {
  for (const char* k : {"role", "phase", "action"})
    if (Field(payload, k).is_string()) return StrField(payload, k);
  return "";
}

std::string AttemptName(const TaskMeta& m, int64_t attempt) {
  std::string n = m.kind.empty() ? "task" : m.kind;
  if (!m.detail.empty()) n += " " + m.detail;
  if (attempt > 1) n += fmt::format(" #{}", attempt);
  return n;
}

// Run-level events shown as instants under their own name; nullptr for the rest.
const char* KeyEventName(const std::string& type) {
  static const std::map<std::string, const char*> kNames = {
      {"DevicesRequested", "devices requested"}, {"DevicesLeased", "devices leased"},
      {"DevicesReleased", "devices released"},   {"CancelRequested", "cancel requested"},
      {"SignalReceived", "signal"},              {"RunRecovered", "recovered after a restart"},
      {"WatchRequested", "watch requested"}};
  auto it = kNames.find(type);
  return it == kNames.end() ? nullptr : it->second;
}

json Meta(const char* what, int pid, int tid, const json& args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

class TraceBuilder {
 public:
  explicit TraceBuilder(double origin_us) : origin_us_(origin_us) {}

  double Ts(double abs_us) const { return std::max(0.0, abs_us - origin_us_); }

  void Feed(const json& e, double t_us) {
    const std::string type = StrField(e, "type");
    const json& p = Field(e, "payload");
    last_us_ = std::max(last_us_, t_us);
    if (type == "RunSubmitted") {
      kind_ = StrField(p, "kind");
      state_start_us_ = t_us;
      Event(kEventsTid, t_us, "submitted", {{"kind", kind_}, {"machine", StrField(p, "machine")}});
    } else if (type == "StateChanged") {
      const std::string to = StrField(p, "to");
      CloseState(t_us, StrField(p, "from", state_));
      state_ = to;
      state_start_us_ = t_us;
      if (to == "ready") Event(kEventsTid, t_us, "ready", {});
    } else if (type == "TaskScheduled") {
      const std::string id = StrField(p, "task_id");
      TaskMeta& m = meta_[id];
      m.kind = StrField(p, "kind");
      m.detail = TaskDetail(Field(p, "payload"));
      Open(id, NumField(p, "attempt").value_or(1), "first", t_us);
    } else if (type == "TaskRedispatched") {
      const std::string id = StrField(p, "task_id");
      const int64_t attempt = static_cast<int64_t>(NumField(p, "attempt").value_or(1));
      const std::string reason = StrField(p, "reason", "redispatch");
      Close(id, t_us, "lost (" + reason + ")", StrField(p, "worker"), json::object());
      Open(id, attempt, reason, t_us);
    } else if (type == "TaskSucceeded" || type == "TaskFailed") {
      const bool ok = type == "TaskSucceeded";
      json args = json::object();
      if (!ok) {
        args["error_kind"] = StrField(p, "error_kind");
        args["error"] = Text(StrField(p, "error"));
        args["final"] = Field(p, "final").is_boolean() ? Field(p, "final") : json(nullptr);
      }
      const json& result = Field(p, "result");
      if (Field(result, "ssh_commands").is_number_integer()) args["ssh_commands"] = Field(result, "ssh_commands");
      // The attempt's link figures (statemachine/task_link.h), or why there are none.
      if (auto link = sm::DecodeTaskLink(type, p); !link.ok()) {
        args["link_error"] = link.status().message();
      } else if (link->has_value()) {
        args["round_trips"] = (*link)->round_trips();
        args["link_ms"] = (*link)->link_ms();
        args["link"] = sm::TaskLinkJson(**link);
      } else {
        args["round_trips"] = "not recorded";
      }
      const std::string id = StrField(p, "task_id");
      Close(id, t_us, ok ? "succeeded" : "failed", StrField(p, "worker"), args);
      KeyTaskEvent(id, ok, result, t_us);
    } else if (type == "TaskAbandoned") {
      Close(StrField(p, "task_id"), t_us, "abandoned", "", {{"reason", Text(StrField(p, "reason"))}});
    } else if (type == "TaskResultIgnored") {
      Event(kEventsTid, t_us, "result ignored",
            {{"task_id", StrField(p, "task_id")}, {"attempt", Field(p, "attempt")},
             {"worker", StrField(p, "worker")}, {"reason", Text(StrField(p, "reason"))}});
    } else if (type == "TaskRetryScheduled") {
      Event(kTimersTid, t_us, "retry scheduled",
            {{"task_id", StrField(p, "task_id")}, {"next_attempt", Field(p, "next_attempt")},
             {"timer_id", StrField(p, "timer_id")}});
    } else if (type == "TimerScheduled") {
      Event(kTimersTid, t_us, "timer " + StrField(p, "purpose", "scheduled"),
            {{"timer_id", StrField(p, "timer_id")}, {"deadline_ms", Field(p, "deadline_ms")}});
    } else if (type == "TimerFired" || type == "TimerCancelled") {
      Event(kTimersTid, t_us, type == "TimerFired" ? "timer fired" : "timer cancelled",
            {{"timer_id", StrField(p, "timer_id")}});
    } else if (type == "RunFinished") {
      CloseState(t_us, state_);
      state_start_us_ = -1;
      CloseAllOpen(t_us, "open at the end of the run");
      json args = {{"status", StrField(p, "status")}};
      if (!StrField(p, "error").empty()) args["error"] = Text(StrField(p, "error"));
      Event(kEventsTid, t_us, "finished " + StrField(p, "status"), args);
      finished_ = true;
    } else if (const char* name = KeyEventName(type)) {
      std::string n = name;
      if (type == "SignalReceived") n += " " + StrField(p, "name");
      Event(kEventsTid, t_us, n, TrimArgs(p.is_object() ? p : json::object()));
    }
  }

  json Finish(const std::string& run_id, double origin_us, const std::vector<DeviceHbmSeries>& hbm,
              const std::vector<NodeTimeline>& nodes) {
    if (!finished_) {
      CloseState(last_us_, state_);
      CloseAllOpen(last_us_, "in flight");
    }
    std::vector<json> out;
    out.push_back(Meta("process_name", kRunPid, 0, {{"name", fmt::format("run {} ({})", run_id, kind_)}}));
    out.push_back(Meta("process_sort_index", kRunPid, 0, {{"sort_index", 0}}));
    for (const auto& [tid, name] : std::vector<std::pair<int, const char*>>{
             {kStateTid, "state"}, {kEventsTid, "events"}, {kTimersTid, "timers"}}) {
      out.push_back(Meta("thread_name", kRunPid, tid, {{"name", name}}));
      out.push_back(Meta("thread_sort_index", kRunPid, tid, {{"sort_index", tid}}));
    }
    for (const auto& s : states_) out.push_back(X(kRunPid, kStateTid, s));
    std::stable_sort(instants_.begin(), instants_.end(), [](const auto& a, const auto& b) {
      return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts;
    });
    for (const auto& i : instants_)
      out.push_back({{"name", i.name}, {"ph", "i"}, {"s", "t"}, {"ts", i.ts}, {"pid", kRunPid}, {"tid", i.tid},
                     {"args", i.args}});
    AppendAttempts(out);
    AppendHbm(out, hbm, nodes);
    AppendNodes(out, nodes);
    json doc = {{"traceEvents", out},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"run_id", run_id},
                  {"kind", kind_},
                  {"origin", IsoTimeMs(static_cast<int64_t>(std::floor(origin_us / 1000.0)))},
                  {"origin_us", origin_us},
                  {"generator", "npuprof trace"}}}};
    if (!nodes.empty()) {
      json offsets = json::array();
      for (const auto& n : nodes)
        offsets.push_back({{"node", n.node},
                           {"machine", Text(n.machine, 120)},
                           {"pid", kFirstNodePid + n.node},
                           {"offset_ms", n.offset_ms},
                           {"uncertainty_ms", n.uncertainty_ms ? json(*n.uncertainty_ms) : json(nullptr)},
                           {"measured", n.measured}});
      doc["otherData"]["clock_offsets"] = std::move(offsets);
      doc["otherData"]["clock_rule"] =
          "a node's timestamp minus its offset_ms is npuprof's host time; nodes measured 'none' keep their own clock";
    }
    return doc;
  }

 private:
  static json TrimArgs(json args) {
    for (auto it = args.begin(); it != args.end(); ++it)
      if (it->is_string()) *it = Text(it->get<std::string>());
    return args;
  }

  void Event(int tid, double t_us, std::string name, json args) {
    instants_.push_back({tid, Ts(t_us), std::move(name), args.is_null() ? json::object() : std::move(args)});
  }

  void CloseState(double t_us, const std::string& name) {
    if (state_start_us_ < 0) return;
    states_.push_back({Ts(state_start_us_), std::max(0.0, t_us - state_start_us_), name.empty() ? "new" : name,
                       json::object()});
  }

  void Open(const std::string& id, double attempt, const std::string& why, double t_us) {
    Attempt a;
    a.task_id = id;
    a.attempt = static_cast<int64_t>(attempt);
    a.name = AttemptName(meta_[id], a.attempt);
    a.dispatch = why;
    a.start_us = t_us;
    open_[id] = attempts_.size();
    attempts_.push_back(std::move(a));
  }

  void Close(const std::string& id, double t_us, const std::string& outcome, const std::string& worker,
             const json& args) {
    auto it = open_.find(id);
    if (it == open_.end()) return;
    Attempt& a = attempts_[it->second];
    a.end_us = std::max(a.start_us, t_us);
    a.open = false;
    a.outcome = outcome;
    a.worker = worker;
    for (auto j = args.begin(); j != args.end(); ++j) a.args[j.key()] = *j;
    open_.erase(it);
  }

  void CloseAllOpen(double t_us, const std::string& outcome) {
    std::vector<std::string> ids;
    for (const auto& [id, idx] : open_) ids.push_back(id);
    for (const auto& id : ids) Close(id, t_us, outcome, "", json::object());
  }

  void KeyTaskEvent(const std::string& id, bool ok, const json& result, double t_us) {
    const TaskMeta& m = meta_[id];
    if (!ok) return;
    if (m.kind == "torch_profile.control" && !m.detail.empty())
      Event(kEventsTid, t_us, m.detail, {{"status", Field(result, "status")}, {"ok", Field(result, "ok")}});
    else if (m.kind == "service.stop")
      Event(kEventsTid, t_us, "service stopped",
            {{"stopped", Field(result, "stopped")}, {"already_gone", Field(result, "already_gone")}});
    else if (m.kind == "service.wait_ready" || m.kind == "memory.infer")
      Event(kEventsTid, t_us, m.kind == "memory.infer" ? "inference answered" : "service ready",
            {{"task_id", id}});
  }

  json X(int pid, int tid, const Span& s) const {
    return {{"name", s.name}, {"ph", "X"}, {"ts", s.ts}, {"dur", s.dur}, {"pid", pid}, {"tid", tid}, {"args", s.args}};
  }

  void AppendAttempts(std::vector<json>& out) {
    // Workers in order of their first attempt; attempts without a worker on their own process.
    std::vector<std::string> workers;
    for (const auto& a : attempts_)
      if (!a.worker.empty() && std::find(workers.begin(), workers.end(), a.worker) == workers.end())
        workers.push_back(a.worker);
    auto pid_of = [&](const Attempt& a) {
      if (a.worker.empty()) return kNoWorkerPid;
      return kFirstWorkerPid + static_cast<int>(std::find(workers.begin(), workers.end(), a.worker) - workers.begin());
    };
    std::vector<size_t> order(attempts_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      const Attempt &a = attempts_[x], &b = attempts_[y];
      if (pid_of(a) != pid_of(b)) return pid_of(a) < pid_of(b);
      return a.start_us < b.start_us;
    });
    std::map<int, std::vector<double>> lanes_end;  // pid -> end of the last span per lane
    std::vector<json> spans;
    for (size_t idx : order) {
      const Attempt& a = attempts_[idx];
      const int pid = pid_of(a);
      auto& lanes = lanes_end[pid];
      size_t lane = 0;
      while (lane < lanes.size() && lanes[lane] > a.start_us) ++lane;
      if (lane == lanes.size()) lanes.push_back(0);
      lanes[lane] = a.end_us;
      json args = a.args;
      args["task_id"] = a.task_id;
      args["attempt"] = a.attempt;
      args["dispatch"] = a.dispatch;
      args["outcome"] = a.outcome;
      if (!a.worker.empty()) args["worker"] = a.worker;
      spans.push_back(X(pid, static_cast<int>(lane) + 1,
                        {Ts(a.start_us), std::max(0.0, a.end_us - a.start_us), a.name, args}));
    }
    auto name_process = [&](int pid, const std::string& name, int sort) {
      out.push_back(Meta("process_name", pid, 0, {{"name", name}}));
      out.push_back(Meta("process_sort_index", pid, 0, {{"sort_index", sort}}));
      for (size_t l = 0; l < lanes_end[pid].size(); ++l) {
        out.push_back(Meta("thread_name", pid, static_cast<int>(l) + 1, {{"name", fmt::format("slot {}", l + 1)}}));
        out.push_back(Meta("thread_sort_index", pid, static_cast<int>(l) + 1, {{"sort_index", l + 1}}));
      }
    };
    for (size_t i = 0; i < workers.size(); ++i)
      name_process(kFirstWorkerPid + static_cast<int>(i), "worker " + Text(workers[i], 120), 10 + static_cast<int>(i));
    if (lanes_end.count(kNoWorkerPid)) name_process(kNoWorkerPid, "attempts without a worker", 5);
    // Per track in time order: the spans of one pid were laid out in start order.
    std::stable_sort(spans.begin(), spans.end(), [](const json& a, const json& b) {
      if (a["pid"] != b["pid"]) return a["pid"].get<int>() < b["pid"].get<int>();
      if (a["tid"] != b["tid"]) return a["tid"].get<int>() < b["tid"].get<int>();
      return a["ts"].get<double>() < b["ts"].get<double>();
    });
    for (auto& s : spans) out.push_back(std::move(s));
  }

  // A series of a node (its machine names one of `nodes`) goes to that
  // node's process; any other to the HBM process.
  void AppendHbm(std::vector<json>& out, const std::vector<DeviceHbmSeries>& hbm,
                 const std::vector<NodeTimeline>& nodes) {
    const auto pid_of = [&nodes](const DeviceHbmSeries& s) {
      for (const auto& n : nodes)
        if (!s.machine.empty() && n.machine == s.machine) return kFirstNodePid + n.node;
      return kHbmPid;
    };
    std::set<int> named;
    for (const auto& s : hbm) {
      if (s.samples.empty()) continue;
      const int pid = pid_of(s);
      if (!named.insert(pid).second) continue;
      if (pid == kHbmPid) {
        out.push_back(Meta("process_name", kHbmPid, 0, {{"name", "HBM (msprof npu_mem)"}}));
        out.push_back(Meta("process_sort_index", kHbmPid, 0, {{"sort_index", 1000}}));
      }
      out.push_back(Meta("thread_name", pid, 0, {{"name", pid == kHbmPid ? "counters" : "HBM (msprof npu_mem)"}}));
    }
    for (const auto& s : hbm) {
      const int pid = pid_of(s);
      std::vector<HbmSample> samples;
      for (const auto& p : s.samples)
        if (std::isfinite(p.t_us) && std::isfinite(p.mb)) samples.push_back(p);
      std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.t_us < b.t_us; });
      std::string name =
          fmt::format("device {} HBM ({})", s.device_id, s.event.empty() ? std::string("npu_mem") : Text(s.event, 40));
      if (pid == kHbmPid && !s.machine.empty()) name = Text(s.machine, 120) + " " + name;
      for (const auto& p : samples)
        out.push_back({{"name", name}, {"ph", "C"}, {"ts", Ts(p.t_us)}, {"pid", pid}, {"tid", 0},
                       {"args", {{"MB", p.mb}}}});
    }
  }

  // One process per node, one thread per rank: the rank's kernel window
  // moved from the node's clock onto npuprof's by the node's offset.
  void AppendNodes(std::vector<json>& out, const std::vector<NodeTimeline>& nodes) {
    for (const auto& n : nodes) {
      const int pid = kFirstNodePid + n.node;
      std::string clock = n.measured == "none"
                              ? std::string("own clock, offset not measured")
                              : fmt::format("clock {:+.1f} ms", n.offset_ms);
      if (n.uncertainty_ms) clock += fmt::format(" ± {:.1f}", *n.uncertainty_ms);
      out.push_back(Meta("process_name", pid, 0,
                         {{"name", fmt::format("node {} {} ({})", n.node, Text(n.machine, 120), clock)}}));
      out.push_back(Meta("process_sort_index", pid, 0, {{"sort_index", 2000 + n.node}}));
      for (size_t r = 0; r < n.ranks.size(); ++r) {
        const RankWindow& w = n.ranks[r];
        const int tid = static_cast<int>(r) + 1;
        std::string tname = Text(w.rank_dir, 160);
        if (w.device_id) tname += fmt::format(" (device {})", *w.device_id);
        out.push_back(Meta("thread_name", pid, tid, {{"name", tname}}));
        out.push_back(Meta("thread_sort_index", pid, tid, {{"sort_index", tid}}));
        const double start = w.start_us - n.offset_ms * 1000.0;
        const double ts = Ts(start);
        out.push_back({{"name", "kernels"},
                       {"ph", "X"},
                       {"ts", ts},
                       {"dur", std::max(0.0, Ts(start + (w.end_us - w.start_us)) - ts)},
                       {"pid", pid},
                       {"tid", tid},
                       {"args",
                        {{"machine", Text(n.machine, 120)},
                         {"rank_dir", Text(w.rank_dir, 160)},
                         {"path", Text(w.path, 400)},
                         {"device_id", w.device_id ? json(*w.device_id) : json(nullptr)},
                         {"node_clock_start_us", w.start_us},
                         {"node_clock_end_us", w.end_us},
                         {"offset_ms", n.offset_ms}}}});
      }
    }
  }

  double origin_us_;
  double last_us_ = 0;
  std::string kind_;
  std::string state_ = "new";
  double state_start_us_ = -1;
  bool finished_ = false;
  std::vector<Span> states_;
  std::vector<Instant> instants_;
  std::vector<Attempt> attempts_;
  std::map<std::string, size_t> open_;
  std::map<std::string, TaskMeta> meta_;
};

}  // namespace

Result<json> BuildChromeTrace(const json& events_doc, const std::vector<DeviceHbmSeries>& hbm,
                              const std::vector<NodeTimeline>& nodes) {
  const json& events = events_doc.is_array() ? events_doc : Field(events_doc, "events");
  if (!events.is_array())
    return Status::Invalid("trace: expected the JSON of `npuprof events RUN --json` (an object with \"events\")");
  if (events.empty()) return Status::Invalid("trace: the run has no events");
  for (size_t i = 0; i < events.size(); ++i) {
    auto t = NumField(events[i], "time_ms");
    if (!t || !std::isfinite(*t))
      return Status::Invalid(fmt::format("trace: event {} has no numeric time_ms (is this `npuprof events RUN "
                                         "--json` output?)",
                                         i));
  }
  // Times never step back along the log (see below): the first event is the earliest.
  double origin_us = *NumField(events[0], "time_ms") * 1000.0;
  for (const auto& s : hbm)
    for (const auto& p : s.samples)
      if (std::isfinite(p.t_us)) origin_us = std::min(origin_us, p.t_us);
  for (const auto& n : nodes)
    for (const auto& r : n.ranks)
      if (std::isfinite(r.start_us - n.offset_ms * 1000.0))
        origin_us = std::min(origin_us, r.start_us - n.offset_ms * 1000.0);
  try {
    std::string run_id = StrField(events_doc, "run_id");
    if (run_id.empty()) run_id = "?";
    TraceBuilder b(origin_us);
    // Events in log order (seq). Their times come from the server's wall
    // clock; one that steps back is taken as simultaneous with the event
    // before it, so every track stays in time order.
    double t_prev = -INFINITY;
    for (const auto& e : events) {
      t_prev = std::max(t_prev, *NumField(e, "time_ms") * 1000.0);
      b.Feed(e, t_prev);
    }
    return b.Finish(Text(run_id, 120), origin_us, hbm, nodes);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("trace: building failed: ") + e.what());
  }
}

}  // namespace npuprof::views
