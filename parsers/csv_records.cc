#include "parsers/csv_records.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "common/text.h"

namespace npuprof {

std::optional<size_t> CsvColumn(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string& h = header[i];
    if (h.size() == name.size() && std::equal(h.begin(), h.end(), name.begin(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
        }))
      return i;
  }
  return std::nullopt;
}

namespace {
constexpr std::string_view kBom = "\xEF\xBB\xBF";
}  // namespace

CsvRecordReader::CsvRecordReader(OnRecord on_record, size_t max_cell_bytes, size_t max_cells)
    : on_record_(std::move(on_record)), max_cell_bytes_(max_cell_bytes), max_cells_(max_cells) {}

void CsvRecordReader::EndCell() {
  if (cells_.size() < max_cells_) cells_.emplace_back(Trim(cell_));
  if (cell_cut_) ++cut_cells_;
  cell_.clear();
  cell_cut_ = false;
}

void CsvRecordReader::EndRecord() {
  EndCell();
  if (record_has_content_) stopped_ = !on_record_(cells_, index_++);
  cells_.clear();
  record_has_content_ = false;
}

void CsvRecordReader::Feed(std::string_view chunk) {
  if (stopped_) return;
  if (at_start_) {
    // Hold the first bytes until they are known to be (or not be) a BOM.
    while (!chunk.empty() && bom_.size() < kBom.size() && kBom.starts_with(bom_ + chunk[0])) {
      bom_.push_back(chunk[0]);
      chunk.remove_prefix(1);
    }
    if (bom_.size() < kBom.size() && chunk.empty()) return;  // still undecided
    at_start_ = false;
    std::string held = bom_ == kBom ? std::string() : std::exchange(bom_, std::string());
    bom_.clear();
    if (!held.empty()) Feed(held);
    if (stopped_) return;
  }
  auto push = [this](char c) {
    if (cell_.size() < max_cell_bytes_) cell_.push_back(c);
    else cell_cut_ = true;
  };
  for (size_t i = 0; i < chunk.size() && !stopped_; ++i) {
    const char c = chunk[i];
    if (quote_pending_) {
      quote_pending_ = false;
      if (c == '"') {  // "" inside quotes: one literal quote
        push('"');
        continue;
      }
      in_quotes_ = false;  // the pending quote closed the field; c is read unquoted below
    }
    if (in_quotes_) {
      if (c != '"') {
        push(c);
      } else if (i + 1 < chunk.size()) {
        if (chunk[i + 1] == '"') {
          push('"');
          ++i;
        } else {
          in_quotes_ = false;
        }
      } else {
        quote_pending_ = true;  // decided by the next chunk's first byte
      }
      continue;
    }
    if (c == '"') {
      in_quotes_ = true;
      record_has_content_ = true;
    } else if (c == ',') {
      EndCell();
      record_has_content_ = true;
    } else if (c == '\n') {
      EndRecord();
    } else {
      if (c != '\r' && c != ' ' && c != '\t') record_has_content_ = true;
      push(c);
    }
  }
}

void CsvRecordReader::Finish() {
  if (at_start_) {
    at_start_ = false;
    std::string held = bom_ == kBom ? std::string() : bom_;
    bom_.clear();
    if (!held.empty()) Feed(held);
  }
  if (stopped_) return;
  if (quote_pending_) {
    quote_pending_ = false;
    in_quotes_ = false;
  }
  if (record_has_content_ || !cell_.empty() || !cells_.empty()) EndRecord();
  stopped_ = true;
}

void ForEachCsvRecord(std::string_view text, const CsvRecordReader::OnRecord& on_record) {
  CsvRecordReader reader(on_record, text.size() + 1, static_cast<size_t>(-1));
  reader.Feed(text);
  reader.Finish();
}

}  // namespace npuprof
