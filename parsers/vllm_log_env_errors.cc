#include "parsers/vllm_log_env_errors.h"

#include <set>
#include <string>
#include <vector>

#include "parsers/vllm_log_parser.h"

namespace npuprof::parsers {
namespace {

bool Contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

}  // namespace

const char* ClassifyEnvErrorLine(std::string_view t, std::string_view level) {
  if (Contains(t, "No module named 'vllm_ascend'") || Contains(t, "No module named vllm_ascend")) {
    return "missing_vllm_ascend";
  }
  if (Contains(t, "No module named 'torch_npu'") || Contains(t, "No module named torch_npu")) {
    return "missing_torch_npu";
  }
  if (Contains(t, "No module named 'vllm'") || t.ends_with("No module named vllm") ||
      Contains(t, "vllm: command not found") || Contains(t, "vllm: not found")) {
    return "missing_vllm";
  }
  if (Contains(t, "libhccl.so")) return "libhccl";
  if (Contains(t, "cannot open shared object file")) return "shared_object";
  if (Contains(t, "Failed to infer device type")) return "device_type";
  const bool quiet_level = level == "DEBUG" || level == "INFO" || level == "WARNING" || level == "WARN";
  if ((Contains(t, "ImportError") || Contains(t, "ModuleNotFoundError")) && !quiet_level) return "import_error";
  return nullptr;
}

std::string EnvErrorHint(const std::vector<VllmEnvError>& errors) {
  if (errors.empty()) return {};
  std::set<std::string> kinds;
  for (const auto& e : errors) kinds.insert(e.kind);
  std::string what;
  auto add = [&what](const std::string& s) { what += (what.empty() ? "" : "; ") + s; };
  if (kinds.count("missing_vllm")) add("the vllm package is not importable");
  if (kinds.count("missing_vllm_ascend")) add("the vllm_ascend plugin is not installed");
  if (kinds.count("missing_torch_npu")) add("torch_npu is not installed");
  if (kinds.count("libhccl")) add("libhccl.so (CANN) cannot be loaded");
  if (kinds.count("shared_object")) add("a shared library cannot be loaded");
  if (kinds.count("device_type")) add("vLLM failed to infer the device type (no NPU platform plugin active)");
  if (kinds.count("import_error")) add("a Python import failed");
  return "the vLLM environment on the target is incomplete (" + what + ", first at line " +
         std::to_string(errors.front().line) +
         "): source the CANN set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) and install "
         "vllm, vllm-ascend and torch_npu in the Python that launches the service";
}

}  // namespace npuprof::parsers
