// Placeholder until the run kind lands; replaced by its own implementation.
#include "cli/submit_kinds.h"

namespace npuprof::cli {

void AddSubmitTorchProfile(CLI::App*) {}

}  // namespace npuprof::cli
