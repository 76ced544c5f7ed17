// Known environment problems in a vLLM launch log (docs/FORMATS.md#vllm-log-env-errors;
// how readiness reports them: docs/BEHAVIOUR.md#lifecycle-env-errors): missing vllm / vllm_ascend / torch_npu, a shared library that
// cannot be loaded (libhccl.so), "Failed to infer device type", and
// ImportError / ModuleNotFoundError. Pure; used by vllm_log_parser.
#pragma once

#include <string_view>

namespace npuprof::parsers {

// The kind of environment problem reported by one log line, most specific
// first: "missing_vllm_ascend", "missing_torch_npu", "missing_vllm",
// "libhccl", "shared_object", "device_type", "import_error"; nullptr when the
// line reports none. `level` is the line's log level ("" when it has none): a
// generic ImportError / ModuleNotFoundError counts only outside DEBUG / INFO /
// WARNING lines, because vllm-ascend normally warns "Failed to import from
// vllm._C with ModuleNotFoundError(...)".
const char* ClassifyEnvErrorLine(std::string_view text, std::string_view level);

}  // namespace npuprof::parsers
