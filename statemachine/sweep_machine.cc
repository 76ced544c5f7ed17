#include "statemachine/sweep_machine.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/json_field.h"
#include "kind_data.pb.h"
#include "run_specs.pb.h"
#include "statemachine/event_types.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/managed_flags.h"
#include "statemachine/spec_checks.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

constexpr size_t kMaxGridKeys = 8;

bool IsChildKind(const std::string& k) { return k == "memory-profile" || k == "torch-profile"; }

std::string PointText(const json& point) {
  const std::string out = SweepPointText(point);
  return out.empty() ? "{}" : out;
}

using Child = kind_data::SweepData::Child;
using ChildList = google::protobuf::RepeatedPtrField<Child>;

// The children as the fold recorded them (ChildRunRequested, in point order).
// In a decision (the cancel's included), data that does not decode throws
// (DataOf); for the broker's helpers and the projections it reads as no
// children, the problem `verify` names.
ChildList Children(const RunState& s) { return DataOf<kind_data::SweepData>(s).children(); }
ChildList ChildrenOrNone(const RunState& s) {
  auto data = ReadData<kind_data::SweepData>(s);
  return data.ok() ? data->children() : ChildList();
}

// The fold writes "requested" until the child's end is known.
bool Finished(const Child& child) { return !child.status().empty() && child.status() != "requested"; }

// A child's grid point, from the spec as stored (a Struct would turn its
// integers into doubles).
const json& PointOf(const RunState& s, const Child& c) {
  static const json none = json::object();
  const json& points = ArrField(s.spec, "points");
  const auto i = static_cast<size_t>(c.index());
  return c.index() >= 0 && i < points.size() && points[i].is_object() && points[i].contains("point")
             ? points[i]["point"]
             : none;
}

// The sweep's verdict from its children (only meaningful once all ended).
std::string Verdict(const RunState& s, const ChildList& ch) {
  if (s.cancel_requested) return "cancelled";
  if (ch.empty()) return s.terminal ? "failed" : "running";
  int ok = 0, done = 0;
  for (const auto& c : ch) {
    done += Finished(c) ? 1 : 0;
    ok += c.status() == "ok" ? 1 : 0;
  }
  if (done < ch.size()) return "running";
  return ok == ch.size() ? "ok" : "partial";
}

void FinishIfAllEnded(Decision& d) {
  const RunState& s = d.state();
  const ChildList ch = Children(s);
  for (const auto& c : ch)
    if (!Finished(c)) return;
  const std::string v = Verdict(s, ch);
  if (v == "cancelled")
    return d.Finish(RunStatus::kCancelled, "cancelled by request (every unfinished point was cancelled)");
  if (v == "ok") return d.Finish(RunStatus::kOk);
  std::vector<std::string> parts;
  size_t ok = 0;
  for (const auto& c : ch) {
    ok += c.status() == "ok" ? 1 : 0;
    parts.push_back(fmt::format("{} ({}): {}", c.run_id(), PointText(PointOf(s, c)), c.status()));
  }
  d.Finish(RunStatus::kFailed, fmt::format("partial: {} of {} points ok; {}", ok, ch.size(), fmt::join(parts, "; ")));
}

// The child spec's value of a managed option's field equals the point's
// value for that key (as written: "0.9" for 0.9, "true" for true).
bool SameValue(const json& given, const json& point_value) {
  const std::string text = point_value.is_string() ? point_value.get<std::string>() : point_value.dump();
  if (given.is_string()) return given.get<std::string>() == text;
  if (given.is_boolean()) return text == (given.get<bool>() ? "true" : "false");
  if (given.is_number()) {
    const json parsed = json::parse(text, nullptr, false);
    return parsed.is_number() && parsed.get<double>() == given.get<double>();
  }
  return given.is_null() && (text == "null" || text.empty());
}

Status CheckPointGivesItsValues(const std::string& child_kind, const json& point, const json& child) {
  for (auto it = point.begin(); it != point.end(); ++it) {
    const auto field = ManagedFieldOfOption(child_kind, "--" + it.key());
    if (!field) continue;
    const json& given = child.contains(*field) ? child[*field] : json(nullptr);
    if (!SameValue(given, it.value()))
      return Status::Invalid(fmt::format("the point says {}={} but its spec gives {} = {}; a point's spec must be "
                                         "what the point says (npuprof submit sweep builds both)",
                                         it.key(), it->is_string() ? it->get<std::string>() : it->dump(), *field,
                                         given.dump()));
  }
  return Status::Ok();
}

// A point whose child spec names the machines of a deployment.
bool IsDeploymentPoint(const json& child) {
  return child.is_object() && child.contains("nodes") && child["nodes"].is_array() && !child["nodes"].empty();
}

// The sweep's `nodes` (sweep_machine.h): absent, or a list of distinct
// {machine, machine_record} the broker filled from the inventory.
Status CheckSweepNodes(json& spec) {
  if (!spec.contains("nodes") || spec["nodes"].is_null()) {
    spec.erase("nodes");
    return Status::Ok();
  }
  if (!spec["nodes"].is_array())
    return Status::Invalid("nodes must be the list of every machine the points' deployments name ({machine})");
  std::set<std::string> seen;
  for (size_t i = 0; i < spec["nodes"].size(); ++i) {
    json& n = spec["nodes"][i];
    if (!n.is_object()) return Status::Invalid(fmt::format("nodes[{}] must be an object {{machine}}", i));
    if (Status s = RequireSafeName(n, "machine", true); !s.ok())
      return Status::Invalid(fmt::format("nodes[{}].{}", i, s.message()));
    const std::string m = n["machine"];
    if (!n.contains("machine_record") || !n["machine_record"].is_object())
      return Status::Invalid(fmt::format("nodes[{}].machine: machine '{}' is not in the inventory; add it with "
                                         "`npuprof machine add {} --host ...`",
                                         i, m, m));
    if (!seen.insert(m).second) return Status::Invalid(fmt::format("nodes[{}].machine: '{}' is listed twice", i, m));
  }
  return Status::Ok();
}

// Gives a multi-node point's nodes (and its head) their records from the
// sweep's nodes; a machine the sweep does not list is refused.
Status GiveNodeRecords(const json& sweep, json& child) {
  const json none = json::array();
  const json& known = sweep.contains("nodes") && sweep["nodes"].is_array() ? sweep["nodes"] : none;
  for (size_t j = 0; j < child["nodes"].size(); ++j) {
    json& n = child["nodes"][j];
    if (!n.is_object() || !n.value("machine", json()).is_string())
      return Status::Invalid(fmt::format("nodes[{}] must be an object {{machine, devices}}", j));
    const std::string m = n["machine"];
    const auto it = std::find_if(known.begin(), known.end(), [&](const json& k) { return k.value("machine", "") == m; });
    if (it == known.end())
      return Status::Invalid(fmt::format("nodes[{}].machine '{}' is not among the sweep's nodes (every machine a "
                                         "point names is listed there; npuprof submit sweep builds both)",
                                         j, m));
    n["machine_record"] = (*it)["machine_record"];
  }
  child["machine"] = child["nodes"][0]["machine"];
  child["machine_record"] = child["nodes"][0]["machine_record"];
  return Status::Ok();
}

void DropNodeRecords(json& child) {
  if (!IsDeploymentPoint(child)) return;
  for (json& n : child["nodes"])
    if (n.is_object()) n.erase("machine_record");
}

}  // namespace

std::string SweepPointText(const json& point) {
  std::string out;
  if (point.is_object())
    for (auto it = point.begin(); it != point.end(); ++it)
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", it.key(),
                         it->is_string() ? it->get<std::string>() : it->dump());
  return out;
}

std::string SweepChildId(const std::string& sweep_id, size_t index) { return fmt::format("{}-p{}", sweep_id, index); }

namespace {

// The request of one of parent's children (c), from the point it was made for.
std::optional<ChildRequest> RequestOf(const RunState& parent, const Child& c) {
  // A point's child spec is copied from the JSON spec as stored (a Struct
  // would turn its integers into doubles).
  const json& points = ArrField(parent.spec, "points");
  const auto i = static_cast<size_t>(c.index());
  if (c.index() < 0 || !points.is_array() || i >= points.size() || !points[i].is_object()) return std::nullopt;
  ChildRequest r{c.run_id(), SpecOf<run_specs::SweepSpec>(parent).child_kind(), points[i].value("spec", json::object())};
  r.spec["sweep_run"] = parent.run_id;
  r.spec["sweep_point"] = points[i].value("point", json::object());
  return r;
}

}  // namespace

std::optional<ChildRequest> SweepMachine::ChildRequestFor(const RunState& parent, const std::string& child_id) const {
  for (const auto& c : ChildrenOrNone(parent))
    if (c.run_id() == child_id) return RequestOf(parent, c);
  return std::nullopt;
}

std::vector<std::string> UnfinishedChildren(const RunState& parent) {
  std::vector<std::string> out;
  for (const auto& c : ChildrenOrNone(parent))
    if (!Finished(c)) out.push_back(c.run_id());
  return out;
}

const TransitionTable& SweepMachine::transitions() const {
  static const TransitionTable table({{"queued", "running"},
                                      {"queued", "failed"},
                                      {"queued", "cancelled"},
                                      {"running", "completed"},
                                      {"running", "failed"},
                                      {"running", "cancelling"},
                                      {"running", "cancelled"},
                                      {"cancelling", "cancelled"}},
                                     {"completed", "failed", "cancelled"});
  return table;
}

Status SweepMachine::ValidateSpec(json& spec) const {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (Status s = RequireSafeName(spec, "tag", false); !s.ok()) return s;
  if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
  if (Status s = CheckSweepNodes(spec); !s.ok()) return s;
  const std::string child_kind = spec.value("child_kind", "");
  if (!IsChildKind(child_kind))
    return Status::Invalid(fmt::format("child_kind '{}': a sweep runs memory-profile or torch-profile points "
                                       "(--kind memory-profile|torch-profile)",
                                       child_kind));
  const RunKind* kind = kinds_.Find(child_kind);
  if (!kind) return Status::Invalid(fmt::format("child_kind '{}' is not known to this server", child_kind));
  const json& grid = spec.value("grid", json());
  if (!grid.is_array() || grid.empty() || grid.size() > kMaxGridKeys)
    return Status::Invalid(fmt::format("grid: give 1 to {} --grid KEY=V1,V2 options", kMaxGridKeys));
  size_t product = 1;
  std::set<std::string> keys;
  for (const auto& g : grid) {
    const json& values = g.is_object() ? g.value("values", json()) : json();
    const std::string key = g.is_object() ? g.value("key", "") : "";
    if (key.empty() || !values.is_array() || values.empty())
      return Status::Invalid("grid: every entry needs a key and at least one value (--grid KEY=V1,V2)");
    if (!keys.insert(key).second) return Status::Invalid(fmt::format("grid: key '{}' is given twice", key));
    // The managed-flag rule (managed_flags.h): a vLLM spelling of a flag the
    // child kind sets from another option is refused, naming that option.
    if (Status st = CheckGridKey(child_kind, key); !st.ok()) return st;
    product *= values.size();
    if (product > kMaxSweepPoints)
      return Status::Invalid(fmt::format("grid: more than {} points; split the sweep", kMaxSweepPoints));
  }
  json& points = spec["points"];
  if (!points.is_array() || points.size() != product)
    return Status::Invalid(fmt::format("points: the grid has {} points, the spec lists {}", product,
                                       points.is_array() ? points.size() : 0));
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < points.size(); ++i) {
    json& p = points[i];
    if (!p.is_object() || !p.value("point", json()).is_object() || !p.value("spec", json()).is_object())
      return Status::Invalid(fmt::format("points[{}]: needs {{\"point\": {{...}}, \"spec\": {{...}}}}", i));
    json child = p["spec"];
    if (IsDeploymentPoint(child)) {
      // A multi-node point: its head is its own first node, each node's
      // record the sweep's for that machine.
      if (Status st = GiveNodeRecords(spec, child); !st.ok())
        return Status::Invalid(fmt::format("grid point {} ({}): {}", i, PointText(p["point"]), st.message()));
    } else {
      child["machine"] = spec["machine"];
      child["machine_record"] = spec["machine_record"];
    }
    if (spec.contains("tag")) child["tag"] = spec["tag"];
    if (child.contains("port"))
      return Status::Invalid(fmt::format("grid point {} ({}): a sweep's points each pick a free port; drop --port",
                                         i, PointText(p["point"])));
    if (Status st = kind->ValidateSpec(child); !st.ok())
      return Status::Invalid(fmt::format("grid point {} ({}): {}", i, PointText(p["point"]), st.message()));
    // A key that is a managed flag's option labels what the child is given.
    if (Status st = CheckPointGivesItsValues(child_kind, p["point"], child); !st.ok())
      return Status::Invalid(fmt::format("grid point {} ({}): {}", i, PointText(p["point"]), st.message()));
    // Judged as the child's submission will be, so a sweep is refused now
    // rather than its children later.
    if (Status st = CheckRunSpec(child_kind, child); !st.ok())
      return Status::Invalid(fmt::format("grid point {} ({}): {}", i, PointText(p["point"]), st.message()));
    DropNodeRecords(child);  // the broker fills them again when it submits the child
    json key = child;
    key.erase("machine_record");
    auto [it, fresh] = seen.emplace(key.dump(), i);
    if (!fresh)
      return Status::Invalid(fmt::format("grid points {} ({}) and {} ({}) give the same {} run; drop one value",
                                         it->second, PointText(points[it->second]["point"]), i,
                                         PointText(p["point"]), child_kind));
    child.erase("machine_record");  // the broker fills it again when it submits the child
    p["spec"] = std::move(child);
  }
  return Status::Ok();
}

void SweepMachine::OnStart(Decision& d) const {
  const RunState& s = d.state();
  if (s.run_id.size() > kMaxSweepIdLength)
    return d.Finish(RunStatus::kFailed,
                    fmt::format("the sweep's run id has {} characters; its children need it to have at "
                                "most {} (choose a shorter --run-id)",
                                s.run_id.size(), kMaxSweepIdLength));
  d.Transition("running");
  const size_t n = static_cast<size_t>(SpecOf<run_specs::SweepSpec>(s).points_size());
  for (size_t i = 0; i < n; ++i) {
    const std::string child = SweepChildId(s.run_id, i);
    d.Emit(ev::kChildRunRequested, json{{"run_id", child}, {"index", i}});
    d.WatchRun(child);
  }
}

bool SweepMachine::AcceptsSignal(std::string_view name) const { return name == ev::kSignalWatchedRunFinished; }

void SweepMachine::OnSignal(Decision& d, const std::string& name, const json& payload) const {
  if (name != ev::kSignalWatchedRunFinished) return;
  const std::string child = payload.value("run_id", "");
  bool known = false;
  for (const auto& c : Children(d.state())) known |= c.run_id() == child && !Finished(c);
  if (!known) return;
  const json& summary = payload.value("summary", json::object());
  json rec = {{"run_id", child}, {"status", payload.value("status", "missing")}, {"state", payload.value("state", "")}};
  if (summary.is_object() && summary.value("error", json()).is_string()) rec["error"] = summary["error"];
  if (rec["status"] == "running") rec["status"] = "missing";  // cannot happen: a watch fires at the end
  d.Emit(kSweepChildFinished, rec);
  FinishIfAllEnded(d);
}

void SweepMachine::OnCancel(Decision& d) const {
  // Read through DataOf: data that does not decode must not read as "no
  // children left to cancel".
  std::vector<std::string> open;
  for (const auto& c : Children(d.state()))
    if (!Finished(c)) open.push_back(c.run_id());
  if (open.empty()) return d.Finish(RunStatus::kCancelled, "cancelled by request");
  for (const auto& id : open) d.Emit(ev::kChildCancelRequested, json{{"run_id", id}});
  d.Transition("cancelling");
}

void SweepMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (type == ev::kChildRunRequested) {
    json& ch = s.data["children"];
    if (!ch.is_array()) ch = json::array();
    const size_t i = p.value("index", size_t{0});
    const json& points = ArrField(s.spec, "points");
    ch.push_back({{"run_id", p.value("run_id", "")},
                  {"index", i},
                  {"point", points.is_array() && i < points.size() ? points[i].value("point", json::object())
                                                                    : json::object()},
                  {"status", "requested"},
                  {"state", "requested"}});
  } else if (type == kSweepChildFinished || type == ev::kChildCancelRequested) {
    json& ch = s.data["children"];
    if (!ch.is_array()) return;
    for (auto& c : ch) {
      if (c.value("run_id", "") != p.value("run_id", "")) continue;
      if (type == ev::kChildCancelRequested) {
        c["cancel_requested"] = true;
      } else {
        c["status"] = p.value("status", "missing");
        c["state"] = p.value("state", "");
        if (p.contains("error")) c["error"] = p["error"];
      }
    }
  }
}

json SweepMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  j["child_kind"] = s.spec.value("child_kind", "");
  j["grid"] = s.spec.value("grid", json::array());
  if (s.spec.contains("advice") && s.spec["advice"].is_object()) j["advice"] = s.spec["advice"];
  json children = json::array();
  size_t ok = 0;
  const json& points = ArrField(s.spec, "points");
  const ChildList ch = ChildrenOrNone(s);
  if (ch.empty() && points.is_array()) {
    for (size_t i = 0; i < points.size(); ++i)
      children.push_back({{"run_id", SweepChildId(s.run_id, i)},
                          {"point", points[i].value("point", json::object())},
                          {"status", "not submitted"}});
  }
  for (const auto& c : ch) {
    json e = {{"run_id", c.run_id()}, {"point", PointOf(s, c)}, {"status", c.status()}};
    if (!c.error().empty()) e["error"] = c.error();
    if (c.cancel_requested()) e["cancel_requested"] = true;
    ok += c.status() == "ok" ? 1 : 0;
    children.push_back(std::move(e));
  }
  j["children"] = std::move(children);
  j["points"] = points.is_array() ? points.size() : 0;
  j["points_ok"] = ok;
  j["sweep_status"] = Verdict(s, ch);
  return j;
}

json SweepMachine::Manifest(const RunState& s) const {
  json j = Summary(s);
  json specs = json::array();
  for (const auto& c : ChildrenOrNone(s))  // one decode of the data for all of them
    if (auto r = RequestOf(s, c)) specs.push_back({{"run_id", r->run_id}, {"spec", r->spec}});
  j["child_specs"] = std::move(specs);
  return j;
}

void RegisterSweepKind(KindRegistry& r) { r.Register(std::make_unique<SweepMachine>(r)); }

}  // namespace npuprof::sm
