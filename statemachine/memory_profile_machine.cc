// Placeholder until the run kind lands; replaced by its own implementation.
#include "statemachine/kind_registrations.h"

namespace npuprof::sm {

void RegisterMemoryProfileKind(KindRegistry&) {}

}  // namespace npuprof::sm
