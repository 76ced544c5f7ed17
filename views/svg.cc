#include "views/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof::views {

std::string SvgNum(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.2f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0" || s.empty()) return "0";
  return s;
}

std::string XmlEscape(std::string_view raw) {
  const std::string s = ToValidUtf8(raw);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += c;
    }
  }
  return out;
}

namespace {

std::string StyleAttrs(const SvgStyle& s, bool is_line) {
  std::string a;
  if (!s.fill.empty()) a += fmt::format(" fill=\"{}\"", XmlEscape(s.fill));
  if (!s.stroke.empty()) a += fmt::format(" stroke=\"{}\"", XmlEscape(s.stroke));
  if (s.stroke_width >= 0) a += fmt::format(" stroke-width=\"{}\"", SvgNum(s.stroke_width));
  if (s.opacity >= 0) a += fmt::format(" {}=\"{}\"", is_line ? "opacity" : "fill-opacity", SvgNum(s.opacity));
  if (!s.dash.empty()) a += fmt::format(" stroke-dasharray=\"{}\"", XmlEscape(s.dash));
  if (!s.css_class.empty()) a += fmt::format(" class=\"{}\"", XmlEscape(s.css_class));
  return a;
}

std::string Points(const std::vector<SvgPoint>& points) {
  std::string out;
  for (const auto& p : points) {
    if (!out.empty()) out += ' ';
    out += SvgNum(p.x) + "," + SvgNum(p.y);
  }
  return out;
}

}  // namespace

Svg::Svg(double width, double height, std::string_view aria_label)
    : width_(width), height_(height), aria_label_(aria_label) {}

void Svg::Shape(std::string_view tag, const std::string& geometry, const SvgStyle& style, std::string_view title) {
  body_ += fmt::format("<{}{}{}", tag, geometry, StyleAttrs(style, tag == "line" || tag == "polyline"));
  if (title.empty()) {
    body_ += "/>";
  } else {
    body_ += fmt::format("><title>{}</title></{}>", XmlEscape(title), tag);
  }
}

Svg& Svg::Rect(double x, double y, double w, double h, const SvgStyle& style, std::string_view title) {
  Shape("rect",
        fmt::format(" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"", SvgNum(x), SvgNum(y), SvgNum(std::max(0.0, w)),
                    SvgNum(std::max(0.0, h))),
        style, title);
  return *this;
}

Svg& Svg::Line(double x1, double y1, double x2, double y2, const SvgStyle& style, std::string_view title) {
  Shape("line",
        fmt::format(" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"", SvgNum(x1), SvgNum(y1), SvgNum(x2), SvgNum(y2)), style,
        title);
  return *this;
}

Svg& Svg::Polyline(const std::vector<SvgPoint>& points, const SvgStyle& style, std::string_view title) {
  SvgStyle s = style;
  if (s.fill.empty()) s.fill = "none";
  Shape("polyline", fmt::format(" points=\"{}\"", Points(points)), s, title);
  return *this;
}

Svg& Svg::Path(const std::vector<SvgPoint>& points, bool closed, const SvgStyle& style, std::string_view title) {
  std::string d;
  for (size_t i = 0; i < points.size(); ++i)
    d += fmt::format("{}{}{},{}", i == 0 ? "" : " ", i == 0 ? "M" : "L", SvgNum(points[i].x), SvgNum(points[i].y));
  if (closed && !points.empty()) d += " Z";
  Shape("path", fmt::format(" d=\"{}\"", d), style, title);
  return *this;
}

Svg& Svg::Circle(double cx, double cy, double r, const SvgStyle& style, std::string_view title) {
  Shape("circle", fmt::format(" cx=\"{}\" cy=\"{}\" r=\"{}\"", SvgNum(cx), SvgNum(cy), SvgNum(std::max(0.0, r))),
        style, title);
  return *this;
}

Svg& Svg::Text(double x, double y, std::string_view text, const SvgTextStyle& style) {
  std::string a = fmt::format(" x=\"{}\" y=\"{}\" font-size=\"{}\"", SvgNum(x), SvgNum(y), SvgNum(style.size));
  if (!style.anchor.empty()) a += fmt::format(" text-anchor=\"{}\"", XmlEscape(style.anchor));
  if (!style.fill.empty()) a += fmt::format(" fill=\"{}\"", XmlEscape(style.fill));
  if (style.bold) a += " font-weight=\"bold\"";
  if (!style.baseline.empty()) a += fmt::format(" dominant-baseline=\"{}\"", XmlEscape(style.baseline));
  if (style.rotate != 0)
    a += fmt::format(" transform=\"rotate({} {} {})\"", SvgNum(style.rotate), SvgNum(x), SvgNum(y));
  if (!style.css_class.empty()) a += fmt::format(" class=\"{}\"", XmlEscape(style.css_class));
  body_ += fmt::format("<text{}>{}</text>", a, XmlEscape(text));
  return *this;
}

Svg& Svg::BeginGroup(std::string_view css_class, std::string_view title) {
  body_ += "<g";
  if (!css_class.empty()) body_ += fmt::format(" class=\"{}\"", XmlEscape(css_class));
  body_ += ">";
  if (!title.empty()) body_ += fmt::format("<title>{}</title>", XmlEscape(title));
  ++open_groups_;
  return *this;
}

Svg& Svg::EndGroup() {
  if (open_groups_ > 0) {
    body_ += "</g>";
    --open_groups_;
  }
  return *this;
}

std::string Svg::Finish() const {
  std::string out = fmt::format(
      "<svg viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\""
      " font-family=\"sans-serif\"",
      SvgNum(width_), SvgNum(height_));
  if (!aria_label_.empty()) out += fmt::format(" aria-label=\"{}\"", XmlEscape(aria_label_));
  out += ">" + body_;
  for (int i = 0; i < open_groups_; ++i) out += "</g>";
  out += "</svg>";
  return out;
}

}  // namespace npuprof::views
