// The text of one device's operator memory (operator_memory_report.h's
// "operator_memory" entry) in the memory report, zh or en. Pure.
#pragma once

#include <string>

#include "statemachine/run_state.h"

namespace npuprof::sm {

std::string RenderOperatorMemoryText(const json& entry, bool zh);

}  // namespace npuprof::sm
