#include "tests/views/trace_validator.h"

#include <cmath>

#include <fmt/format.h>

namespace npuprof::testing {

using nlohmann::json;

namespace {

bool IsInt(const json& j, const char* k) { return j.contains(k) && j[k].is_number_integer(); }

bool FiniteNonNeg(const json& j, const char* k) {
  return j.contains(k) && j[k].is_number() && std::isfinite(j[k].get<double>()) && j[k].get<double>() >= 0;
}

}  // namespace

TraceCheck ValidateChromeTrace(const std::string& text) {
  TraceCheck c;
  auto bad = [&](size_t i, const std::string& what) { c.problems.push_back(fmt::format("event {}: {}", i, what)); };
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    c.problems.push_back("not valid JSON");
    return c;
  }
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    c.events = doc["traceEvents"];
  } else if (doc.is_array()) {
    c.events = doc;
  } else {
    c.problems.push_back("top level is neither {\"traceEvents\": [...]} nor an array");
    return c;
  }

  std::map<std::pair<int, int>, std::vector<std::string>> open_b;       // B stacks per thread
  std::map<std::pair<int, int>, std::vector<double>> x_ends;           // X nesting per thread
  std::map<std::pair<int, int>, double> last_ts;                       // per thread
  std::map<std::pair<int, std::string>, double> last_counter_ts;       // per counter track
  std::set<int> pids_used;
  std::set<std::pair<int, int>> threads_used;
  for (size_t i = 0; i < c.events.size(); ++i) {
    const json& e = c.events[i];
    if (!e.is_object()) {
      bad(i, "not an object");
      continue;
    }
    if (!e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty())
      bad(i, "no name");
    if (!e.contains("ph") || !e["ph"].is_string()) {
      bad(i, "no ph");
      continue;
    }
    const std::string ph = e["ph"];
    const std::string name = e.value("name", "");
    c.phase_counts[ph]++;
    if (!IsInt(e, "pid") || !IsInt(e, "tid")) {
      bad(i, "pid and tid must be integers");
      continue;
    }
    if (e.contains("args") && !e["args"].is_object()) bad(i, "args is not an object");
    const int pid = e["pid"], tid = e["tid"];
    const std::pair<int, int> thread{pid, tid};
    if (ph == "M") {
      const json args = e.value("args", json::object());
      if (name == "process_name" || name == "thread_name") {
        if (!args.contains("name") || !args["name"].is_string()) bad(i, name + " without args.name");
        else if (name == "process_name") c.process_names[pid] = args["name"];
        else c.thread_names[thread] = args["name"];
      } else if (name == "process_sort_index" || name == "thread_sort_index") {
        if (!IsInt(args, "sort_index")) bad(i, name + " without an integer args.sort_index");
      } else if (name != "process_labels") {
        bad(i, "unknown metadata event " + name);
      }
      continue;
    }
    if (ph != "X" && ph != "B" && ph != "E" && ph != "i" && ph != "I" && ph != "C") {
      bad(i, "unknown ph " + ph);
      continue;
    }
    pids_used.insert(pid);
    if (!FiniteNonNeg(e, "ts")) {
      bad(i, "ts missing, negative or not a number");
      continue;
    }
    const double ts = e["ts"];
    if (ph == "C") {
      const json args = e.value("args", json::object());
      if (args.empty()) bad(i, "counter without args");
      for (auto it = args.begin(); it != args.end(); ++it)
        if (!it->is_number()) bad(i, "counter arg " + it.key() + " is not a number");
      auto key = std::make_pair(pid, name);
      if (last_counter_ts.count(key) && ts < last_counter_ts[key]) bad(i, "counter ts goes back on " + name);
      last_counter_ts[key] = ts;
      c.counter_names.insert(name);
      continue;
    }
    threads_used.insert(thread);
    if (last_ts.count(thread) && ts < last_ts[thread])
      bad(i, fmt::format("ts {} before the previous event of pid {} tid {} ({})", ts, pid, tid, last_ts[thread]));
    last_ts[thread] = ts;
    if (ph == "X") {
      if (!FiniteNonNeg(e, "dur")) {
        bad(i, "X without a dur >= 0");
        continue;
      }
      const double end = ts + e["dur"].get<double>();
      auto& ends = x_ends[thread];
      while (!ends.empty() && ends.back() <= ts) ends.pop_back();
      if (!ends.empty() && end > ends.back())
        bad(i, fmt::format("X span '{}' [{}, {}] overlaps the enclosing span ending at {} without nesting", name, ts,
                           end, ends.back()));
      ends.push_back(end);
    } else if (ph == "B") {
      open_b[thread].push_back(name);
    } else if (ph == "E") {
      auto& st = open_b[thread];
      if (st.empty()) bad(i, "E without an open B");
      else {
        if (e.contains("name") && e["name"] != st.back()) bad(i, "E '" + name + "' closes B '" + st.back() + "'");
        st.pop_back();
      }
    } else if (e.contains("s") && (!e["s"].is_string() || (e["s"] != "g" && e["s"] != "p" && e["s"] != "t"))) {
      bad(i, "instant scope s must be g, p or t");
    }
  }
  for (const auto& [thread, st] : open_b)
    if (!st.empty())
      c.problems.push_back(fmt::format("pid {} tid {}: {} B event(s) never closed", thread.first, thread.second,
                                       st.size()));
  for (int pid : pids_used)
    if (!c.process_names.count(pid)) c.problems.push_back(fmt::format("pid {} has no process_name", pid));
  for (const auto& t : threads_used)
    if (!c.thread_names.count(t))
      c.problems.push_back(fmt::format("pid {} tid {} has no thread_name", t.first, t.second));
  return c;
}

}  // namespace npuprof::testing
