// The output of one HBM sample of a watched service (serve --watch-hbm,
// task service.hbm_sample): `npu-smi info` on stdout, and on stderr two
// readings of the target's clock around it, lines "npuprof-t0 NS" and
// "npuprof-t1 NS" (`date +%s%N`, nanoseconds since the epoch) among
// whatever npu-smi itself wrote there. Pure: text in, a reading out.
//
// The sample's time is the midpoint of the two target readings when both are
// whole numbers of at least 16 digits with t0 <= t1 (clock "target");
// otherwise (a `date` without %N prints "...N") the midpoint of the worker's
// readings passed in (clock "worker"). Per device: device memory used and
// total (the HBM pair on 910 layouts, Memory-Usage on 310: npu_smi_parser.h)
// of the devices asked for, by logical id (npu-smi's listing order); none
// asked = every device listed.
// Errors: what ParseNpuSmi returns for text that is not npu-smi's table, and
// kInvalidArgument naming a device asked for that the table does not list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::parsers {

inline constexpr const char* kHbmSampleT0Tag = "npuprof-t0 ";
inline constexpr const char* kHbmSampleT1Tag = "npuprof-t1 ";

struct HbmSampleDevice {
  int64_t device_id = 0;
  int64_t used_mb = 0;
  int64_t total_mb = 0;
};

struct HbmSampleReading {
  int64_t t_ms = 0;
  std::string clock;  // "target" | "worker"
  std::vector<HbmSampleDevice> devices;
};

Result<HbmSampleReading> ParseHbmSampleOutput(std::string_view npu_smi_stdout, std::string_view stderr_text,
                                              const std::vector<int64_t>& devices, int64_t worker_t0_ms,
                                              int64_t worker_t1_ms);

}  // namespace npuprof::parsers
