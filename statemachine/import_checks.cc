#include "statemachine/import_checks.h"

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/utf8.h"
#include "statemachine/event_types.h"
#include "statemachine/kind_schemas.h"

namespace npuprof::sm {

Status JudgeImportedSubmission(const KindRegistry& kinds, const proto::Event& e) {
  if (e.type() != ev::kRunSubmitted) return Status::Invalid("a run must start with RunSubmitted");
  Result<json> parsed = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
  if (!parsed.ok()) return Status::Invalid("the RunSubmitted payload is " + parsed.status().message());
  const json& p = *parsed;
  if (!p.is_object()) return Status::Invalid("the RunSubmitted payload is not a JSON object");
  const std::string kind_name = p.value("kind", "");
  const RunKind* kind = kinds.Find(kind_name);
  if (kind == nullptr)
    return Status::Invalid(fmt::format("unknown run kind '{}'", TruncateUtf8(kind_name, 64)));
  json spec = p.value("spec", json::object());
  if (!spec.is_object()) return Status::Invalid("the RunSubmitted spec is not a JSON object");
  // On a copy: the stored spec is what the run was given, and stays so.
  json judged = spec;
  if (Status st = kind->ValidateSpec(judged); !st.ok())
    return Status::Invalid(fmt::format("its {} spec is not one `submit` accepts: {}", kind_name,
                                       TruncateUtf8(st.message(), 300)));
  if (Status st = CheckRunSpec(kind_name, judged); !st.ok())
    return Status::Invalid(fmt::format("its {} spec is not one `submit` accepts: {}", kind_name,
                                       TruncateUtf8(st.message(), 300)));
  for (const char* field : {"machine", "tag"}) {
    const json& at_top = p.contains(field) ? p[field] : json("");
    const json& in_spec = spec.contains(field) && !spec[field].is_null() ? spec[field] : json("");
    if (at_top != in_spec)
      return Status::Invalid(fmt::format("RunSubmitted.{} is not the spec's {} (the engine writes the same value "
                                         "in both)",
                                         field, field));
  }
  return Status::Ok();
}

}  // namespace npuprof::sm
