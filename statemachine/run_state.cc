#include "statemachine/run_state.h"

#include <ostream>

namespace npuprof::sm {

std::string_view LeasePhaseName(LeasePhase phase) {
  switch (phase) {
    case LeasePhase::kNone: return "none";
    case LeasePhase::kProbing: return "probing";
    case LeasePhase::kWaiting: return "waiting";
    case LeasePhase::kHeld: return "held";
    case LeasePhase::kReleased: return "released";
    case LeasePhase::kRefused: return "refused";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, LeasePhase phase) { return os << LeasePhaseName(phase); }

}  // namespace npuprof::sm
