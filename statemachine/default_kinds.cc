#include "statemachine/engine.h"
#include "statemachine/machine_check_machine.h"
#include "statemachine/probe_machine.h"

namespace npuprof::sm {

const KindRegistry& DefaultKinds() {
  static const KindRegistry* registry = [] {
    auto* r = new KindRegistry();
    r->Register(std::make_unique<ProbeMachine>());
    r->Register(std::make_unique<MachineCheckMachine>());
    return r;
  }();
  return *registry;
}

}  // namespace npuprof::sm
