#include "views/task_link_table.h"

#include <map>

#include <fmt/format.h>

namespace npuprof::views {
namespace {

using json = nlohmann::json;

std::string Str(const json& j, const char* k) {
  if (!j.is_object()) return "";
  auto it = j.find(k);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t Int(const json& j, const char* k, int64_t def) {
  if (!j.is_object()) return def;
  auto it = j.find(k);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

// The machine a task's payload names: machine.name, or every machines[].name joined by "+".
std::string MachineOf(const json& payload) {
  if (!payload.is_object()) return "";
  std::string out;
  if (auto it = payload.find("machines"); it != payload.end() && it->is_array())
    for (const auto& m : *it)
      if (!Str(m, "name").empty()) out += (out.empty() ? "" : "+") + Str(m, "name");
  if (!out.empty()) return out;
  if (auto it = payload.find("machine"); it != payload.end()) return it->is_string() ? it->get<std::string>() : Str(*it, "name");
  return "";
}

}  // namespace

TaskLinkTable BuildTaskLinkTable(const json& events) {
  TaskLinkTable t;
  std::map<std::string, size_t> open;  // task id -> its open attempt's row
  std::map<std::string, std::pair<std::string, std::string>> meta;  // task id -> kind, machine
  bool finished = false;
  if (!events.is_array()) return t;
  for (const auto& e : events) {
    const std::string type = Str(e, "type");
    const int64_t at = Int(e, "time_ms", 0);
    const json empty = json::object();
    const json& p = e.is_object() && e.contains("payload") ? e["payload"] : empty;
    const std::string id = Str(p, "task_id");
    auto start = [&](int64_t attempt) {
      TaskAttemptLink row;
      row.task_id = id;
      row.kind = meta[id].first;
      row.machine = meta[id].second;
      row.attempt = attempt;
      row.outcome = "in flight";
      row.start_ms = at;
      open[id] = t.attempts.size();
      t.attempts.push_back(std::move(row));
    };
    auto close = [&](const std::string& outcome) -> TaskAttemptLink* {
      auto it = open.find(id);
      if (it == open.end()) return nullptr;
      TaskAttemptLink& row = t.attempts[it->second];
      open.erase(it);
      row.outcome = outcome;
      row.end_ms = at;
      return &row;
    };
    if (type == "TaskScheduled" && !id.empty()) {
      meta[id] = {Str(p, "kind"), MachineOf(p.is_object() && p.contains("payload") ? p["payload"] : empty)};
      start(Int(p, "attempt", 1));
    } else if (type == "TaskRedispatched" && !id.empty()) {
      close("lost (" + (Str(p, "reason").empty() ? std::string("redispatch") : Str(p, "reason")) + ")");
      start(Int(p, "attempt", 1));
    } else if ((type == "TaskSucceeded" || type == "TaskFailed") && !id.empty()) {
      TaskAttemptLink* row = close(type == "TaskSucceeded" ? "succeeded" : "failed");
      if (row == nullptr) continue;
      auto link = sm::DecodeTaskLink(type, p);
      if (!link.ok()) row->link_error = link.status().message();
      else row->link = *link;
    } else if (type == "TaskAbandoned" && !id.empty()) {
      close("abandoned");
    } else if (type == "RunFinished") {
      finished = true;
    }
  }
  for (const auto& [id, i] : open)
    if (finished) t.attempts[i].outcome = "unanswered";
  for (const auto& row : t.attempts) {
    if (row.link) {
      sm::AddTaskLink(t.total, *row.link);
      ++t.recorded;
    } else if (row.outcome == "succeeded" || row.outcome == "failed") {
      ++t.unrecorded;
    }
  }
  return t;
}

namespace {

// Why a row has no figures.
std::string Missing(const TaskAttemptLink& r) {
  if (!r.link_error.empty()) return "unreadable";
  if (r.outcome == "succeeded" || r.outcome == "failed") return "not recorded";
  return "no answer";
}

}  // namespace

json TaskLinkTableJson(const TaskLinkTable& t) {
  json rows = json::array();
  for (const auto& r : t.attempts) {
    json j = {{"task_id", r.task_id}, {"kind", r.kind},       {"machine", r.machine},
              {"attempt", r.attempt}, {"outcome", r.outcome}};
    if (r.link) {
      j["round_trips"] = r.link->round_trips();
      j["link_ms"] = r.link->link_ms();
      j["link"] = sm::TaskLinkJson(*r.link);
    } else {
      j["round_trips"] = Missing(r);
      if (!r.link_error.empty()) j["link_error"] = r.link_error;
    }
    rows.push_back(std::move(j));
  }
  json total;
  if (t.recorded == 0) {
    total = "not recorded";
  } else {
    total = sm::TaskLinkJson(t.total);
    total["recorded_attempts"] = t.recorded;
    total["unrecorded_attempts"] = t.unrecorded;
  }
  return {{"tasks", rows}, {"link_total", total}};
}

std::string TaskLinkTableText(const TaskLinkTable& t) {
  std::string out = fmt::format("{:<28} {:<24} {:<16} {:>3} {:<12} {:>11} {:>8} {:>5} {:>5} {:>5}\n", "task", "kind",
                                "machine", "try", "outcome", "round_trips", "link_ms", "cmds", "sftp", "http");
  for (const auto& r : t.attempts) {
    if (r.link)
      out += fmt::format("{:<28} {:<24} {:<16} {:>3} {:<12} {:>11} {:>8} {:>5} {:>5} {:>5}\n", r.task_id, r.kind,
                         r.machine, r.attempt, r.outcome, r.link->round_trips(), r.link->link_ms(), r.link->commands(),
                         r.link->sftp_ops(), r.link->http_requests());
    else
      out += fmt::format("{:<28} {:<24} {:<16} {:>3} {:<12} {:>11}\n", r.task_id, r.kind, r.machine, r.attempt,
                         r.outcome, Missing(r));
  }
  if (t.recorded == 0) {
    out += "round trips: not recorded (the run's events predate them, or no task was answered)\n";
  } else {
    out += fmt::format("total: {} round trips, {} ms on the link, {} commands, {} sftp ops, {} http requests, {} "
                       "handshakes over {} attempts",
                       t.total.round_trips(), t.total.link_ms(), t.total.commands(), t.total.sftp_ops(),
                       t.total.http_requests(), t.total.handshakes(), t.recorded);
    if (t.unrecorded > 0) out += fmt::format(" ({} answered attempts did not record them)", t.unrecorded);
    out += "\n";
  }
  return out;
}

}  // namespace npuprof::views
