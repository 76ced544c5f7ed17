// A memory-profile run's progress read from its data message
// (statemachine/memory_profile_progress.h): every step that runs a task names
// an evidence field of MemoryProfileData, what the fold recorded reads as
// done (an empty record and a failure included), and a name the message does
// not declare is refused rather than read as "not done".
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "kind_data.pb.h"
#include "statemachine/memory_profile_progress.h"
#include "statemachine/memory_profile_steps.h"
#include "statemachine/run_state.h"
#include "statemachine/typed_data.h"

namespace npuprof::sm {
namespace {

using Data = kind_data::MemoryProfileData;

Data Fold(const json& data) {
  RunState s;
  s.run_id = "m1";
  s.kind = "memory-profile";
  s.data = data;
  return DataOf<Data>(s);
}

TEST(MemoryProgress, EveryStepOfEveryModeNamesAnEvidenceField) {
  int checked = 0;
  for (const char* mode : {"standalone", "attach", "install_wrapper"}) {
    for (const MemStep& step : MemoryStepsOf(mode)) {
      if (step.wait) continue;  // no task, no record: the run waits in this state
      EXPECT_NO_THROW((void)MemStepRecorded(Data(), step.name)) << mode << " step " << step.name;
      EXPECT_FALSE(MemStepDone(Data(), step.name)) << mode << " step " << step.name << " done before it ran";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16 + 9 + 1) << "standalone 16 task steps (3 of them --operator-memory), attach 9, install_wrapper 1";
}

TEST(MemoryProgress, WhatTheFoldRecordedIsDone) {
  const Data data = Fold({{"preflight", {{"wrap_script", "/w.sh"}}},
                          {"stopped", json::object()},  // a success that answered nothing records {}
                          {"step_failures", {{"weights", {{"error_kind", "no_safetensors"}, {"error", "none"}}}}}});
  EXPECT_TRUE(MemStepRecorded(data, "preflight"));
  EXPECT_TRUE(MemStepDone(data, "stopped")) << "an empty record is still the step's outcome";
  EXPECT_FALSE(MemStepRecorded(data, "weights"));
  EXPECT_TRUE(MemStepFailed(data, "weights"));
  EXPECT_TRUE(MemStepDone(data, "weights")) << "a failed step is not run again";
  EXPECT_FALSE(MemStepDone(data, "export"));
  EXPECT_FALSE(MemStepDone(data, "baseline"));
}

TEST(MemoryProgress, ANameTheMessageDoesNotDeclareIsRefused) {
  for (const char* bad : {"stoped", "awaiting_service_stop", "step_failures", ""}) {
    try {
      (void)MemStepDone(Data(), bad);
      ADD_FAILURE() << "\"" << bad << "\" read as a step";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("MemoryProfileData"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace npuprof::sm
