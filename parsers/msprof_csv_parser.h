// Parsers of msprof / torch_npu memory CSVs and sanity checks of torch_npu
// analyse() outputs. Callers hand in the file text; no I/O happens here.
//
// Formats (see spec/msprof-torch-npu-formats.md):
//   npu_module_mem (msprof PROF export)  Device_id,Component,Timestamp(us),Total Reserved(KB),Device
//   npu_module_mem (torch_npu)           Device_id,Component,Timestamp(us),Total Reserved(MB),Device
//   npu_module_mem (torch_npu legacy)    Component,Timestamp(us),Total Reserved(MB),Device
//   npu_mem (msprof)                     Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)
//   npu_mem (old per-device)             event,ddr(KB),hbm(KB),memory(KB),timestamp(us)
// Columns are matched by name, never by position. Cells are trimmed of spaces
// and TABs (msprof writes a trailing TAB after timestamps); a UTF-8 BOM and
// CRLF line ends are accepted; CSV quoting ("a,b", "" escapes) is honoured.
// KB -> MB divides by 1024. Every number kept is finite (parsers/finite_number.h):
// a value cell that is no number ("N/A") skips its row, one that spells a number
// out of range ("inf", "nan", "1e999") refuses the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof {

enum class MsprofCsvKind {
  kUnknown,
  kNpuModuleMem,   // Component + Total Reserved(KB|MB), without Total Allocated(MB)
  kNpuMem,         // event + hbm(KB)
  kMemoryRecord,   // torch_npu memory_record.csv: Component + Total Allocated(MB) + Total Reserved(MB)
  kKernelDetails,  // Name + Type + Accelerator Core + Start Time(us) + Duration(us)
};

const char* MsprofCsvKindName(MsprofCsvKind kind);  // "npu_module_mem", "npu_mem", ...

// Detects the kind from the first record (the header) of `csv_text`.
MsprofCsvKind DetectMsprofCsvKind(std::string_view csv_text);

// ---- npu_module_mem ------------------------------------------------------

// The maximum Total Reserved of one Component on one device.
struct ModuleMemComponent {
  std::optional<int> device_id;      // Device_id column, else "NPU:<n>" of Device; nullopt when
                                     // neither is present or numeric ("host")
  std::string component;             // "HCCL", "RUNTIME", "SLOG", ...
  double max_reserved_mb = 0;        // max over rows with a value >= 0
  std::string max_raw_value;         // the cell as written (KB or MB per unit_is_kb)
  size_t max_data_row = 0;           // 1-based data row of the max (header not counted)
  std::string max_timestamp_raw;     // Timestamp(us) of that row, trimmed ("" if no column)
  size_t rows = 0;                   // rows of this component/device
  size_t negative_rows = 0;          // rows with -1 ("only releases collected" per the docs)
  bool has_value = false;            // false when every row was negative
};

struct ModuleMemTable {
  bool unit_is_kb = false;           // Total Reserved(KB) (msprof) vs (MB) (torch_npu)
  bool has_device_id_column = false;
  std::vector<ModuleMemComponent> components;  // order of first appearance
  size_t data_rows = 0;
  size_t skipped_rows = 0;           // rows with a non-numeric value or too few cells

  // The entry for (component, device); device nullopt matches the first entry
  // of that component regardless of device. nullptr when absent.
  const ModuleMemComponent* Find(std::string_view component,
                                 std::optional<int> device_id = std::nullopt) const;
};

// Errors: empty text; header without "Component" or without
// "Total Reserved(KB)"/"Total Reserved(MB)" (kInvalidArgument, the message names
// what is missing); a Total Reserved cell out of range (kCorruption naming the
// data row and the column).
Result<ModuleMemTable> ParseNpuModuleMemCsv(std::string_view csv_text);

// ---- npu_mem -------------------------------------------------------------

struct NpuMemSample {
  double timestamp_us = 0;           // ~0.25 us precision at 1.7e15 us; see timestamp_raw
  std::string timestamp_raw;
  double hbm_mb = 0;
  std::optional<double> ddr_mb;      // when the column exists
  std::optional<double> memory_mb;
  size_t data_row = 0;               // 1-based
};

// One event ("APP" process-level, "Device" device-level) of one device.
struct NpuMemSeries {
  std::optional<int> device_id;
  std::string event;
  std::vector<NpuMemSample> samples;  // file order
  double max_hbm_mb = 0;
  size_t max_data_row = 0;
  std::string max_raw_hbm_kb;
  std::string max_timestamp_raw;
  double last_hbm_mb = 0;            // sample with the greatest timestamp (later row on ties)
  size_t last_data_row = 0;
  double last_timestamp_us = 0;
  std::string last_timestamp_raw;
};

struct NpuMemTable {
  bool has_device_id_column = false;
  std::vector<NpuMemSeries> series;  // order of first appearance
  size_t data_rows = 0;
  size_t skipped_rows = 0;

  const NpuMemSeries* Find(std::string_view event, std::optional<int> device_id = std::nullopt) const;
};

// Errors: empty text; header without "event", "hbm(KB)" or "timestamp(us)"
// (kInvalidArgument); an hbm, timestamp, ddr or memory cell out of range
// (kCorruption naming the data row and the column).
Result<NpuMemTable> ParseNpuMemCsv(std::string_view csv_text);

// ---- analyse() output checks ---------------------------------------------

struct KernelDetailsCheck {
  size_t columns = 0;
  size_t data_rows = 0;
  size_t ragged_rows = 0;            // rows whose cell count differs from the header's
  bool has_step_id = false;
  bool has_device_id = false;
  std::string block_column;          // "Block Num", "Block Dim" or "" when neither
};

// Valid when the header has Name, Type, Accelerator Core, Start Time(us) and
// Duration(us). Errors name every missing column. Zero data rows is valid
// (the caller decides whether an empty trace is acceptable).
Result<KernelDetailsCheck> CheckKernelDetailsCsv(std::string_view csv_text);

struct TraceViewCheck {
  bool bare_array = false;           // torch_npu writes a bare array; false: {"traceEvents":[...]}
  size_t event_count = 0;            // elements of the event array
  size_t non_object_events = 0;      // elements that are not JSON objects
};

// Streams the JSON (no DOM is built, so large traces are cheap). Errors:
// invalid or truncated JSON (with the byte position), a top-level value that
// is neither an array nor an object with a "traceEvents" array.
Result<TraceViewCheck> CheckTraceViewJson(std::string_view json_text);

}  // namespace npuprof
