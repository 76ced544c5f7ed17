// The broker's side of runs that start other runs (statemachine/child_runs.h;
// the sweep kind is one): it submits each child a run asked for, under the
// child's id, cancels the children of a cancelled parent, and redoes both at
// recovery for every run that lists children, whatever its kind. Both are
// idempotent: Submit returns an existing run unchanged, a finished or
// cancelling run ignores a cancel.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "common/time_util.h"
#include "statemachine/child_runs.h"

namespace npuprof::broker {

using sm::json;

void Broker::SubmitChild(const std::string& parent, const std::string& child) {
  sm::RunState* p = LoadRun(parent);
  if (!p) return;
  auto req = sm::RequestedChild(kinds_, *p, child);
  if (!req.ok()) {
    // The parent's watch then reports the child as missing.
    spdlog::error("run {}: child {} is not submitted: {}", parent, child, req.status().message());
    return;
  }
  std::string deferred;
  const proto::ClientResponse r = Submit(json{{"kind", req->kind}, {"spec", req->spec}, {"run_id", child}}, &deferred);
  if (!r.ok()) {
    // The parent's watch then reports the child as missing (a failed point).
    spdlog::error("run {}: child {} ({}) refused: {}", parent, child, req->kind, r.error());
  }
}

void Broker::CancelChild(const std::string& parent, const std::string& child) {
  sm::RunState* c = LoadRun(child);
  if (!c || c->terminal || c->cancel_requested) return;
  sm::Input in;
  in.type = sm::Input::Type::kCancel;
  in.now_ms = NowMs();
  in.by = "sweep " + parent;
  if (Status st = DecideAndStage(child, in); !st.ok())
    spdlog::error("run {}: cancelling child {} failed: {}", parent, child, st.ToString());
}

void Broker::RecoverChildren(const std::string& parent) {
  sm::RunState* p = LoadRun(parent);
  if (!p || p->terminal || !sm::HasChildRuns(*p)) return;
  const bool cancel = p->cancel_requested;
  const std::vector<std::string> children = p->requested_children;  // SubmitChild may reload p
  for (const auto& id : children) SubmitChild(parent, id);
  if (!cancel) return;
  // A child that has ended (or is being cancelled) ignores it.
  for (const auto& id : children) CancelChild(parent, id);
}

void Broker::AddLiveChildStatus(json& summary) {
  if (!summary.is_object() || !summary.contains("children") || !summary["children"].is_array()) return;
  for (auto& c : summary["children"]) {
    if (c.value("status", "") != "requested") continue;
    sm::RunState* s = LoadRun(c.value("run_id", ""));
    if (!s) continue;
    c["status"] = sm::RunStatusName(s->status);
    c["state"] = s->state;
  }
}

}  // namespace npuprof::broker
