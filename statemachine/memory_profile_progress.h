// What a memory-profile run has done, read from its data message
// (kind_data.MemoryProfileData, decoded once per decision by the planner).
//
// Contract:
// * A step's outcome is recorded in the data field named like the step
//   (memory_profile_steps.h: "the run's state is the step in progress, and
//   its name is where its outcome is recorded"), or, when it failed, in
//   step_failures[step]. A step is done when either holds.
// * Every step that runs a task names a field of MemoryProfileData; a name
//   that does not is a bug in the step list and throws std::logic_error
//   naming it (a decision's throw fails its input: broker/commit.cc), never
//   reads as "not done" (which would schedule the step again and again).
//   The unit test walks every mode's steps against the message.
// Pure: no I/O.
#pragma once

#include <string_view>

#include "kind_data.pb.h"

namespace npuprof::sm {

// data.<step> is present.
bool MemStepRecorded(const kind_data::MemoryProfileData& data, std::string_view step);
// data.step_failures holds step.
bool MemStepFailed(const kind_data::MemoryProfileData& data, std::string_view step);
// Recorded or failed.
bool MemStepDone(const kind_data::MemoryProfileData& data, std::string_view step);

}  // namespace npuprof::sm
