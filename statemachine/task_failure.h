// TaskFailure: a task's final failure as a kind's OnTaskFailed receives it:
// the TaskFailed payload the engine recorded ({task_id, attempt, error,
// error_kind, retryable, worker, final, and the result and blobs when the
// answer carried them}), with its two texts read once.
//
// A kind decides on error_kind() and words its errors from error(); what it
// records as evidence (blobs, a partial result) it copies from recorded().
// A launch that failed before starting anything is asked of the task itself
// (LaunchStartedNothing, service_spec.h), whose recorded result is typed.
// Pure: no I/O.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::sm {

class TaskFailure {
 public:
  explicit TaskFailure(const nlohmann::json& recorded)
      : recorded_(recorded), error_kind_(Text(recorded, "error_kind")), error_(Text(recorded, "error")) {}
  // It refers to the recorded payload: never to a temporary.
  explicit TaskFailure(nlohmann::json&&) = delete;

  // The TaskFailed payload as recorded.
  const nlohmann::json& recorded() const { return recorded_; }
  // The failure's class ("ssh_failed", "never_ready", "bad_result", ...;
  // "" when none was given) and its sentence.
  const std::string& error_kind() const { return error_kind_; }
  const std::string& error() const { return error_; }
  // "error_kind: error", or the sentence alone without a class.
  std::string Text() const { return error_kind_.empty() ? error_ : error_kind_ + ": " + error_; }
  // "error_kind: error" always, with "error" as the class when none was
  // given: for a text that must say what kind of failure it was (a run's
  // error, a device check's).
  std::string Classified() const { return (error_kind_.empty() ? "error" : error_kind_) + ": " + error_; }

 private:
  static std::string Text(const nlohmann::json& j, const char* key) {
    if (!j.is_object()) return "";
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  }
  const nlohmann::json& recorded_;
  std::string error_kind_;
  std::string error_;
};

}  // namespace npuprof::sm
