// `npuprof demo`: filled in below once the simulated target is wired.
#include "cli/commands.h"

namespace npuprof::cli {

void AddDemoCommand(CLI::App&) {}

}  // namespace npuprof::cli
