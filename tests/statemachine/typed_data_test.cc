// A kind's data read as its message (statemachine/typed_data.h): what the
// fold wrote decodes with its declared types, what it did not write reads the
// default, and data that does not fit is an error naming the run and the key.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kind_data.pb.h"
#include "statemachine/run_state.h"
#include "statemachine/typed_data.h"

namespace npuprof::sm::testing {
namespace {

using nlohmann::json;

RunState Serve(json data) {
  RunState s;
  s.run_id = "r1";
  s.kind = "serve";
  s.data = std::move(data);
  return s;
}

TEST(TypedData, WhatTheFoldWroteDecodesAndTheRestReadsItsDefault) {
  const auto data = DataOf<kind_data::ServeData>(Serve(
      {{"service", {{"status", "ready"}, {"runtime_dir", "/rt"}, {"pid", 4242}, {"port", nullptr}}},
       {"stop", {{"reason", "user"}, {"force", true}, {"deferred", false}}}}));
  EXPECT_EQ(data.service().status(), "ready");
  EXPECT_EQ(data.service().runtime_dir(), "/rt");
  ASSERT_TRUE(data.service().has_pid());
  EXPECT_EQ(data.service().pid(), 4242);
  EXPECT_FALSE(data.service().has_port()) << "a null port is not known";
  EXPECT_EQ(data.stop().reason(), "user");
  EXPECT_TRUE(data.stop().force());
  EXPECT_FALSE(data.has_failure()) << "nothing failed: no failure record";

  for (const json& empty : {json::object(), json(nullptr)}) {
    const auto none = DataOf<kind_data::ServeData>(Serve(empty));
    EXPECT_FALSE(none.has_service());
    EXPECT_EQ(none.stop().reason(), "");
    EXPECT_FALSE(none.stop().force());
  }
}

TEST(TypedData, AValueOfTheWrongTypeIsCorruptionNamingTheRunAndTheKey) {
  const RunState s = Serve({{"service", {{"runtime_dir", "/rt"}, {"pid", "seven"}}}});
  auto read = ReadData<kind_data::ServeData>(s);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kCorruption);
  EXPECT_NE(read.status().message().find("r1"), std::string::npos) << read.status().message();
  EXPECT_NE(read.status().message().find("pid"), std::string::npos) << read.status().message();
  try {
    (void)DataOf<kind_data::ServeData>(s);
    ADD_FAILURE() << "a decision must not read data that does not decode";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()), read.status().message());
  }
  EXPECT_FALSE(ReadData<kind_data::ServeData>(Serve(json::array())).ok()) << "data that is not an object";
}

TEST(TypedData, AKeyAnOlderFoldWroteIsPassedOver) {
  const auto data = DataOf<kind_data::ServeData>(Serve({{"stop", {{"reason", "cancel"}}}, {"retired_key", 1}}));
  EXPECT_EQ(data.stop().reason(), "cancel");
}

TEST(TypedData, ReadingAnotherKindsMessageIsAnErrorNamingBoth) {
  auto read = ReadData<kind_data::SweepData>(Serve(json::object()));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kInternal);
  EXPECT_NE(read.status().message().find("SweepData"), std::string::npos) << read.status().message();
  EXPECT_NE(read.status().message().find("ServeData"), std::string::npos) << read.status().message();
  EXPECT_THROW((void)DataOf<kind_data::SweepData>(Serve(json::object())), std::logic_error);

  RunState custom = Serve(json::object());
  custom.kind = "a-test-kind";  // no message in proto/kind_data.proto
  EXPECT_FALSE(ReadData<kind_data::ServeData>(custom).ok());
}

TEST(TypedData, ASweepsChildrenDecodeInOrder) {
  RunState s;
  s.run_id = "sw";
  s.kind = "sweep";
  s.data = {{"children",
             {{{"run_id", "sw-p0"}, {"index", 0}, {"point", {{"tp", "1"}}}, {"status", "ok"}, {"state", "completed"}},
              {{"run_id", "sw-p1"}, {"index", 1}, {"status", "requested"}, {"cancel_requested", true}}}}};
  const auto data = DataOf<kind_data::SweepData>(s);
  ASSERT_EQ(data.children_size(), 2);
  EXPECT_EQ(data.children(0).run_id(), "sw-p0");
  EXPECT_EQ(data.children(0).status(), "ok");
  EXPECT_EQ(data.children(1).index(), 1);
  EXPECT_TRUE(data.children(1).cancel_requested());
  EXPECT_EQ(data.children(1).error(), "");
}

}  // namespace
}  // namespace npuprof::sm::testing
