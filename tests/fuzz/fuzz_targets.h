// The fuzz targets: one per parser of remote bytes (and the two readers
// every boundary shares: nesting-limited JSON, text for a terminal). Each takes any bytes,
// runs its parser(s) and checks their contract (tests/fuzz/fuzz_check.h).
//
// Built two ways from the same sources (tests/fuzz/CMakeLists.txt):
//  * the normal build links them into fuzz_replay_test, which feeds every
//    seed (tests/fuzz/corpus.txt) and every saved finding
//    (tests/fuzz/findings/<name>/) to its target;
//  * scripts/fuzz.sh builds them with clang into one libFuzzer executable per
//    target, fuzz_<name> (libfuzzer_entry.cc), and runs each for a while.
#pragma once

#include <array>

#include "tests/fuzz/fuzz_check.h"

namespace npuprof::fuzz {

int FuzzNpuSmi(const uint8_t* data, size_t size);          // parsers/npu_smi_parser
int FuzzVllmLog(const uint8_t* data, size_t size);         // parsers/vllm_log_parser
int FuzzVllmLogLine(const uint8_t* data, size_t size);     // parsers/vllm_log_line
int FuzzMsprofCsv(const uint8_t* data, size_t size);       // parsers/msprof_csv_parser: CSVs
int FuzzKernelSummary(const uint8_t* data, size_t size);   // parsers/kernel_summary (+ csv_records, chunked)
int FuzzTraceView(const uint8_t* data, size_t size);       // parsers/msprof_csv_parser: trace_view.json
int FuzzSafetensors(const uint8_t* data, size_t size);     // parsers/safetensors_header (+ weight attribution)
int FuzzProfDeviceMap(const uint8_t* data, size_t size);   // parsers/prof_device_map
int FuzzFileStream(const uint8_t* data, size_t size);      // parsers/file_stream
int FuzzHttpResponse(const uint8_t* data, size_t size);    // workers/ssh/http_over_ssh (pure part)
int FuzzCommandShell(const uint8_t* data, size_t size);    // workers/ssh/command_shell_protocol
int FuzzJsonDepth(const uint8_t* data, size_t size);       // common/json_depth: every JSON read from outside
int FuzzTerminalText(const uint8_t* data, size_t size);    // common/terminal_text: bytes shown on a terminal

struct NamedTarget {
  const char* name;  // as in tests/fuzz/corpus.txt and fuzz_<name>
  Target run;
};

inline constexpr std::array<NamedTarget, 13> kTargets = {{
    {"npu_smi", FuzzNpuSmi},
    {"vllm_log", FuzzVllmLog},
    {"vllm_log_line", FuzzVllmLogLine},
    {"msprof_csv", FuzzMsprofCsv},
    {"kernel_summary", FuzzKernelSummary},
    {"trace_view", FuzzTraceView},
    {"safetensors", FuzzSafetensors},
    {"prof_device_map", FuzzProfDeviceMap},
    {"file_stream", FuzzFileStream},
    {"http_response", FuzzHttpResponse},
    {"command_shell", FuzzCommandShell},
    {"json_depth", FuzzJsonDepth},
    {"terminal_text", FuzzTerminalText},
}};

}  // namespace npuprof::fuzz
