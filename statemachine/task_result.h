// TaskResult: a successful task's result as a kind's OnTaskSucceeded
// receives it. It holds the result as recorded (TaskSucceeded.result, JSON)
// and, for a task kind proto/task_results.proto declares, the same result as
// its message: the engine's judge (task_schema.h, DecodeTaskResult) parses
// it once on arrival, and the kind reads that parse.
//
// A kind reads its decisions through As<M>(), so that a field name is
// checked by the compiler and a value has its declared type. A field the
// answer left out reads the message's default (0, "", false, empty), or
// has_x() is false for a field declared `optional`. A success that carried no
// result (null or {}) reads as the empty message.
//
// As<M>() for a message that is not the task kind's (a kind's bug, or a task
// kind without a result message) throws std::logic_error: the broker then
// fails that task (kind_failed, broker/commit.cc).
//
// RecordedResult<M>(task) decodes an earlier task's result as the run state
// keeps it, for a decision that reads it later; RecordedOf<M>(task) is the
// same read throwing std::logic_error (naming the task kind and the key) when
// it does not decode, for a decision, whose throw the broker turns into the
// failure of its input as above.
// Pure: no I/O.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "statemachine/run_state.h"
#include "statemachine/task_schema.h"

namespace npuprof::sm {

class TaskResult {
 public:
  // typed: the result's message, or nullptr for a task kind without one.
  TaskResult(std::string task_kind, const nlohmann::json& recorded,
             std::shared_ptr<const google::protobuf::Message> typed)
      : task_kind_(std::move(task_kind)), recorded_(recorded), typed_(std::move(typed)) {}
  // It refers to the recorded JSON: never to a temporary.
  TaskResult(std::string, nlohmann::json&&, std::shared_ptr<const google::protobuf::Message>) = delete;

  // The result as the TaskSucceeded event records it.
  const nlohmann::json& recorded() const { return recorded_; }
  // Whether the success carried no result (null or {}).
  bool empty() const { return recorded_.is_null() || (recorded_.is_object() && recorded_.empty()); }
  // The message of a success the kind cannot act on without an answer (a
  // launch must say where its service runs): an empty one throws
  // std::logic_error, so the task fails (kind_failed) and the kind's failure
  // path runs its cleanup.
  template <class M>
  const M& Required() const {
    if (empty())
      throw std::logic_error("a " + task_kind_ + " task succeeded without a result, and the run cannot go on "
                             "without its answer");
    return As<M>();
  }

  template <class M>
  const M& As() const {
    if (const auto* m = dynamic_cast<const M*>(typed_.get())) return *m;
    throw std::logic_error("a " + task_kind_ + " result was read as " + M::descriptor()->full_name() + ", but it " +
                           (typed_ ? "is a " + typed_->GetDescriptor()->full_name()
                                   : std::string("has no message in proto/task_results.proto")));
  }

 private:
  std::string task_kind_;
  const nlohmann::json& recorded_;
  std::shared_ptr<const google::protobuf::Message> typed_;
};

// The result task recorded (its TaskSucceeded, or the result a final failure
// kept) as M, the message of task's kind; the empty M when it recorded none.
// Keys an older npuprof wrote that M no longer declares are passed over; a
// value of the wrong type, or M not the task kind's message, is the Status.
template <class M>
Result<M> RecordedResult(const TaskInfo& task) {
  const nlohmann::json none;
  const nlohmann::json& recorded =
      task.result.is_object() && task.result.contains("result") ? task.result["result"] : none;
  auto decoded = DecodeTaskResult(task.kind, recorded, /*tolerate_unknown_keys=*/true);
  if (!decoded.ok()) return decoded.status();
  const auto* m = dynamic_cast<const M*>(decoded->get());
  if (m == nullptr)
    return Status::Internal("a " + task.kind + " result was read as " + M::descriptor()->full_name() +
                            ", which proto/task_results.proto does not declare for that kind");
  return *m;
}

// RecordedResult as a value; what does not decode (the judge passed the answer
// on arrival, so only a store written with another schema) throws.
template <class M>
M RecordedOf(const TaskInfo& task) {
  Result<M> r = RecordedResult<M>(task);
  if (!r.ok()) throw std::logic_error("the recorded " + task.kind + " result cannot be read: " + r.status().message());
  return std::move(r).value();
}

}  // namespace npuprof::sm
