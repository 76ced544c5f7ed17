#include "statemachine/engine.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/machine_check_machine.h"
#include "statemachine/probe_machine.h"

namespace npuprof::sm {

const KindRegistry& DefaultKinds() {
  static const KindRegistry* registry = [] {
    auto* r = new KindRegistry();
    r->Register(std::make_unique<ProbeMachine>());
    r->Register(std::make_unique<MachineCheckMachine>());
    RegisterServeKind(*r);
    RegisterTorchProfileKinds(*r);
    RegisterMemoryProfileKind(*r);
    RegisterSweepKind(*r);
    return r;
  }();
  return *registry;
}

}  // namespace npuprof::sm
