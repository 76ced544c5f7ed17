// The msprof / torch_npu CSV parsers on any bytes (every parser on every
// input: kind detection is only a hint). Promises: every number kept is
// finite; rows add up (data rows = skipped rows + rows kept); every evidence
// row exists; maxima and "last" samples are what the samples say; a kind that
// detection names parses without a missing-column error.
#include <cmath>
#include <set>
#include <utility>

#include "common/status.h"
#include "parsers/msprof_csv_parser.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

void CheckModuleMem(const Result<ModuleMemTable>& t, MsprofCsvKind kind) {
  if (!t.ok()) {
    CheckError(t.status(), "ParseNpuModuleMemCsv");
    const bool detected = kind == MsprofCsvKind::kNpuModuleMem || kind == MsprofCsvKind::kMemoryRecord;
    FUZZ_CHECK(!detected || t.status().code() != Code::kInvalidArgument,
               "detected as {} but refused for its header: {}", MsprofCsvKindName(kind), t.status().message());
    return;
  }
  size_t kept = 0;
  std::set<std::pair<std::string, std::optional<int>>> seen;
  for (const ModuleMemComponent& c : t->components) {
    FUZZ_CHECK(seen.emplace(c.component, c.device_id).second, "component {} listed twice", c.component);
    FUZZ_CHECK(c.rows >= 1 && c.negative_rows <= c.rows, "{}: {} negative of {} rows", c.component,
               c.negative_rows, c.rows);
    FUZZ_CHECK(c.has_value == (c.rows > c.negative_rows), "{}: has_value disagrees with its rows", c.component);
    if (c.has_value) {
      FUZZ_CHECK(std::isfinite(c.max_reserved_mb) && c.max_reserved_mb >= 0, "{}: max {}", c.component,
                 c.max_reserved_mb);
      FUZZ_CHECK(c.max_data_row >= 1 && c.max_data_row <= t->data_rows, "{}: max at row {} of {}", c.component,
                 c.max_data_row, t->data_rows);
    }
    FUZZ_CHECK(!c.device_id || *c.device_id >= 0, "negative device id");
    kept += c.rows;
  }
  FUZZ_CHECK(kept + t->skipped_rows == t->data_rows, "{} kept + {} skipped != {} data rows", kept,
             t->skipped_rows, t->data_rows);
}

void CheckNpuMem(const Result<NpuMemTable>& t) {
  if (!t.ok()) {
    CheckError(t.status(), "ParseNpuMemCsv");
    return;
  }
  size_t kept = 0;
  for (const NpuMemSeries& s : t->series) {
    FUZZ_CHECK(!s.samples.empty(), "series {} has no sample", s.event);
    double max_hbm = s.samples.front().hbm_mb;
    double last_ts = s.samples.front().timestamp_us;
    size_t prev_row = 0;
    for (const NpuMemSample& x : s.samples) {
      FUZZ_CHECK(std::isfinite(x.hbm_mb) && std::isfinite(x.timestamp_us), "row {}: hbm {} at {}", x.data_row,
                 x.hbm_mb, x.timestamp_us);
      FUZZ_CHECK(!x.ddr_mb || std::isfinite(*x.ddr_mb), "row {}: ddr {}", x.data_row, *x.ddr_mb);
      FUZZ_CHECK(!x.memory_mb || std::isfinite(*x.memory_mb), "row {}: memory {}", x.data_row, *x.memory_mb);
      FUZZ_CHECK(x.data_row > prev_row && x.data_row <= t->data_rows, "sample row {} after {} (of {})",
                 x.data_row, prev_row, t->data_rows);
      prev_row = x.data_row;
      max_hbm = std::max(max_hbm, x.hbm_mb);
      last_ts = std::max(last_ts, x.timestamp_us);
    }
    FUZZ_CHECK(s.max_hbm_mb == max_hbm, "series {}: max {} but the samples say {}", s.event, s.max_hbm_mb, max_hbm);
    FUZZ_CHECK(s.last_timestamp_us == last_ts, "series {}: last at {} but the samples end at {}", s.event,
               s.last_timestamp_us, last_ts);
    kept += s.samples.size();
  }
  FUZZ_CHECK(kept + t->skipped_rows == t->data_rows, "{} kept + {} skipped != {} data rows", kept,
             t->skipped_rows, t->data_rows);
}

void CheckKernelDetails(const Result<KernelDetailsCheck>& k, MsprofCsvKind kind) {
  if (!k.ok()) {
    CheckError(k.status(), "CheckKernelDetailsCsv");
    FUZZ_CHECK(kind != MsprofCsvKind::kKernelDetails, "detected as kernel_details but refused: {}",
               k.status().message());
    return;
  }
  FUZZ_CHECK(k->columns >= 5, "{} columns with the five required ones", k->columns);
  FUZZ_CHECK(k->ragged_rows <= k->data_rows, "{} ragged of {} rows", k->ragged_rows, k->data_rows);
}

}  // namespace

int FuzzMsprofCsv(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  const MsprofCsvKind kind = DetectMsprofCsvKind(text);
  CheckModuleMem(ParseNpuModuleMemCsv(text), kind);
  CheckNpuMem(ParseNpuMemCsv(text));
  CheckKernelDetails(CheckKernelDetailsCsv(text), kind);
  return 0;
}

}  // namespace npuprof::fuzz
