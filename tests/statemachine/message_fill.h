// Test helper: a protobuf message with every field set to a value that is
// not its default, for round trips through the JSON mapping.
#pragma once

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <memory>
#include <string>

namespace npuprof::testing_support {

namespace pb = google::protobuf;

// Gives every field of `m` a value that is not its default, recursively for
// nested messages (well-known types get a small value of their own).
inline void FillEveryField(pb::Message& msg, int depth = 0) {
  pb::Message* m = &msg;
  const pb::Descriptor* d = m->GetDescriptor();
  const pb::Reflection* r = m->GetReflection();
  if (d->full_name() == "google.protobuf.Struct") {
    pb::util::JsonStringToMessage(R"({"k": [1, "v", {"n": null}]})", m);
    return;
  }
  if (d->full_name() == "google.protobuf.Value") {
    pb::util::JsonStringToMessage(R"({"a": 1.5})", m);
    return;
  }
  if (d->full_name() == "google.protobuf.ListValue") {
    pb::util::JsonStringToMessage(R"([0, 3])", m);
    return;
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const std::string text = f->name() + "-value";
    for (int n = 0; n < (f->is_repeated() && !f->is_map() ? 2 : 1); ++n) {  // a map: one key
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_STRING:
          f->is_repeated() ? r->AddString(m, f, text) : r->SetString(m, f, text);
          break;
        case pb::FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? r->AddInt64(m, f, 1700000000123 + n) : r->SetInt64(m, f, 1700000000123);
          break;
        case pb::FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? r->AddInt32(m, f, 7 + n) : r->SetInt32(m, f, 7);
          break;
        case pb::FieldDescriptor::CPPTYPE_UINT32:
          f->is_repeated() ? r->AddUInt32(m, f, 3 + n) : r->SetUInt32(m, f, 3);
          break;
        case pb::FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? r->AddDouble(m, f, 2.5 + n) : r->SetDouble(m, f, 2.5);
          break;
        case pb::FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        case pb::FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth < 3) FillEveryField(f->is_repeated() ? *r->AddMessage(m, f) : *r->MutableMessage(m, f), depth + 1);
          break;
        default:
          ADD_FAILURE() << "no filler for " << f->full_name() << "; extend the test";
      }
    }
  }
}

// A new message of d's type with every field filled, and its JSON text with
// the field names as written in the .proto.
inline std::string FilledJson(const pb::Descriptor& d, std::unique_ptr<pb::Message>* out = nullptr) {
  std::unique_ptr<pb::Message> m(pb::MessageFactory::generated_factory()->GetPrototype(&d)->New());
  FillEveryField(*m);
  std::string text;
  pb::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  EXPECT_TRUE(pb::util::MessageToJsonString(*m, &text, print).ok()) << d.full_name();
  if (out) *out = std::move(m);
  return text;
}

}  // namespace npuprof::testing_support
