// The page chrome shared by the HTML views, and safe readers of the JSON
// documents they render. Pure.
//
// A page is one self-contained HTML5 document: inline CSS, inline SVG, no
// script, no external reference of any kind, and a Content-Security-Policy
// meta tag (default-src 'none'; style-src 'unsafe-inline'; img-src data:) so
// that the browser refuses to fetch anything even if a value slipped through.
// It works from a file:// URL. The layout is readable on a laptop screen:
// a max-width column, wide tables scroll inside their own box.
//
// Every text that reaches the page passes through HtmlEscape (valid UTF-8,
// XML-escaped). The JSON readers never throw: a missing field or one of
// another type reads as absent.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_field.h"

namespace npuprof::views {

using json = nlohmann::json;

// ---- safe JSON readers ------------------------------------------------------

// Field, StrField, NumField, ArrField: common/json_field.h.
using npuprof::ArrField;
using npuprof::Field;
using npuprof::NumField;
using npuprof::StrField;
// A value as text for a table cell: strings as they are, numbers and
// booleans as JSON, null as "-", objects and arrays as compact JSON.
std::string CellText(const json& v);

// ---- HTML ---------------------------------------------------------------------

std::string HtmlEscape(std::string_view s);

// The language of a page's labels: "zh" (default) or "en".
bool IsZh(std::string_view lang);

// A label of a page in both languages, and the pick of one.
struct Label {
  const char* zh;
  const char* en;
};
class Words {
 public:
  explicit Words(bool zh) : zh_(zh) {}
  bool zh() const { return zh_; }
  const char* operator()(const Label& l) const { return zh_ ? l.zh : l.en; }

 private:
  bool zh_;
};

// The whole document: <!DOCTYPE html>, <html lang>, head (charset, viewport,
// CSP, title, the shared style sheet) and `body_html` inside <main>.
std::string HtmlDocument(std::string_view title, std::string_view lang, std::string_view body_html);

// A table inside a scrolling box. Cells are HTML (escape text with
// HtmlEscape); `numeric` columns are right-aligned.
class HtmlTable {
 public:
  explicit HtmlTable(std::vector<std::string> header, std::vector<bool> numeric = {}, std::string css_class = {});
  HtmlTable& Row(const std::vector<std::string>& cells_html, std::string_view row_class = {});
  std::string Finish() const;
  size_t rows() const { return rows_; }

 private:
  std::vector<std::string> header_;
  std::vector<bool> numeric_;
  std::string css_class_;
  std::string body_;
  size_t rows_ = 0;
};

// A status word as a coloured badge: "ok" green, "running"/"partial"
// amber, anything else red.
std::string StatusBadge(std::string_view status);
// Any text as a green (good) or red badge.
std::string Badge(std::string_view text, bool good);
// <h2 id=...>text</h2>
std::string Heading(int level, std::string_view text, std::string_view id = {});
// Definition list of (label, value-HTML) pairs, shown as a compact grid.
std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& pairs_html);

}  // namespace npuprof::views
