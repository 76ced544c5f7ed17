#include "statemachine/memory_profile_events.h"

#include <algorithm>
#include <array>

namespace npuprof::sm {

namespace {

constexpr std::array<MemoryEvidenceEvent, 19> kEvents = {{
    {"launch_attempted", "LaunchAttempted"},
    {"baseline", "BaselineRecorded"},
    {"serve_ended", "AttachedServiceEnded"},
    {"preflight", "PreflightChecked"},
    {"after_ready", "AfterReadyRecorded"},
    {"after_infer", "AfterInferenceRecorded"},
    {"service", "ServiceLaunched"},
    {"ready", "ServiceReady"},
    {"vllm_log", "VllmLogRead"},
    {"inference", "InferenceDone"},
    {"stopped", "ServiceStopped"},
    {"weights", "WeightsRead"},
    {"theory", "WeightsTheoryRead"},
    {"model_config", "ModelConfigRead"},
    {"flush_min", "FlushMinimumWaited"},
    {"flushed", "MsprofFlushed"},
    {"export", "MsprofExported"},
    {"msprof", "MsprofCollected"},
    {"stop_escalated", "StopEscalated"},
}};

}  // namespace

std::span<const MemoryEvidenceEvent> MemoryEvidenceEvents() { return kEvents; }

std::string_view MemoryEventTypeFor(std::string_view field) {
  auto it = std::find_if(kEvents.begin(), kEvents.end(), [&](const auto& e) { return e.field == field; });
  return it == kEvents.end() ? std::string_view() : it->type;
}

std::string_view MemoryFieldOf(std::string_view type) {
  auto it = std::find_if(kEvents.begin(), kEvents.end(), [&](const auto& e) { return e.type == type; });
  return it == kEvents.end() ? std::string_view() : it->field;
}

}  // namespace npuprof::sm
