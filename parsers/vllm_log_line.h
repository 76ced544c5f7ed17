// One physical vLLM log line taken apart: colour codes removed, per-process
// prefix, level and message found. Pure; used by vllm_log_parser.
//
// Line shapes handled (docs/FORMATS.md#vllm-log-lines, #vllm-log-prefixes, #vllm-log-traps):
//   "INFO 07-17 23:41:16 model_runner.py:559] msg"            (<= v0.7.2)
//   "INFO 03-22 18:52:52 [model_runner.py:1146] msg"          (v0.7.3+)
//   "(VllmWorker rank=0 pid=123) INFO ... msg"                 (process prefix)
//   "(EngineCore_DP0 pid=559) (Worker_TP0 pid=566) INFO ..."   (nested prefixes)
//   "...[00:00<?, ?it/s](VllmWorkerProcess pid=1) INFO ..."    (tqdm glued in front)
//   "(APIServer pid=2719) INFO:     Application startup complete."  (uvicorn)
//   "(Worker_TP1 pid=104959) [E55] free text"                   (no level)
// plus ANSI colour codes as raw ESC, "#033[..m", "^[[..m" or a bare "[1;36m".
#pragma once

#include <string>
#include <string_view>

namespace npuprof::parsers {

struct VllmLogLine {
  std::string text;     // the line with colour codes and a UTF-8 BOM removed
  std::string prefix;   // innermost "(... pid=N ...)" prefix, parentheses dropped
                        // ("VllmWorkerProcess pid=6923"); "" when the line has none
  std::string level;    // "INFO", "WARNING", ... ; "" when no level anchor was found
  std::string message;  // the text after "file:line] " (or after "INFO:     " for
                        // uvicorn, or after the prefix when there is no level)
};

// Removes ANSI SGR/cursor sequences in their raw and pasted forms.
std::string StripAnsi(std::string_view s);

// Splits one physical line (no '\n' or '\r' inside) into its parts.
VllmLogLine SplitVllmLogLine(std::string_view raw);

}  // namespace npuprof::parsers
