// Test helper: the events of the recorded runs in tests/data/views (a
// memory-profile and a torch-profile run written by an earlier npuprof), as
// JSON: {"events": [{"type", "payload", ...}, ...]}.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::testing_support {

inline constexpr const char* kRecordedRuns[] = {"memory_profile", "torch_profile"};

// The events array of the recorded run `name`; an empty array (and a test
// failure) when the file is missing or not JSON.
inline nlohmann::json RecordedRunEvents(const std::string& name) {
  std::ifstream f(std::string(NPUPROF_TEST_DATA_DIR) + "/views/" + name + ".events.json");
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_TRUE(doc.is_object() && doc.contains("events")) << name;
  return doc.is_object() && doc.contains("events") ? doc["events"] : nlohmann::json::array();
}

}  // namespace npuprof::testing_support
