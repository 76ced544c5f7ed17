// memory-profile's domain events: each one records one piece of evidence,
// and the fold keeps its payload under the evidence's name in the run's data
// (data.baseline, data.ready, ...; the report and manifest read those).
//
//   field             event type              what it records
//   launch_attempted  LaunchAttempted         the runtime dir a launch was tried in
//   baseline          BaselineRecorded        npu-smi before the service (or the attached run's)
//   serve_ended       AttachedServiceEnded    the attached serve run ended under the profile
//   preflight         PreflightChecked        tools, msprof wrapper
//   after_ready       AfterReadyRecorded      npu-smi once the service is ready
//   after_infer       AfterInferenceRecorded  npu-smi after the inference
//   service           ServiceLaunched         the launch record (pid, port, devices, ...)
//   ready             ServiceReady            readiness (or the attached service's)
//   vllm_log          VllmLogRead             the vLLM log summary
//   inference         InferenceDone           the one request and its timing
//   stopped           ServiceStopped          the stop's record
//   weights           WeightsRead             safetensors headers, per-rank bytes
//   theory            WeightsTheoryRead       the model's theoretical sizes
//   model_config      ModelConfigRead         config.json as read
//   flush_min         FlushMinimumWaited      --flush-seconds served before the wait
//   flushed           MsprofFlushed           the flush wait's end and its signal
//   export            MsprofExported          msprof --export's record
//   msprof            MsprofCollected         the parsed msprof CSVs per device
//   stop_escalated    StopEscalated           a graceful stop that left it running
//
// The payload is the record itself (a JSON object). Logs written before
// these events carry MemoryEvidenceRecorded {"field", "value"} instead; the
// fold reads both the same way, so old stores need no migration. A record
// that is not an object, or a field without a row here, is still written in
// that generic form. Pure.
#pragma once

#include <span>
#include <string_view>

namespace npuprof::sm {

struct MemoryEvidenceEvent {
  std::string_view field;
  std::string_view type;
};

std::span<const MemoryEvidenceEvent> MemoryEvidenceEvents();
// The event type recording `field`, or "" when it has none.
std::string_view MemoryEventTypeFor(std::string_view field);
// The field an event type records, or "" when it is not one of these.
std::string_view MemoryFieldOf(std::string_view type);

}  // namespace npuprof::sm
