// Helpers for the EventStore tests: a fresh temp dir per test and event builders.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/event_store.h"

namespace npuprof::store::testing {

inline proto::Event Ev(const std::string& type, const std::string& payload = "{}",
                       int64_t time_ms = 1000, const std::string& cause = "submit") {
  proto::Event e;
  e.set_type(type);
  e.set_payload_json(payload);
  e.set_time_ms(time_ms);
  e.set_cause(cause);
  return e;
}

inline AppendRequest Req(const std::string& run, uint64_t expected, std::vector<proto::Event> evs) {
  AppendRequest r;
  r.run_id = run;
  r.expected_last_seq = expected;
  r.events = std::move(evs);
  return r;
}

// Fixture: dir_ is a new empty directory under the system temp dir, removed afterwards.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "npuprof_store_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // (Re)opens the store at dir_ (closing any open one first).
  void Open(StoreOptions opts = {.sync = false}) {
    store_.reset();
    auto r = EventStore::Open(dir_, opts);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    store_ = std::move(r).value();
  }

  std::string dir_;
  std::unique_ptr<EventStore> store_;
};

}  // namespace npuprof::store::testing
