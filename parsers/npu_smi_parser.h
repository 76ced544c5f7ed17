// Parser of `npu-smi info` text (Huawei Ascend). Pure: text in, structs out.
//
// Layout rules (docs: /work/shared/spec/formats.md section 1):
//  * rows are split on '|', never on fixed column offsets;
//  * each chip is its own block of two rows and its own NpuDevice entry
//    (310 cards have 4 chips, 310P Duo and A3 have 2); chip 1 never
//    overwrites chip 0;
//  * 910-family layouts carry an HBM-Usage column: that pair is device memory.
//    310 / 310P / 310B have none: Memory-Usage is device memory;
//  * the process table may be absent (old versions, some chips).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::parsers {

// One chip block of the device table.
struct NpuDevice {
  int npu = 0;                                       // "NPU" column: card id, not 0-based or contiguous in general
  int chip = 0;                                      // "Chip" column: index within the NPU
  std::optional<int> device_id;                      // "Device" (310/310P) or "Phy-ID" (A3) column, when shown
  std::string name;                                  // e.g. "910B3", "910B4-1", "Ascend910", "310P3"
  std::string health;                                // "OK", "Warning", "Alarm", ...
  std::string bus_id;                                // e.g. "0000:C1:00.0" or "NA"
  std::optional<int64_t> hbm_used_mb, hbm_total_mb;  // only when an HBM column exists
  std::optional<int64_t> memory_used_mb, memory_total_mb;  // "Memory-Usage(MB)" pair
  // Device memory: the HBM pair where an HBM column exists, else Memory-Usage.
  int64_t device_memory_used_mb = 0;
  int64_t device_memory_total_mb = 0;
};

// One row of the process table.
struct NpuProcess {
  int npu = 0;
  int chip = 0;
  int64_t pid = 0;
  std::string name;  // may be empty, or cut to 15 characters by the tool
  int64_t memory_mb = 0;
};

struct NpuSmiSnapshot {
  std::string tool_version;    // "npu-smi 23.0.6" -> "23.0.6"
  std::string driver_version;  // "Version: 23.0.6" -> "23.0.6" (may differ from the tool's)
  bool has_hbm_column = false;
  std::vector<NpuDevice> devices;      // in the order listed
  std::vector<NpuProcess> processes;   // in the order listed
  bool process_table_present = false;  // false: no process section at all (not "no processes")
};

// Parses the first `npu-smi info` table found in `text` (lines before it, e.g.
// a slurm log, are skipped; the table ends at the first non-table line).
// Errors: kInvalidArgument when no npu-smi device header is found (not npu-smi
// output), kCorruption when the header is there but a row cannot be read or no
// device row follows. Messages name the 1-based line and quote at most 80
// bytes of the cell, made valid UTF-8.
Result<NpuSmiSnapshot> ParseNpuSmi(std::string_view text);

// CLI contract of `npuprof inspect npu-smi FILE`, exactly:
// {"devices":[{"npu","chip","name","health","hbm_used_mb","hbm_total_mb",
//   "memory_used_mb","memory_total_mb","device_memory_used_mb",
//   "device_memory_total_mb"}],
//  "processes":[{"npu","chip","pid","name","memory_mb"}],
//  "process_table_present":bool}
// with null where the layout lacks the column. Text fields are made valid
// UTF-8 (common/utf8.h: the output of a broken driver or a GBK locale is
// bytes); the snapshot itself keeps the bytes as read.
nlohmann::json NpuSmiToJson(const NpuSmiSnapshot& snapshot);

// Free/busy verdict for one device (chip), used to pick devices for a launch.
struct DeviceAvailability {
  int npu = 0;
  int chip = 0;
  // Index of the device in the order npu-smi lists it (0, 1, 2, ...). This is
  // the number ASCEND_RT_VISIBLE_DEVICES takes inside the container: logical
  // ids count visible chips in listing order, whatever the NPU ids are
  // (e.g. NPU 4..7 in a container are logical 0..3; A3 NPU 0 chip 1 is 1).
  int logical_id = 0;
  bool busy = false;
  std::string reason;                 // empty when free
  int64_t used_mb = 0, total_mb = 0;  // device memory
  std::vector<int64_t> pids;          // processes listed on this npu/chip
};

inline constexpr int64_t kDefaultBusyThresholdMb = 4096;

// Busy = a process is listed on that npu/chip, or device memory used is at
// least `busy_threshold_mb` with no process visible ("HBM in use with no
// visible process (another container?)"). One entry per device, in order.
std::vector<DeviceAvailability> ClassifyDevices(const NpuSmiSnapshot& snapshot,
                                                int64_t busy_threshold_mb = kDefaultBusyThresholdMb);

// The memory workflow's per-device snapshot:
// {"<logical_id>": {"used_mb","total_mb","npu","chip"}} (device memory).
nlohmann::json HbmSnapshotJson(const NpuSmiSnapshot& snapshot);

}  // namespace npuprof::parsers
