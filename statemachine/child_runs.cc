#include "statemachine/child_runs.h"

#include <algorithm>

#include <fmt/format.h>

namespace npuprof::sm {

bool HasChildRuns(const RunState& parent) { return !parent.requested_children.empty(); }

Result<ChildRequest> RequestedChild(const KindRegistry& kinds, const RunState& parent, const std::string& child_id) {
  const auto& listed = parent.requested_children;
  if (std::find(listed.begin(), listed.end(), child_id) == listed.end())
    return Status::NotFound(fmt::format("run {} did not ask for a child run {}", parent.run_id, child_id));
  const RunKind* kind = kinds.Find(parent.kind);
  if (kind == nullptr)
    return Status::Internal(fmt::format("run {} asked for child {}, but its kind '{}' is not known to this server",
                                        parent.run_id, child_id, parent.kind));
  std::optional<ChildRequest> req = kind->ChildRequestFor(parent, child_id);
  if (!req)
    return Status::Internal(fmt::format("run {} asked for child {}, but its kind '{}' does not say what that child "
                                        "is (RunKind::ChildRequestFor)",
                                        parent.run_id, child_id, parent.kind));
  return *req;
}

std::vector<ChildRequest> RequestedChildren(const KindRegistry& kinds, const RunState& parent,
                                            std::vector<std::string>* errors) {
  std::vector<ChildRequest> out;
  for (const std::string& id : parent.requested_children) {
    auto req = RequestedChild(kinds, parent, id);
    if (req.ok()) out.push_back(std::move(*req));
    else if (errors) errors->push_back(req.status().message());
  }
  return out;
}

}  // namespace npuprof::sm
