#include "common/status.h"

namespace npuprof {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kConflict: return "conflict";
    case Code::kCorruption: return "corruption";
    case Code::kIoError: return "io_error";
    case Code::kUnavailable: return "unavailable";
    case Code::kTimeout: return "timeout";
    case Code::kPermissionDenied: return "permission_denied";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kInternal: return "internal";
    case Code::kNoSpace: return "no_space";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace npuprof
