#include "views/html_page.h"

#include <algorithm>

#include <fmt/format.h>

#include "views/svg.h"

namespace npuprof::views {

// ---- safe JSON readers ------------------------------------------------------

std::string CellText(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---- HTML ---------------------------------------------------------------------

std::string HtmlEscape(std::string_view s) { return XmlEscape(s); }

bool IsZh(std::string_view lang) { return lang != "en"; }

namespace {

constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f7f9; color: #1f2328;
  font: 14px/1.45 -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", "PingFang SC",
        "Microsoft YaHei", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 18px 0 6px; }
section.card { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 12px 16px; margin: 12px 0; }
.sub { color: #57606a; }
.scroll { overflow-x: auto; max-width: 100%; margin: 6px 0 10px; }
table { border-collapse: collapse; font-size: 13px; min-width: 60%; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; white-space: nowrap; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.residual td { background: #fafafa; font-style: italic; }
.ev { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; color: #444;
  overflow-wrap: anywhere; }
.ev div { margin: 1px 0; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; }
.badge.ok { background: #1a7f37; } .badge.warn { background: #9a6700; } .badge.bad { background: #cf222e; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: #57606a; } dl.kv dd { margin: 0; word-break: break-word; }
.chart { margin: 8px 0; } .chart svg { max-width: 100%; height: auto; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
.note { color: #57606a; font-size: 13px; }
ul { margin: 4px 0; padding-left: 22px; }
)css";

}  // namespace

std::string HtmlDocument(std::string_view title, std::string_view lang, std::string_view body_html) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"{}\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "img-src data:\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"npuprof\">\n<title>{}</title>\n<style>{}</style>\n</head>\n"
      "<body>\n<main>\n{}\n</main>\n</body>\n</html>\n",
      IsZh(lang) ? "zh-CN" : "en", HtmlEscape(title), kStyle, body_html);
}

HtmlTable::HtmlTable(std::vector<std::string> header, std::vector<bool> numeric, std::string css_class)
    : header_(std::move(header)), numeric_(std::move(numeric)), css_class_(std::move(css_class)) {
  numeric_.resize(header_.size(), false);
}

HtmlTable& HtmlTable::Row(const std::vector<std::string>& cells_html, std::string_view row_class) {
  body_ += row_class.empty() ? "<tr>" : fmt::format("<tr class=\"{}\">", HtmlEscape(row_class));
  for (size_t i = 0; i < cells_html.size(); ++i)
    body_ += fmt::format("<td{}>{}</td>", i < numeric_.size() && numeric_[i] ? " class=\"num\"" : "", cells_html[i]);
  body_ += "</tr>\n";
  ++rows_;
  return *this;
}

std::string HtmlTable::Finish() const {
  std::string head;
  for (size_t i = 0; i < header_.size(); ++i)
    head += fmt::format("<th{}>{}</th>", numeric_[i] ? " class=\"num\"" : "", HtmlEscape(header_[i]));
  return fmt::format("<div class=\"scroll\"><table{}>\n<thead><tr>{}</tr></thead>\n<tbody>\n{}</tbody></table></div>\n",
                     css_class_.empty() ? "" : fmt::format(" class=\"{}\"", HtmlEscape(css_class_)), head, body_);
}

std::string StatusBadge(std::string_view status) {
  const char* cls = status == "ok" ? "ok" : (status == "running" || status == "partial") ? "warn" : "bad";
  return fmt::format("<span class=\"badge {}\">{}</span>", cls, HtmlEscape(status.empty() ? "-" : status));
}

std::string Badge(std::string_view text, bool good) {
  return fmt::format("<span class=\"badge {}\">{}</span>", good ? "ok" : "bad", HtmlEscape(text));
}

std::string Heading(int level, std::string_view text, std::string_view id) {
  level = std::clamp(level, 1, 4);
  return fmt::format("<h{0}{1}>{2}</h{0}>\n", level, id.empty() ? "" : fmt::format(" id=\"{}\"", HtmlEscape(id)),
                     HtmlEscape(text));
}

std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& pairs_html) {
  std::string out = "<dl class=\"kv\">";
  for (const auto& [k, v] : pairs_html) out += fmt::format("<dt>{}</dt><dd>{}</dd>", HtmlEscape(k), v);
  return out + "</dl>\n";
}

}  // namespace npuprof::views
