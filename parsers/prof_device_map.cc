#include "parsers/prof_device_map.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/utf8.h"

namespace npuprof {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// ^PROF_\d+_\d+_[0-9a-zA-Z]+ (then anything).
bool IsProfDirName(std::string_view s) {
  if (!s.starts_with("PROF_")) return false;
  s.remove_prefix(5);
  for (int part = 0; part < 2; ++part) {
    size_t us = s.find('_');
    if (us == std::string_view::npos || !AllDigits(s.substr(0, us))) return false;
    s.remove_prefix(us + 1);
  }
  size_t n = 0;
  while (n < s.size() && std::isalnum(static_cast<unsigned char>(s[n]))) ++n;
  return n > 0;
}

// device_<N> -> N, else -1.
int DeviceDirNumber(std::string_view s) {
  if (!s.starts_with("device_")) return -1;
  s.remove_prefix(7);
  if (!AllDigits(s) || s.size() > 9) return -1;
  return std::stoi(std::string(s));
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = slash + 1;
  }
  return parts;
}

std::string Join(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < parts.size(); ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out;
}

bool EndsWithCsv(std::string_view name) {
  if (name.size() < 4) return false;
  std::string ext(name.substr(name.size() - 4));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".csv";
}

// Splits "npu_mem_slice_2_20250101120000" into report/slice/timestamp; the old
// "npu_module_mem_0_1_1" naming loses its trailing numeric groups.
void ParseExportName(std::string_view stem, ProfCsvEntry& e) {
  size_t us = stem.rfind('_');
  if (us != std::string_view::npos && stem.size() - us - 1 == 14 && AllDigits(stem.substr(us + 1))) {
    e.export_timestamp = std::string(stem.substr(us + 1));
    stem = stem.substr(0, us);
    size_t sl = stem.rfind("_slice_");
    if (sl != std::string_view::npos && AllDigits(stem.substr(sl + 7)) && stem.size() - sl - 7 < 9) {
      e.slice = std::stoi(std::string(stem.substr(sl + 7)));
      stem = stem.substr(0, sl);
    }
    e.report = std::string(stem);
    return;
  }
  while (true) {
    us = stem.rfind('_');
    if (us == std::string_view::npos || !AllDigits(stem.substr(us + 1))) break;
    stem = stem.substr(0, us);
  }
  e.report = std::string(stem);
}

std::string UniqueLocalName(const std::string& file_name, std::set<std::string>& used) {
  if (used.insert(file_name).second) return file_name;
  size_t dot = file_name.rfind('.');
  std::string stem = dot == std::string::npos ? file_name : file_name.substr(0, dot);
  std::string ext = dot == std::string::npos ? "" : file_name.substr(dot);
  for (int i = 1;; ++i) {
    std::string candidate = stem + "_" + std::to_string(i) + ext;
    if (used.insert(candidate).second) return candidate;
  }
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

ProfDeviceMap BuildProfDeviceMap(const std::vector<std::string>& relative_paths) {
  ProfDeviceMap map;
  std::map<std::string, std::set<int>> devices;
  std::set<std::string> used_names;

  for (const std::string& raw : relative_paths) {
    std::vector<std::string> parts = SplitPath(raw);
    if (parts.empty()) continue;
    auto prof = std::find_if(parts.begin(), parts.end(), [](const std::string& p) { return IsProfDirName(p); });
    std::string prof_dir;
    int device = -1;
    if (prof != parts.end()) {
      size_t prof_index = static_cast<size_t>(prof - parts.begin());
      prof_dir = Join(parts, prof_index + 1);
      devices[prof_dir];  // a PROF dir without device folders still appears
      if (prof_index + 1 < parts.size()) {
        device = DeviceDirNumber(parts[prof_index + 1]);
        if (device >= 0) devices[prof_dir].insert(device);
      }
    }
    const std::string& file_name = parts.back();
    if (!EndsWithCsv(file_name)) continue;
    ProfCsvEntry e;
    e.path = Join(parts, parts.size());
    e.file_name = file_name;
    e.local_name = UniqueLocalName(file_name, used_names);
    e.prof_dir = prof_dir;
    if (prof_dir.empty()) {
      e.scope = "unmapped";
    } else if (device >= 0 && parts.size() > 2) {
      e.scope = "device";
      e.device_ids = {device};
    } else {
      e.scope = "prof";
    }
    ParseExportName(std::string_view(file_name).substr(0, file_name.size() - 4), e);
    map.csvs.push_back(std::move(e));
  }

  for (auto& [dir, ids] : devices) map.prof_devices[dir] = std::vector<int>(ids.begin(), ids.end());
  for (ProfCsvEntry& e : map.csvs) {
    if (e.scope == "prof") e.device_ids = map.prof_devices[e.prof_dir];
  }
  // Re-exports: keep the newest timestamp per (folder, report, slice).
  for (ProfCsvEntry& e : map.csvs) {
    if (e.export_timestamp.empty()) continue;
    for (const ProfCsvEntry& other : map.csvs) {
      if (other.report == e.report && other.slice == e.slice && DirOf(other.path) == DirOf(e.path) &&
          other.export_timestamp > e.export_timestamp) {
        e.newest_export = false;
        break;
      }
    }
  }
  return map;
}

std::vector<std::string> RelativePathsFromListing(std::string_view listing, std::string_view root) {
  while (root.size() > 1 && root.back() == '/') root.remove_suffix(1);
  std::vector<std::string> out;
  size_t start = 0;
  while (start < listing.size()) {
    size_t nl = listing.find('\n', start);
    if (nl == std::string_view::npos) nl = listing.size();
    std::string_view line = listing.substr(start, nl - start);
    start = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line == root) continue;
    if (!root.empty() && line.size() > root.size() && line.starts_with(root) && line[root.size()] == '/') {
      line.remove_prefix(root.size() + 1);
    }
    if (!line.empty()) out.emplace_back(line);
  }
  return out;
}

nlohmann::json ProfDevicesJson(const ProfDeviceMap& map) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [dir, ids] : map.prof_devices) out[ToValidUtf8(dir)] = ids;
  return out;
}

nlohmann::json CsvDeviceMapJson(const ProfDeviceMap& map) {
  nlohmann::json out = nlohmann::json::object();
  for (const ProfCsvEntry& e : map.csvs) {
    if (!e.prof_dir.empty()) out[ToValidUtf8(e.local_name)] = e.device_ids;
  }
  return out;
}

nlohmann::json ProfDeviceMapJson(const ProfDeviceMap& map) {
  nlohmann::json csvs = nlohmann::json::array();
  for (const ProfCsvEntry& e : map.csvs) {
    csvs.push_back({{"path", ToValidUtf8(e.path)},
                    {"file_name", ToValidUtf8(e.file_name)},
                    {"local_name", ToValidUtf8(e.local_name)},
                    {"prof_dir", ToValidUtf8(e.prof_dir)},
                    {"device_ids", e.device_ids},
                    {"scope", e.scope},
                    {"report", ToValidUtf8(e.report)},
                    {"export_timestamp", e.export_timestamp},
                    {"slice", e.slice},
                    {"newest_export", e.newest_export}});
  }
  return {{"prof_dirs", ProfDevicesJson(map)},
          {"__prof_device_map__", CsvDeviceMapJson(map)},
          {"csvs", std::move(csvs)}};
}

}  // namespace npuprof
