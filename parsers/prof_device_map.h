// Maps the CSVs exported by `msprof --export` to the devices they describe.
//
// Input is a file listing (paths relative to the msprof output dir, e.g. from
// `find <root>`); no I/O happens here. A PROF_* directory (torch_npu's regex
// ^PROF_\d+_\d+_[0-9a-zA-Z]+) covers the devices of its direct device_<N>
// subfolders. A CSV under PROF_*/device_<N>/ (old summary/ layout) describes
// device N alone; any other CSV under a PROF dir (mindstudio_profiler_output/)
// describes every device of that PROF dir, as in the seed.
//
// The seed's manifest key "__prof_device_map__" maps each collected CSV's
// local file name to device ids ({"npu_module_mem_20250101120000.csv": [0,1]});
// its internal discovery map is PROF dir -> device ids ({"PROF_...": [0,1]}).
// Both are produced here.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof {

struct ProfCsvEntry {
  std::string path;              // normalised relative path
  std::string file_name;         // base name
  std::string local_name;        // base name made unique in listing order: a repeat of
                                 // x.csv becomes x_1.csv, x_2.csv (the seed's collection naming)
  std::string prof_dir;          // relative path of its PROF_* dir; "" when not under one
  std::vector<int> device_ids;   // sorted; empty when unknown
  std::string scope;             // "device" (under device_<N>/), "prof" (whole PROF dir),
                                 // "unmapped" (no PROF dir)
  std::string report;            // "npu_module_mem", "npu_mem", "op_summary", ...
  std::string export_timestamp;  // 14-digit export time from the name; "" when absent
  int slice = -1;                // n of "_slice_<n>_"; -1 when not sliced
  bool newest_export = true;     // false when the same report (same folder, same slice)
                                 // exists with a newer export_timestamp (re-export)
};

struct ProfDeviceMap {
  std::map<std::string, std::vector<int>> prof_devices;  // PROF dir -> sorted unique ids
  std::vector<ProfCsvEntry> csvs;                        // listing order
};

// Normalises each path ("./a//b/" -> "a/b"), finds PROF dirs, their devices and
// every *.csv (case-insensitive). Size filtering (the seed keeps CSVs > 100
// bytes) is the caller's job.
ProfDeviceMap BuildProfDeviceMap(const std::vector<std::string>& relative_paths);

// Splits `find <root>` output into paths relative to root: lines under root
// lose the "root/" prefix, root itself and blank lines are dropped, other
// lines are kept as written.
std::vector<std::string> RelativePathsFromListing(std::string_view listing, std::string_view root);

// The JSON projections below make names valid UTF-8 (common/utf8.h: a name
// on the target is bytes); the map itself keeps the bytes, so paths still
// match the files collected.

// {"PROF_000001_...": [0, 1], ...}
nlohmann::json ProfDevicesJson(const ProfDeviceMap& map);

// The seed's "__prof_device_map__": {local_name: [device ids]} for every CSV
// under a PROF dir.
nlohmann::json CsvDeviceMapJson(const ProfDeviceMap& map);

// {"prof_dirs": ProfDevicesJson, "__prof_device_map__": CsvDeviceMapJson,
//  "csvs": [{path, file_name, local_name, prof_dir, device_ids, scope, report,
//            export_timestamp, slice, newest_export}]}
nlohmann::json ProfDeviceMapJson(const ProfDeviceMap& map);

}  // namespace npuprof
