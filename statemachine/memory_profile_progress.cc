#include "statemachine/memory_profile_progress.h"

#include <stdexcept>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace npuprof::sm {

bool MemStepRecorded(const kind_data::MemoryProfileData& data, std::string_view step) {
  const std::string name(step);
  const google::protobuf::FieldDescriptor* field = kind_data::MemoryProfileData::descriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated() || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
    throw std::logic_error("memory-profile step \"" + name +
                           "\" names no evidence field of kind_data.MemoryProfileData (proto/kind_data.proto)");
  return data.GetReflection()->HasField(data, field);
}

bool MemStepFailed(const kind_data::MemoryProfileData& data, std::string_view step) {
  return data.step_failures().contains(std::string(step));
}

bool MemStepDone(const kind_data::MemoryProfileData& data, std::string_view step) {
  return MemStepRecorded(data, step) || MemStepFailed(data, step);
}

}  // namespace npuprof::sm
