// The link figures of a task attempt (events.TaskLink, proto/events.proto)
// on the wire: field 10 of proto.TaskResult, a length-delimited
// serialized TaskLink, the field number TaskResult keeps for them.
// npuprof.proto does not declare the field; the worker writes it and the
// broker reads it through the message's unknown fields (a broker that does
// not know it keeps ignoring it, a worker that does not write it leaves the
// attempt without figures). Declaring `npuprof.events.TaskLink link = 10;`
// in TaskResult later is wire-identical.
//
// ReadTaskLinkField: nullopt when the field is absent; Corruption when it
// is there but is not a TaskLink. Pure: no I/O; thread-safe.
#pragma once

#include <optional>
#include <string>

#include <google/protobuf/unknown_field_set.h>

#include "common/status.h"
#include "events.pb.h"
#include "npuprof.pb.h"

namespace npuprof::wire {

inline constexpr int kTaskResultLinkField = 10;

inline void WriteTaskLinkField(proto::TaskResult& r, const events::TaskLink& link) {
  google::protobuf::UnknownFieldSet* u = r.GetReflection()->MutableUnknownFields(&r);
  u->DeleteByNumber(kTaskResultLinkField);
  u->AddLengthDelimited(kTaskResultLinkField, link.SerializeAsString());
}

inline Result<std::optional<events::TaskLink>> ReadTaskLinkField(const proto::TaskResult& r) {
  const google::protobuf::UnknownFieldSet& u = r.GetReflection()->GetUnknownFields(r);
  std::optional<events::TaskLink> out;
  for (int i = 0; i < u.field_count(); ++i) {
    const google::protobuf::UnknownField& f = u.field(i);
    if (f.number() != kTaskResultLinkField) continue;
    events::TaskLink link;
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED || !link.ParseFromString(f.length_delimited()))
      return Status::Corruption("TaskResult field 10 (the attempt's link figures) is not an events.TaskLink");
    out = link;  // the last one counts, as protobuf merges a repeated singular field
  }
  return out;
}

}  // namespace npuprof::wire
