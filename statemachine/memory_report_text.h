// Human-readable rendering of a memory-profile report (BuildMemoryReport's
// JSON). Pure: the same report and language give the same text.
#pragma once

#include <string>

#include "statemachine/run_state.h"

namespace npuprof::sm {

// lang: "zh" (default; the reference scripts' labels such as 固定开销, 模型权重,
// KV Cache 预留, HCCL 缓冲, 激活峰值, 未归因残差) or "en".
std::string RenderMemoryReportText(const json& report, const std::string& lang = "zh");

}  // namespace npuprof::sm
