#include "statemachine/operator_memory_report.h"

#include <cmath>

#include <fmt/format.h>

#include "statemachine/operator_memory_digest.h"

namespace npuprof::sm {

namespace {

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

json FileProblems(const OperatorMemoryRank& r) {
  json out = json::array();
  if (!r.analyse_problem.empty()) out.push_back(r.analyse_problem);
  if (r.analyse_exit && *r.analyse_exit != 0) out.push_back(fmt::format("analyse() exited {}", *r.analyse_exit));
  for (const OperatorMemoryFile* f : {&r.memory_record, &r.operator_memory})
    if (f->status != "ok") out.push_back(f->problem.empty() ? f->status : f->problem);
  return out;
}

json DeviceEntry(const OperatorMemoryRank& r, const std::string& blob) {
  json e = {{"status", "ok"},
            {"problems", FileProblems(r)},
            {"peak_operators", json::array()},
            {"peak_allocated_mb", nullptr},
            {"peak_reserved_mb", nullptr},
            {"fragmentation_mb", nullptr},
            {"peak_at_us", nullptr},
            {"peak_evidence", nullptr},
            {"window", nullptr},
            {"dir", r.dir}};
  const bool record_ok = r.memory_record.status == "ok" && r.peak.has_value();
  const bool ops_ok = r.operator_memory.status == "ok";
  e["status"] = !record_ok ? "unavailable" : ops_ok ? "ok" : "partial";
  if (record_ok) {
    const auto& p = *r.peak;
    e["peak_allocated_mb"] = R3(p.allocated_mb);
    e["peak_reserved_mb"] = R3(p.reserved_mb);
    e["fragmentation_mb"] = R3(p.reserved_mb - p.allocated_mb);
    e["peak_at_us"] = p.timestamp_us;
    e["peak_evidence"] = {{"file", "memory_record.csv"}, {"row", p.row}, {"dir", r.dir}, {"blob", blob}};
  }
  if (r.window)
    e["window"] = {{"first_us", r.window->first_us},
                   {"last_us", r.window->last_us},
                   {"max_reserved_mb", R3(r.window->max_reserved_mb)},
                   {"pta_rows", r.window->pta_rows}};
  if (record_ok && ops_ok)
    for (const auto& op : r.operators)
      e["peak_operators"].push_back(
          {{"name", op.name},
           {"size_mb", R3(op.size_kb / 1024.0)},
           {"allocated_at_us", op.allocated_us},
           {"released_at_us", op.released_us ? json(*op.released_us) : json(nullptr)},
           {"evidence", {{"file", "operator_memory.csv"}, {"row", op.row}, {"dir", r.dir}, {"blob", blob}}}});
  return e;
}

json Unavailable(const std::string& why) {
  return {{"status", "unavailable"}, {"problems", json::array({why})}, {"peak_operators", json::array()},
          {"peak_allocated_mb", nullptr}, {"peak_reserved_mb", nullptr}, {"fragmentation_mb", nullptr},
          {"peak_at_us", nullptr}, {"peak_evidence", nullptr}, {"window", nullptr}};
}

}  // namespace

void AddOperatorMemory(const json& record, json& devices, json& notes) {
  if (!record.is_object() || !devices.is_array()) return;
  const auto blob_it = record.find("blob");
  const std::string blob = blob_it != record.end() && blob_it->is_string() ? blob_it->get<std::string>() : "";
  const auto ranks_it = record.find("ranks");
  auto ranks = ranks_it == record.end() ? Result<std::vector<OperatorMemoryRank>>(Status::Corruption("ranks: is missing"))
                                        : DecodeOperatorMemoryRanks(*ranks_it);
  if (!ranks.ok()) {
    notes.push_back("operator memory: the recorded digest cannot be read (" + ranks.status().message() + ")");
    for (auto& d : devices) d["operator_memory"] = Unavailable(ranks.status().message());
    return;
  }
  for (auto& d : devices) {
    const auto id_it = d.find("device_id");
    const OperatorMemoryRank* match = nullptr;
    if (id_it != d.end() && id_it->is_number_integer())
      for (const auto& r : *ranks)
        if (r.device_id && *r.device_id == id_it->get<int64_t>()) match = &r;
    if (match == nullptr) {
      json e = Unavailable("no profiled rank of this device (no *_ascend_pt directory names it)");
      e["status"] = "no_data";
      d["operator_memory"] = std::move(e);
      continue;
    }
    d["operator_memory"] = DeviceEntry(*match, blob);
  }
  const auto note_it = record.find("note");
  if (note_it != record.end() && note_it->is_string() && !note_it->get<std::string>().empty())
    notes.push_back("operator memory: " + note_it->get<std::string>());
  notes.push_back(
      "operator memory: the peak is the PTA memory_record.csv row with the largest Total Allocated(MB); "
      "fragmentation = its Total Reserved(MB) - Total Allocated(MB); the operators listed were allocated at or "
      "before it and released after it");
}

}  // namespace npuprof::sm
