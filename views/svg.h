// Svg: a small builder of inline SVG documents for the HTML views. Pure.
//
// Contract:
//  * The output is one <svg> element for inline use in HTML (the HTML
//    parser gives it the SVG namespace, so no xmlns is written) with a
//    viewBox of the given size and width="100%" (it scales with its
//    container), and nothing that refers outside the document: no href, no
//    <image>, no <use>, no <script>, no external fonts. Styles are
//    presentation attributes.
//  * Every text and attribute value is XML-escaped (& < > " ') after being
//    made valid UTF-8 (bytes from a target are bytes); control characters
//    other than TAB/LF/CR, which XML 1.0 forbids, are dropped.
//  * Numbers are written by SvgNum: fixed point, at most two decimals,
//    trailing zeros trimmed, never "-0", non-finite values written as 0 —
//    the same input always gives the same bytes.
//  * A title given to an element becomes its <title> child (the hover text
//    of browsers). Groups opened with BeginGroup are closed by EndGroup, or
//    by Finish for any still open.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npuprof::views {

// Deterministic number text: "12", "12.5", "0.25", "-3" (see above).
std::string SvgNum(double v);
// XML text/attribute escaping of valid-UTF-8 text (see above).
std::string XmlEscape(std::string_view s);

struct SvgPoint {
  double x = 0;
  double y = 0;
};

// Presentation of shapes; empty strings and negative numbers are left out.
struct SvgStyle {
  std::string fill;            // "none", "#4e79a7", ...
  std::string stroke;
  double stroke_width = -1;
  double opacity = -1;         // fill-opacity for shapes, opacity for lines
  std::string dash;            // stroke-dasharray, e.g. "4 3"
  std::string css_class;
};

struct SvgTextStyle {
  double size = 12;
  std::string anchor;          // "start" (default), "middle", "end"
  std::string fill = "#222";
  bool bold = false;
  std::string baseline;        // dominant-baseline, e.g. "middle"
  double rotate = 0;           // degrees around (x, y)
  std::string css_class;
};

class Svg {
 public:
  Svg(double width, double height, std::string_view aria_label = {});

  Svg& Rect(double x, double y, double w, double h, const SvgStyle& style, std::string_view title = {});
  Svg& Line(double x1, double y1, double x2, double y2, const SvgStyle& style, std::string_view title = {});
  Svg& Polyline(const std::vector<SvgPoint>& points, const SvgStyle& style, std::string_view title = {});
  // A path from absolute move/line commands through `points` (one subpath).
  Svg& Path(const std::vector<SvgPoint>& points, bool closed, const SvgStyle& style, std::string_view title = {});
  Svg& Circle(double cx, double cy, double r, const SvgStyle& style, std::string_view title = {});
  Svg& Text(double x, double y, std::string_view text, const SvgTextStyle& style = {});

  Svg& BeginGroup(std::string_view css_class = {}, std::string_view title = {});
  Svg& EndGroup();

  // The document; closes open groups. The builder can go on afterwards.
  std::string Finish() const;

 private:
  void Shape(std::string_view tag, const std::string& geometry, const SvgStyle& style, std::string_view title);

  std::string body_;
  double width_;
  double height_;
  std::string aria_label_;
  int open_groups_ = 0;
};

}  // namespace npuprof::views
