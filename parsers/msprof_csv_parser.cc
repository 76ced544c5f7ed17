#include "parsers/msprof_csv_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "common/utf8.h"
#include "parsers/csv_records.h"
#include "parsers/finite_number.h"

namespace npuprof {
namespace {

std::vector<std::string> HeaderOf(std::string_view text) {
  std::vector<std::string> header;
  bool done = false;
  // Only the first line is needed; cut the text there unless a quote is open.
  size_t nl = text.find('\n');
  std::string_view first = nl == std::string_view::npos ? text : text.substr(0, nl + 1);
  if (std::count(first.begin(), first.end(), '"') % 2 != 0) first = text;
  ForEachCsvRecord(first, [&](const std::vector<std::string>& cells, size_t) {
    if (!done) header = cells;
    done = true;
    return false;
  });
  return header;
}

// The refusal of a cell that spells a number out of range ("inf", "nan",
// "1e999"): such a value would reach reports as a number that is none.
Status NotFinite(std::string_view what, size_t data_row, const std::vector<std::string>& header, size_t col,
                 std::string_view cell) {
  return Status::Corruption(fmt::format("{}: data row {}, column \"{}\": '{}' is not a finite number within "
                                        "+/-2^63; the file is corrupt or not an msprof export",
                                        what, data_row, TruncateUtf8(header[col], 60), TruncateUtf8(cell, 40)));
}

std::optional<int> ParseDeviceNumber(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// Device from the Device_id cell, else from a "NPU:<n>" Device cell.
std::optional<int> DeviceOf(const std::vector<std::string>& cells, std::optional<size_t> device_id_col,
                            std::optional<size_t> device_col) {
  if (device_id_col && *device_id_col < cells.size()) return ParseDeviceNumber(cells[*device_id_col]);
  if (device_col && *device_col < cells.size()) {
    std::string_view d = cells[*device_col];
    if (d.starts_with("NPU:")) return ParseDeviceNumber(d.substr(4));
  }
  return std::nullopt;
}

// (name, device) -> index of its entry, so a row finds its entry without a
// walk over every entry so far.
using EntryIndex = std::map<std::pair<std::string, std::optional<int>>, size_t>;

// The entry of (name, device) in `entries`; a new one (with its name and
// device set) is added at the end, in order of first appearance.
template <typename Entry>
Entry& EntryOf(std::vector<Entry>& entries, EntryIndex& index, std::string Entry::*name_field,
               const std::string& name, std::optional<int> device) {
  auto [slot, fresh] = index.try_emplace({name, device}, entries.size());
  if (fresh) {
    Entry e;
    e.*name_field = name;
    e.device_id = device;
    entries.push_back(std::move(e));
  }
  return entries[slot->second];
}

Status MissingColumns(std::string_view what, const std::vector<std::string>& missing,
                      const std::vector<std::string>& header) {
  return Status::Invalid(fmt::format("{}: missing column{} {} (header: {})", what,
                                     missing.size() > 1 ? "s" : "",
                                     fmt::format("\"{}\"", fmt::join(missing, "\", \"")),
                                     TruncateUtf8(fmt::format("{}", fmt::join(header, ",")), 400)));
}

// ---- trace_view SAX counter ---------------------------------------------------

class TraceEventCounter : public nlohmann::json_sax<nlohmann::json> {
 public:
  TraceViewCheck result;
  bool saw_trace_events = false;
  std::string error;

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool string(string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    if (InEventArray()) ++result.event_count;
    Push(false);
    return true;
  }
  bool key(string_t& k) override {
    last_key_at_top_ = depth_ == 1 && top_is_object_ ? k : std::string();
    return true;
  }
  bool end_object() override { return Pop(); }
  bool start_array(std::size_t) override {
    if (depth_ == 0) result.bare_array = true;
    bool events = (depth_ == 0) || (depth_ == 1 && top_is_object_ && last_key_at_top_ == "traceEvents");
    if (events) saw_trace_events = true;
    if (InEventArray()) {
      ++result.event_count;
      ++result.non_object_events;
    }
    Push(events);
    return true;
  }
  bool end_array() override { return Pop(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error = fmt::format("trace_view.json is not valid JSON (byte {}): {}", position, TruncateUtf8(ex.what(), 300));
    return false;
  }

 private:
  bool Scalar() {
    if (InEventArray()) {
      ++result.event_count;
      ++result.non_object_events;
    }
    return true;
  }
  bool InEventArray() const { return !stack_.empty() && stack_.back(); }
  void Push(bool is_event_array) {
    stack_.push_back(is_event_array);
    ++depth_;
  }
  bool Pop() {
    stack_.pop_back();
    --depth_;
    return true;
  }
  std::vector<bool> stack_;  // per open container: is it the event array?
  size_t depth_ = 0;
  bool top_is_object_ = false;
  std::string last_key_at_top_;
};

}  // namespace

const char* MsprofCsvKindName(MsprofCsvKind kind) {
  switch (kind) {
    case MsprofCsvKind::kNpuModuleMem: return "npu_module_mem";
    case MsprofCsvKind::kNpuMem: return "npu_mem";
    case MsprofCsvKind::kMemoryRecord: return "memory_record";
    case MsprofCsvKind::kKernelDetails: return "kernel_details";
    case MsprofCsvKind::kUnknown: return "unknown";
  }
  return "unknown";
}

MsprofCsvKind DetectMsprofCsvKind(std::string_view csv_text) {
  std::vector<std::string> h = HeaderOf(csv_text);
  auto has = [&](std::string_view name) { return CsvColumn(h, name).has_value(); };
  bool reserved = has("Total Reserved(KB)") || has("Total Reserved(MB)");
  if (has("Component") && reserved) {
    return has("Total Allocated(MB)") ? MsprofCsvKind::kMemoryRecord : MsprofCsvKind::kNpuModuleMem;
  }
  if (has("event") && has("hbm(KB)")) return MsprofCsvKind::kNpuMem;
  if (has("Name") && has("Type") && has("Accelerator Core") && has("Start Time(us)") &&
      has("Duration(us)")) {
    return MsprofCsvKind::kKernelDetails;
  }
  return MsprofCsvKind::kUnknown;
}

// ---- npu_module_mem ------------------------------------------------------------

const ModuleMemComponent* ModuleMemTable::Find(std::string_view component,
                                               std::optional<int> device_id) const {
  for (const ModuleMemComponent& c : components) {
    if (c.component == component && (!device_id || c.device_id == device_id)) return &c;
  }
  return nullptr;
}

Result<ModuleMemTable> ParseNpuModuleMemCsv(std::string_view csv_text) {
  std::vector<std::string> header = HeaderOf(csv_text);
  if (header.empty()) return Status::Invalid("npu_module_mem CSV is empty: no header line");
  auto component_col = CsvColumn(header, "Component");
  auto kb_col = CsvColumn(header, "Total Reserved(KB)");
  auto mb_col = CsvColumn(header, "Total Reserved(MB)");
  std::vector<std::string> missing;
  if (!component_col) missing.push_back("Component");
  if (!kb_col && !mb_col) missing.push_back("Total Reserved(KB) or Total Reserved(MB)");
  if (!missing.empty()) return MissingColumns("npu_module_mem CSV", missing, header);

  ModuleMemTable table;
  table.unit_is_kb = kb_col.has_value();
  const size_t value_col = kb_col ? *kb_col : *mb_col;
  auto device_id_col = CsvColumn(header, "Device_id");
  auto device_col = CsvColumn(header, "Device");
  auto ts_col = CsvColumn(header, "Timestamp(us)");
  table.has_device_id_column = device_id_col.has_value();
  const size_t needed = std::max(*component_col, value_col) + 1;

  Status error;
  EntryIndex index_of;
  ForEachCsvRecord(csv_text, [&](const std::vector<std::string>& cells, size_t index) {
    if (index == 0) return true;
    ++table.data_rows;
    const ParsedNumber value = cells.size() >= needed ? ParseFiniteNumber(cells[value_col]) : ParsedNumber{};
    if (value.kind == ParsedNumber::kOutOfRange) {
      error = NotFinite("npu_module_mem CSV", index, header, value_col, cells[value_col]);
      return false;
    }
    if (value.kind == ParsedNumber::kNotANumber) {
      ++table.skipped_rows;
      return true;
    }
    ModuleMemComponent& it = EntryOf(table.components, index_of, &ModuleMemComponent::component,
                                     cells[*component_col], DeviceOf(cells, device_id_col, device_col));
    ++it.rows;
    if (value.value < 0) {
      ++it.negative_rows;
      return true;
    }
    double mb = table.unit_is_kb ? value.value / 1024.0 : value.value;
    if (!it.has_value || mb > it.max_reserved_mb) {
      it.has_value = true;
      it.max_reserved_mb = mb;
      it.max_raw_value = cells[value_col];
      it.max_data_row = index;
      it.max_timestamp_raw = ts_col && *ts_col < cells.size() ? cells[*ts_col] : "";
    }
    return true;
  });
  if (!error.ok()) return error;
  return table;
}

// ---- npu_mem ---------------------------------------------------------------------

const NpuMemSeries* NpuMemTable::Find(std::string_view event, std::optional<int> device_id) const {
  for (const NpuMemSeries& s : series) {
    if (s.event == event && (!device_id || s.device_id == device_id)) return &s;
  }
  return nullptr;
}

Result<NpuMemTable> ParseNpuMemCsv(std::string_view csv_text) {
  std::vector<std::string> header = HeaderOf(csv_text);
  if (header.empty()) return Status::Invalid("npu_mem CSV is empty: no header line");
  auto event_col = CsvColumn(header, "event");
  auto hbm_col = CsvColumn(header, "hbm(KB)");
  auto ts_col = CsvColumn(header, "timestamp(us)");
  std::vector<std::string> missing;
  if (!event_col) missing.push_back("event");
  if (!hbm_col) missing.push_back("hbm(KB)");
  if (!ts_col) missing.push_back("timestamp(us)");
  if (!missing.empty()) return MissingColumns("npu_mem CSV", missing, header);

  NpuMemTable table;
  auto device_id_col = CsvColumn(header, "Device_id");
  auto ddr_col = CsvColumn(header, "ddr(KB)");
  auto memory_col = CsvColumn(header, "memory(KB)");
  table.has_device_id_column = device_id_col.has_value();
  const size_t needed = std::max({*event_col, *hbm_col, *ts_col}) + 1;
  auto cell_number = [](const std::vector<std::string>& cells, std::optional<size_t> col) {
    return col && *col < cells.size() ? ParseFiniteNumber(cells[*col]) : ParsedNumber{};
  };
  auto optional_mb = [](const ParsedNumber& v) {
    return v.kind == ParsedNumber::kNumber ? std::optional<double>(v.value / 1024.0) : std::nullopt;
  };

  Status error;
  EntryIndex index_of;
  ForEachCsvRecord(csv_text, [&](const std::vector<std::string>& cells, size_t index) {
    if (index == 0) return true;
    ++table.data_rows;
    const bool complete = cells.size() >= needed;
    const ParsedNumber hbm = complete ? cell_number(cells, hbm_col) : ParsedNumber{};
    const ParsedNumber ts = complete ? cell_number(cells, ts_col) : ParsedNumber{};
    const ParsedNumber ddr = cell_number(cells, ddr_col);
    const ParsedNumber memory = cell_number(cells, memory_col);
    const std::pair<const ParsedNumber*, std::optional<size_t>> read[] = {
        {&hbm, hbm_col}, {&ts, ts_col}, {&ddr, ddr_col}, {&memory, memory_col}};
    for (const auto& [number, col] : read) {
      if (number->kind == ParsedNumber::kOutOfRange) {
        error = NotFinite("npu_mem CSV", index, header, *col, cells[*col]);
        return false;
      }
    }
    if (hbm.kind != ParsedNumber::kNumber || ts.kind != ParsedNumber::kNumber) {
      ++table.skipped_rows;
      return true;
    }
    NpuMemSeries& it = EntryOf(table.series, index_of, &NpuMemSeries::event, cells[*event_col],
                               DeviceOf(cells, device_id_col, std::nullopt));
    NpuMemSample sample{ts.value, cells[*ts_col], hbm.value / 1024.0, optional_mb(ddr), optional_mb(memory), index};
    bool first = it.samples.empty();
    if (first || sample.hbm_mb > it.max_hbm_mb) {
      it.max_hbm_mb = sample.hbm_mb;
      it.max_data_row = index;
      it.max_raw_hbm_kb = cells[*hbm_col];
      it.max_timestamp_raw = sample.timestamp_raw;
    }
    if (first || sample.timestamp_us >= it.last_timestamp_us) {
      it.last_hbm_mb = sample.hbm_mb;
      it.last_data_row = index;
      it.last_timestamp_us = sample.timestamp_us;
      it.last_timestamp_raw = sample.timestamp_raw;
    }
    it.samples.push_back(std::move(sample));
    return true;
  });
  if (!error.ok()) return error;
  return table;
}

// ---- analyse() outputs --------------------------------------------------------------

Result<KernelDetailsCheck> CheckKernelDetailsCsv(std::string_view csv_text) {
  std::vector<std::string> header = HeaderOf(csv_text);
  if (header.empty()) return Status::Invalid("kernel_details.csv is empty: no header line");
  std::vector<std::string> missing;
  for (std::string_view name : {"Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"}) {
    if (!CsvColumn(header, name)) missing.emplace_back(name);
  }
  if (!missing.empty()) return MissingColumns("kernel_details.csv", missing, header);

  KernelDetailsCheck check;
  check.columns = header.size();
  check.has_step_id = CsvColumn(header, "Step Id").has_value();
  check.has_device_id = CsvColumn(header, "Device_id").has_value();
  if (CsvColumn(header, "Block Num")) {
    check.block_column = "Block Num";
  } else if (CsvColumn(header, "Block Dim")) {
    check.block_column = "Block Dim";
  }
  ForEachCsvRecord(csv_text, [&](const std::vector<std::string>& cells, size_t index) {
    if (index == 0) return true;
    ++check.data_rows;
    if (cells.size() != check.columns) ++check.ragged_rows;
    return true;
  });
  return check;
}

Result<TraceViewCheck> CheckTraceViewJson(std::string_view json_text) {
  TraceEventCounter counter;
  bool ok = nlohmann::json::sax_parse(json_text.begin(), json_text.end(), &counter);
  if (!ok) {
    return Status::Corruption(counter.error.empty() ? "trace_view.json is not valid JSON" : counter.error);
  }
  if (!counter.saw_trace_events) {
    return Status::Corruption(
        "trace_view.json is neither a JSON array of events nor an object with a \"traceEvents\" array");
  }
  return counter.result;
}

}  // namespace npuprof
