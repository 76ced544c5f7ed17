// An incremental RFC 4180 record reader for CSV text that arrives in pieces
// (a file read over SSH in chunks) or all at once. Pure: no I/O.
//
// Rules: fields are split on ',' and records on '\n'; a '\r' before '\n' is
// dropped; "..." quoting with "" as an escaped quote is honoured, and a
// quoted field may span lines; every cell is trimmed of spaces and TABs
// (msprof writes a trailing TAB after timestamps); records with no content
// (blank lines) are skipped; a UTF-8 BOM at the very start is dropped. Cell
// bytes are passed on as they are (no UTF-8 assumption).
//
// Limits: a cell longer than `max_cell_bytes` is cut to that length (the
// reader counts it in cut_cells()), so one hostile record cannot grow memory
// without bound; a record with more than `max_cells` cells keeps the first
// max_cells.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npuprof {

// The index of the header cell equal to `name` ignoring ASCII case (msprof
// and torch_npu spell some column names differently across versions).
std::optional<size_t> CsvColumn(const std::vector<std::string>& header, std::string_view name);

class CsvRecordReader {
 public:
  // Called per record with its cells and its 0-based index (0 = header);
  // returning false stops the reader (later Feed calls do nothing).
  using OnRecord = std::function<bool(const std::vector<std::string>& cells, size_t index)>;

  explicit CsvRecordReader(OnRecord on_record, size_t max_cell_bytes = 64 * 1024, size_t max_cells = 4096);

  void Feed(std::string_view chunk);
  // Ends the text: a last record without its '\n' is delivered.
  void Finish();

  bool stopped() const { return stopped_; }
  size_t records() const { return index_; }
  size_t cut_cells() const { return cut_cells_; }

 private:
  void EndCell();
  void EndRecord();

  OnRecord on_record_;
  size_t max_cell_bytes_;
  size_t max_cells_;
  std::vector<std::string> cells_;
  std::string cell_;
  bool in_quotes_ = false;
  bool quote_pending_ = false;  // a '"' inside quotes ended a chunk: escape or close?
  bool record_has_content_ = false;
  bool stopped_ = false;
  bool at_start_ = true;
  std::string bom_;  // the first bytes, held until they can be told from a BOM
  size_t index_ = 0;
  size_t cut_cells_ = 0;
  bool cell_cut_ = false;
};

// The whole of `text` through a CsvRecordReader.
void ForEachCsvRecord(std::string_view text, const CsvRecordReader::OnRecord& on_record);

}  // namespace npuprof
