// Test helpers for the broker's metrics tests: a committed event as the
// metrics see it, and the exposition run through `promtool check metrics`
// (Prometheus's linter: names, units, suffixes). No assertions here: the
// tests judge what comes back.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "npuprof.pb.h"

namespace npuprof::broker::testing {

// An event of `run_id` with the payload as its JSON.
proto::Event MetricsEvent(const std::string& run_id, const std::string& type, const nlohmann::json& payload);

struct PromtoolVerdict {
  bool passed = false;  // promtool exited 0
  std::string output;   // what it printed (stdout and stderr): empty when the exposition is clean
};

// nullopt when promtool is not installed (the caller skips, saying so);
// otherwise promtool's verdict on `exposition` (written to a temporary file,
// removed afterwards).
std::optional<PromtoolVerdict> PromtoolCheck(const std::string& exposition);

}  // namespace npuprof::broker::testing
