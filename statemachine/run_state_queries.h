// Read-only questions about a RunState shared by the kinds. Pure.
//
// Contract: task ids are "<run>.t<n>" (Decision::ScheduleTask); "latest"
// means the highest n, never the map's order (".t10" sorts before ".t9").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "statemachine/run_state.h"

namespace npuprof::sm {

// n of a task id "<run>.t<n>"; 0 when the id has no such number.
uint64_t TaskNumber(std::string_view task_id);

// The task of `kind` with the highest task number, optionally only those with
// payload.role == role; nullptr when there is none.
const TaskInfo* LastTask(const RunState& s, std::string_view kind, std::string_view role = "");

// The machine a task was sent to: its payload's machine.name ("" when the
// payload names none).
std::string TaskMachine(const TaskInfo& task);
// The handler result of a succeeded task (null otherwise).
json TaskResultData(const TaskInfo* t);

// LastTask among the tasks sent to `machine` ("" = every task).
const TaskInfo* LastTaskOn(const RunState& s, std::string_view kind, std::string_view machine);

}  // namespace npuprof::sm
