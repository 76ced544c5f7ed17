// The libFuzzer entry point of one target: compiled once per target with
// NPUPROF_FUZZ_FUNCTION set to its function (tests/fuzz/CMakeLists.txt).
#include "tests/fuzz/fuzz_targets.h"

#ifndef NPUPROF_FUZZ_FUNCTION
#error "NPUPROF_FUZZ_FUNCTION names the target function (e.g. FuzzNpuSmi)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return npuprof::fuzz::NPUPROF_FUZZ_FUNCTION(data, size);
}
