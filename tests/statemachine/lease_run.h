// Test harness for the lease tests (device_lease_test, device_quarantine_test):
// one run fed through the pure engine, its events kept as a hash-chained log
// (a content-independent stable hash) so the replay verifier can check it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "statemachine/engine.h"

namespace npuprof::sm::lease_test {

// A serve spec on machine m1 (tp 2) with these devices (null: any free ones).
inline json ServeSpec(json devices) {
  return json{{"machine", "m1"},
              {"machine_record", {{"name", "m1"}, {"host", "h"}, {"user", "u"}, {"runtime_base", "/rt/"}}},
              {"model", "/models/qwen"},
              {"tp", 2},
              {"devices", std::move(devices)}};
}

inline std::string StableHash(const proto::Event& e) { return std::to_string(e.seq()); }

struct LeaseRun {
  RunState s;
  std::vector<proto::Event> log;
  int64_t now = 1000;
  explicit LeaseRun(std::string id = "r1") { s.run_id = std::move(id); }

  Result<std::vector<NewEvent>> Feed(Input in) {
    in.now_ms = now += 10;
    auto evs = Decide(DefaultKinds(), s, in);
    if (!evs.ok()) return evs;
    for (const auto& e : *evs) {
      Apply(DefaultKinds(), s, e.type, e.payload, s.last_seq + 1, in.now_ms);
      proto::Event pe;
      pe.set_run_id(s.run_id);
      pe.set_seq(s.last_seq);
      pe.set_type(e.type);
      pe.set_time_ms(in.now_ms);
      pe.set_payload_json(e.payload.dump());
      pe.set_prev_hash(log.empty() ? "" : log.back().hash());
      pe.set_hash(StableHash(pe));
      log.push_back(pe);
    }
    return evs;
  }
  void Submit(json spec, const std::string& kind = "serve") {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = kind;
    in.spec = std::move(spec);
    ASSERT_TRUE(Feed(in).ok());
  }
  Result<std::vector<NewEvent>> Grant(DeviceIds devices) {
    Input in;
    in.type = Input::Type::kLeaseGranted;
    in.devices = std::move(devices);
    return Feed(in);
  }
  std::vector<std::string> Types() const {
    std::vector<std::string> t;
    for (const auto& e : log) t.push_back(e.type());
    return t;
  }
  // Answers every task in flight of `kind` (at its current attempt).
  void Answer(const std::string& kind, bool ok, json result, const std::string& error_kind = "",
              bool retryable = false) {
    for (const auto& [id, t] : std::map<std::string, TaskInfo>(s.tasks)) {
      if (!t.in_flight() || t.kind != kind) continue;
      Input in;
      in.type = Input::Type::kTaskResult;
      in.task_id = id;
      in.attempt = t.attempt;
      in.ok = ok;
      in.retryable = retryable;
      in.error_kind = error_kind;
      in.error = ok ? "" : "it went wrong";
      in.result = result;
      ASSERT_TRUE(Feed(in).ok());
    }
  }
  // The payload of the first event of `type` (null when none).
  json PayloadOf(const std::string& type) const {
    for (const auto& e : log)
      if (e.type() == type) return json::parse(e.payload_json());
    return json();
  }
};

}  // namespace npuprof::sm::lease_test
