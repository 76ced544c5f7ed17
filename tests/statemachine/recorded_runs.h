// Test helper: the events of the recorded runs in tests/data/views (a
// memory-profile and a torch-profile run written by an earlier npuprof), as
// JSON: {"events": [{"type", "payload", ...}, ...]}.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "npuprof.pb.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing_support {

inline constexpr const char* kRecordedRuns[] = {"memory_profile", "torch_profile"};

// The events array of the recorded run `name`; an empty array (and a test
// failure) when the file is missing or not JSON.
inline nlohmann::json RecordedRunEvents(const std::string& name) {
  std::ifstream f(std::string(npuprof::build_paths::TestDataDir()) + "/views/" + name + ".events.json");
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_TRUE(doc.is_object() && doc.contains("events")) << name;
  return doc.is_object() && doc.contains("events") ? doc["events"] : nlohmann::json::array();
}

// `events` (in the form above) as a stored log of run_id: seq from 1, each
// event's hash its seq and prev_hash the one before (verify with SeqHash);
// an event's global_pos is kept when it has one.
inline std::vector<npuprof::proto::Event> EventsAsLog(const std::string& run_id, const nlohmann::json& events) {
  std::vector<npuprof::proto::Event> log;
  for (const auto& e : events) {
    npuprof::proto::Event pe;
    pe.set_run_id(run_id);
    pe.set_seq(log.size() + 1);
    pe.set_type(e["type"].get<std::string>());
    pe.set_time_ms(e.value("time_ms", int64_t{0}));
    pe.set_payload_json(e["payload"].dump());
    pe.set_cause(e.value("cause", ""));
    pe.set_global_pos(e.value("global_pos", uint64_t{0}));
    pe.set_prev_hash(log.empty() ? "" : log.back().hash());
    pe.set_hash(std::to_string(pe.seq()));
    log.push_back(pe);
  }
  return log;
}

inline std::string SeqHash(const npuprof::proto::Event& e) { return std::to_string(e.seq()); }

}  // namespace npuprof::testing_support
