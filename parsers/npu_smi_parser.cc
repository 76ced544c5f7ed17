#include "parsers/npu_smi_parser.h"

#include <fmt/format.h>

#include <charconv>
#include <utility>

#include "common/text.h"
#include "common/utf8.h"

namespace npuprof::parsers {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A cell quoted in an error message: valid UTF-8, at most 80 bytes.
std::string Quote(std::string_view cell) { return TruncateUtf8(cell, 80); }

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const auto nl = text.find('\n', start);
    const auto end = nl == std::string_view::npos ? text.size() : nl;
    lines.push_back(text.substr(start, end - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return lines;
}

// "| a | b |  c | " -> {"a", "b", "c"} (trimmed; the outer borders dropped).
std::vector<std::string_view> SplitCells(std::string_view row) {
  std::vector<std::string_view> cells;
  row = Trim(row);
  if (!row.empty() && row.front() == '|') row.remove_prefix(1);
  if (!row.empty() && row.back() == '|') row.remove_suffix(1);
  size_t start = 0;
  while (true) {
    const auto bar = row.find('|', start);
    cells.push_back(Trim(row.substr(start, bar == std::string_view::npos ? row.npos : bar - start)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return cells;
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const size_t b = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > b) words.push_back(s.substr(b, i - b));
  }
  return words;
}

template <typename Int>
std::optional<Int> ParseInt(std::string_view s) {
  s = Trim(s);
  Int v{};
  const auto* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != end) return std::nullopt;
  return v;
}

struct Pair {
  int64_t used, total;
};

// Every "<used> / <total>" pair in a cell, left to right. Spacing varies:
// "2862 / 32768", "41052/ 65536", "0    / 0".
std::vector<Pair> FindPairs(std::string_view cell) {
  std::vector<Pair> pairs;
  size_t pos = 0;
  while ((pos = cell.find('/', pos)) != std::string_view::npos) {
    size_t l = pos;
    while (l > 0 && cell[l - 1] == ' ') --l;
    size_t lb = l;
    while (lb > 0 && cell[lb - 1] >= '0' && cell[lb - 1] <= '9') --lb;
    size_t r = pos + 1;
    while (r < cell.size() && cell[r] == ' ') ++r;
    size_t re = r;
    while (re < cell.size() && cell[re] >= '0' && cell[re] <= '9') ++re;
    auto used = ParseInt<int64_t>(cell.substr(lb, l - lb));
    auto total = ParseInt<int64_t>(cell.substr(r, re - r));
    if (used && total) pairs.push_back({*used, *total});
    pos += 1;
  }
  return pairs;
}

bool IsDeviceHeader(const std::vector<std::string_view>& c) {
  return c.size() >= 3 && StartsWith(c[0], "NPU") && c[0].find("Name") != std::string_view::npos &&
         StartsWith(c[1], "Health");
}

bool IsProcessHeader(const std::vector<std::string_view>& c) {
  return c.size() >= 2 && StartsWith(c[0], "NPU") && c[1].find("Process id") != std::string_view::npos;
}

// Reads the version line: "npu-smi 25.2.0      Version: 25.2.0".
void ReadVersions(std::string_view cell, NpuSmiSnapshot& snap) {
  const auto words = SplitWords(cell);
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "npu-smi" && snap.tool_version.empty()) snap.tool_version = std::string(words[i + 1]);
    if (words[i] == "Version:" && snap.driver_version.empty()) snap.driver_version = std::string(words[i + 1]);
  }
}

class TableReader {
 public:
  Result<NpuSmiSnapshot> Run(std::string_view text);

 private:
  enum class Section { kBefore, kDeviceHeader, kDevices, kProcesses };

  Status OnRow(const std::vector<std::string_view>& cells, size_t line_no);
  Status OnDeviceRow1(const std::vector<std::string_view>& cells, size_t line_no);
  Status OnDeviceRow2(const std::vector<std::string_view>& cells, size_t line_no);
  Status OnProcessRow(const std::vector<std::string_view>& cells, size_t line_no);

  NpuSmiSnapshot snap_;
  Section section_ = Section::kBefore;
  bool has_id_column_ = false;
  std::optional<NpuDevice> pending_;  // row 1 of a chip block, waiting for row 2
};

Status TableReader::OnDeviceRow1(const std::vector<std::string_view>& cells, size_t line_no) {
  const auto words = SplitWords(cells[0]);
  std::optional<int> npu = words.empty() ? std::nullopt : ParseInt<int>(words[0]);
  if (!npu)
    return Status::Corruption(
        fmt::format("npu-smi line {}: expected '<NPU id> <Name>' in the first column, got '{}'", line_no,
                    Quote(cells[0])));
  NpuDevice d;
  d.npu = *npu;
  if (words.size() > 1) {
    // The name is the rest of the cell after the id (words are views into the cell).
    d.name = std::string(Trim(cells[0].substr(static_cast<size_t>(words[1].data() - cells[0].data()))));
  }
  d.health = std::string(cells[1]);
  pending_ = std::move(d);
  return Status::Ok();
}

Status TableReader::OnDeviceRow2(const std::vector<std::string_view>& cells, size_t line_no) {
  NpuDevice d = std::move(*pending_);
  pending_.reset();
  const auto words = SplitWords(cells[0]);
  std::optional<int> chip = words.empty() ? std::nullopt : ParseInt<int>(words[0]);
  if (!chip)
    return Status::Corruption(
        fmt::format("npu-smi line {}: expected '<Chip> ...' in the first column, got '{}'", line_no,
                    Quote(cells[0])));
  d.chip = *chip;
  if (has_id_column_ && words.size() > 1) d.device_id = ParseInt<int>(words[1]);
  d.bus_id = std::string(cells[1]);
  const auto pairs = FindPairs(cells[2]);
  if (!pairs.empty()) {
    d.memory_used_mb = pairs[0].used;
    d.memory_total_mb = pairs[0].total;
  }
  if (snap_.has_hbm_column && pairs.size() > 1) {
    d.hbm_used_mb = pairs[1].used;
    d.hbm_total_mb = pairs[1].total;
  }
  const auto& used = snap_.has_hbm_column ? d.hbm_used_mb : d.memory_used_mb;
  const auto& total = snap_.has_hbm_column ? d.hbm_total_mb : d.memory_total_mb;
  if (!used || !total) {
    return Status::Corruption(fmt::format("npu-smi line {}: NPU {} chip {}: no {} 'used / total' pair in '{}'", line_no,
                                          d.npu, d.chip, snap_.has_hbm_column ? "HBM-Usage" : "Memory-Usage",
                                          Quote(cells[2])));
  }
  d.device_memory_used_mb = *used;
  d.device_memory_total_mb = *total;
  snap_.devices.push_back(std::move(d));
  return Status::Ok();
}

Status TableReader::OnProcessRow(const std::vector<std::string_view>& cells, size_t line_no) {
  if (cells.size() == 1) {
    // "No running processes found in NPU <id>" (or any other full-width note).
    return Status::Ok();
  }
  if (cells.size() < 4) {
    return Status::Corruption(
        fmt::format("npu-smi line {}: process row has {} columns, expected 4", line_no, cells.size()));
  }
  const auto ids = SplitWords(cells[0]);
  auto npu = ids.size() >= 1 ? ParseInt<int>(ids[0]) : std::nullopt;
  auto chip = ids.size() >= 2 ? ParseInt<int>(ids[1]) : std::nullopt;
  auto pid = ParseInt<int64_t>(cells[1]);
  auto mem = ParseInt<int64_t>(cells[3]);
  if (!npu || !chip || !pid || !mem) {
    return Status::Corruption(
        fmt::format("npu-smi line {}: cannot read process row 'NPU Chip | pid | name | memory'", line_no));
  }
  snap_.processes.push_back({*npu, *chip, *pid, std::string(cells[2]), *mem});
  return Status::Ok();
}

Status TableReader::OnRow(const std::vector<std::string_view>& cells, size_t line_no) {
  if (IsDeviceHeader(cells)) {
    if (section_ != Section::kBefore) return Status::Ok();  // a repeated header: keep the first table
    section_ = Section::kDeviceHeader;
    return Status::Ok();
  }
  if (IsProcessHeader(cells)) {
    section_ = Section::kProcesses;
    snap_.process_table_present = true;
    return Status::Ok();
  }
  switch (section_) {
    case Section::kBefore:
      if (cells.size() == 1) ReadVersions(cells[0], snap_);
      return Status::Ok();
    case Section::kDeviceHeader:
      // Second header row: "Chip [Device|Phy-ID] | Bus-Id | AICore(%) Memory-Usage(MB) [HBM-Usage(MB)]".
      if (!cells.empty() && StartsWith(cells[0], "Chip")) {
        has_id_column_ = SplitWords(cells[0]).size() > 1;
        snap_.has_hbm_column = cells.size() >= 3 && cells[2].find("HBM") != std::string_view::npos;
        section_ = Section::kDevices;
        return Status::Ok();
      }
      return Status::Corruption(fmt::format("npu-smi line {}: expected the 'Chip | Bus-Id | ...' header row", line_no));
    case Section::kDevices:
      if (cells.size() < 3) {
        return Status::Corruption(
            fmt::format("npu-smi line {}: device row has {} columns, expected 3", line_no, cells.size()));
      }
      return pending_ ? OnDeviceRow2(cells, line_no) : OnDeviceRow1(cells, line_no);
    case Section::kProcesses:
      return OnProcessRow(cells, line_no);
  }
  return Status::Ok();
}

Result<NpuSmiSnapshot> TableReader::Run(std::string_view text) {
  const auto lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto line = Trim(lines[i]);
    const size_t line_no = i + 1;
    const bool table_line = !line.empty() && (line.front() == '|' || line.front() == '+');
    if (!table_line) {
      if (section_ == Section::kDevices || section_ == Section::kProcesses) break;  // the table ended
      continue;
    }
    if (line.front() == '+') {
      // Separator: between chips, NPUs, or sections. A row 1 without its row 2 is broken.
      if (pending_) {
        return Status::Corruption(
            fmt::format("npu-smi line {}: NPU {} block has only one row", line_no, pending_->npu));
      }
      continue;
    }
    if (Status s = OnRow(SplitCells(line), line_no); !s.ok()) return s;
  }
  if (section_ == Section::kBefore) {
    return Status::Invalid("not npu-smi info output: no 'NPU  Name | Health | ...' table header found");
  }
  if (pending_) {
    return Status::Corruption(fmt::format("npu-smi output cut off: NPU {} block has only one row", pending_->npu));
  }
  if (snap_.devices.empty()) {
    return Status::Corruption("npu-smi info output lists no device (no chip rows after the table header)");
  }
  return std::move(snap_);
}

nlohmann::json OptionalJson(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

Result<NpuSmiSnapshot> ParseNpuSmi(std::string_view text) { return TableReader().Run(text); }

nlohmann::json NpuSmiToJson(const NpuSmiSnapshot& snapshot) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : snapshot.devices) {
    devices.push_back({{"npu", d.npu},
                       {"chip", d.chip},
                       {"name", ToValidUtf8(d.name)},
                       {"health", ToValidUtf8(d.health)},
                       {"hbm_used_mb", OptionalJson(d.hbm_used_mb)},
                       {"hbm_total_mb", OptionalJson(d.hbm_total_mb)},
                       {"memory_used_mb", OptionalJson(d.memory_used_mb)},
                       {"memory_total_mb", OptionalJson(d.memory_total_mb)},
                       {"device_memory_used_mb", d.device_memory_used_mb},
                       {"device_memory_total_mb", d.device_memory_total_mb}});
  }
  nlohmann::json processes = nlohmann::json::array();
  for (const auto& p : snapshot.processes) {
    processes.push_back(
        {{"npu", p.npu}, {"chip", p.chip}, {"pid", p.pid}, {"name", ToValidUtf8(p.name)}, {"memory_mb", p.memory_mb}});
  }
  return {{"devices", std::move(devices)},
          {"processes", std::move(processes)},
          {"process_table_present", snapshot.process_table_present}};
}

std::vector<DeviceAvailability> ClassifyDevices(const NpuSmiSnapshot& snapshot, int64_t busy_threshold_mb) {
  std::vector<DeviceAvailability> out;
  out.reserve(snapshot.devices.size());
  for (size_t i = 0; i < snapshot.devices.size(); ++i) {
    const auto& d = snapshot.devices[i];
    DeviceAvailability a;
    a.npu = d.npu;
    a.chip = d.chip;
    a.logical_id = static_cast<int>(i);
    a.used_mb = d.device_memory_used_mb;
    a.total_mb = d.device_memory_total_mb;
    for (const auto& p : snapshot.processes) {
      if (p.npu == d.npu && p.chip == d.chip) a.pids.push_back(p.pid);
    }
    if (!a.pids.empty()) {
      a.busy = true;
      std::string pids;
      for (auto pid : a.pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
      a.reason = fmt::format("process listed on NPU {} chip {} (pid {})", d.npu, d.chip, pids);
    } else if (a.used_mb >= busy_threshold_mb) {
      a.busy = true;
      a.reason = fmt::format("HBM in use with no visible process (another container?): {} MB used >= {} MB", a.used_mb,
                             busy_threshold_mb);
    }
    out.push_back(std::move(a));
  }
  return out;
}

nlohmann::json HbmSnapshotJson(const NpuSmiSnapshot& snapshot) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < snapshot.devices.size(); ++i) {
    const auto& d = snapshot.devices[i];
    out[std::to_string(i)] = {
        {"used_mb", d.device_memory_used_mb}, {"total_mb", d.device_memory_total_mb}, {"npu", d.npu}, {"chip", d.chip}};
  }
  return out;
}

}  // namespace npuprof::parsers
