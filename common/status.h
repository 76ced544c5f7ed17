// Status and Result<T>: errors are values, returned and checked (LevelDB style).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace npuprof {

enum class Code {
  kOk = 0,
  kInvalidArgument,  // bad user input: message names the field and the fix
  kNotFound,
  kConflict,         // optimistic-concurrency failure (expected sequence mismatch)
  kCorruption,
  kIoError,
  kUnavailable,      // remote or server not reachable; retryable
  kTimeout,
  kPermissionDenied, // auth failed, host key mismatch
  kFailedPrecondition,
  kInternal,
  kNoSpace,          // the disk under the data dir is (nearly) full: free space, then retry
};

const char* CodeName(Code c);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status Invalid(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status Io(std::string m) { return {Code::kIoError, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status Timeout(std::string m) { return {Code::kTimeout, std::move(m)}; }
  static Status Denied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status Precondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status NoSpace(std::string m) { return {Code::kNoSpace, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Result<T> holds either a value or a non-ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {}   // NOLINT(implicit)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace npuprof
