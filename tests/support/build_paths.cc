#include "tests/support/build_paths.h"

namespace npuprof::build_paths {

const char* SourceDir() { return NPUPROF_SOURCE_DIR; }
const char* TestDataDir() { return NPUPROF_SOURCE_DIR "/tests/data"; }
const char* BinaryDir() { return NPUPROF_BINARY_DIR; }
const char* CmakeCommand() { return NPUPROF_CMAKE_COMMAND; }
const char* SimDirFromBindir() { return NPUPROF_SIM_DIR_FROM_BINDIR; }

}  // namespace npuprof::build_paths
