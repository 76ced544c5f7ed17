// The msprof output listing (`find <root>` output) to PROF dirs, devices and
// CSVs, on any bytes. The root is the first line when it is absolute, else
// ".". Promises: every relative path is one non-empty line; every CSV entry
// names a *.csv, has a local name no other entry has, a scope that agrees with
// its PROF dir and its device ids (sorted, unique, non-negative); an export
// stamp is 14 digits; the JSON projection serialises and parses back.
#include <algorithm>
#include <cctype>
#include <set>

#include "parsers/prof_device_map.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

bool SortedUniqueNonNegative(const std::vector<int>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || (i > 0 && ids[i - 1] >= ids[i])) return false;
  }
  return true;
}

bool IsCsvName(std::string_view name) {
  if (name.size() < 4) return false;
  std::string ext(name.substr(name.size() - 4));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".csv";
}

}  // namespace

int FuzzProfDeviceMap(const uint8_t* data, size_t size) {
  const std::string_view listing = AsText(data, size);
  std::string_view root = listing.substr(0, listing.find('\n'));
  if (!root.starts_with("/")) root = ".";

  const std::vector<std::string> paths = RelativePathsFromListing(listing, root);
  for (const std::string& p : paths) {
    FUZZ_CHECK(!p.empty() && p.find('\n') == std::string::npos, "path '{}' is not one non-empty line", p);
  }
  const ProfDeviceMap map = BuildProfDeviceMap(paths);
  FUZZ_CHECK(map.csvs.size() <= paths.size(), "{} CSVs from {} paths", map.csvs.size(), paths.size());
  for (const auto& [dir, ids] : map.prof_devices) {
    FUZZ_CHECK(SortedUniqueNonNegative(ids), "PROF dir {}: device ids not sorted and unique", dir);
  }
  std::set<std::string> local_names;
  for (const ProfCsvEntry& e : map.csvs) {
    FUZZ_CHECK(IsCsvName(e.file_name), "entry {} is not a CSV", e.file_name);
    FUZZ_CHECK(local_names.insert(e.local_name).second, "local name {} given twice", e.local_name);
    FUZZ_CHECK(SortedUniqueNonNegative(e.device_ids), "{}: device ids not sorted and unique", e.path);
    FUZZ_CHECK((e.scope == "unmapped") == e.prof_dir.empty(), "{}: scope {} with PROF dir '{}'", e.path, e.scope,
               e.prof_dir);
    if (e.scope == "device") {
      FUZZ_CHECK(e.device_ids.size() == 1, "{}: device scope with {} ids", e.path, e.device_ids.size());
    } else if (e.scope == "prof") {
      FUZZ_CHECK(map.prof_devices.count(e.prof_dir) && map.prof_devices.at(e.prof_dir) == e.device_ids,
                 "{}: prof scope without its PROF dir's devices", e.path);
    } else {
      FUZZ_CHECK(e.scope == "unmapped" && e.device_ids.empty(), "{}: scope {} with {} ids", e.path, e.scope,
                 e.device_ids.size());
    }
    FUZZ_CHECK(e.export_timestamp.empty() ||
                   (e.export_timestamp.size() == 14 &&
                    std::all_of(e.export_timestamp.begin(), e.export_timestamp.end(),
                                [](char c) { return c >= '0' && c <= '9'; })),
               "{}: export stamp '{}'", e.path, e.export_timestamp);
    FUZZ_CHECK(e.slice >= -1, "{}: slice {}", e.path, e.slice);
  }
  CheckJson(ProfDeviceMapJson(map), "ProfDeviceMapJson");
  return 0;
}

}  // namespace npuprof::fuzz
