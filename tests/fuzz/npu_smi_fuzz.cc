// ParseNpuSmi on any bytes. Promises: an error is InvalidArgument (not
// npu-smi output) or Corruption with a message; a success lists at least one
// device with non-negative memory figures; the table ends at the first
// non-table line (anything after it changes nothing); the availability
// verdicts cover every device in order; both JSON projections serialise.
#include "common/status.h"
#include "parsers/npu_smi_parser.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {

int FuzzNpuSmi(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  auto snap = parsers::ParseNpuSmi(text);
  if (!snap.ok()) {
    const Code code = snap.status().code();
    FUZZ_CHECK(code == Code::kInvalidArgument || code == Code::kCorruption, "unexpected code {}",
               CodeName(code));
    CheckError(snap.status(), "ParseNpuSmi");
    return 0;
  }
  FUZZ_CHECK(!snap->devices.empty(), "a successful parse lists no device");
  for (const auto& d : snap->devices) {
    FUZZ_CHECK(d.device_memory_used_mb >= 0 && d.device_memory_total_mb >= 0,
               "NPU {} chip {}: negative device memory {} / {}", d.npu, d.chip,
               d.device_memory_used_mb, d.device_memory_total_mb);
  }
  const nlohmann::json projection = parsers::NpuSmiToJson(*snap);
  CheckJson(projection, "NpuSmiToJson");
  CheckJson(parsers::HbmSnapshotJson(*snap), "HbmSnapshotJson");

  const auto verdicts = parsers::ClassifyDevices(*snap);
  FUZZ_CHECK(verdicts.size() == snap->devices.size(), "{} verdicts for {} devices", verdicts.size(),
             snap->devices.size());
  for (size_t i = 0; i < verdicts.size(); ++i) {
    FUZZ_CHECK(verdicts[i].logical_id == static_cast<int>(i), "logical id {} at index {}",
               verdicts[i].logical_id, i);
    FUZZ_CHECK(verdicts[i].busy == !verdicts[i].reason.empty(), "busy without a reason or the reverse");
  }

  // The table ends at the first non-table line.
  const std::string extended = std::string(text) + "\nthe table ended here\n" + std::string(text);
  auto again = parsers::ParseNpuSmi(extended);
  FUZZ_CHECK(again.ok(), "text after the table made the parse fail: {}", again.status().ToString());
  FUZZ_CHECK(parsers::NpuSmiToJson(*again) == projection, "text after the table changed the result");
  FUZZ_CHECK(again->tool_version == snap->tool_version && again->driver_version == snap->driver_version,
             "text after the table changed the versions");
  return 0;
}

}  // namespace npuprof::fuzz
