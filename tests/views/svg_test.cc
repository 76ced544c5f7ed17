// The SVG writer: deterministic numbers, escaping, element output, groups.
#include <gtest/gtest.h>

#include <cmath>

#include "views/svg.h"

namespace npuprof::views {
namespace {

TEST(SvgNum, FixedPointTrimmedNeverMinusZero) {
  EXPECT_EQ(SvgNum(12), "12");
  EXPECT_EQ(SvgNum(12.5), "12.5");
  EXPECT_EQ(SvgNum(0.25), "0.25");
  EXPECT_EQ(SvgNum(0.255), "0.26");  // two decimals, rounded
  EXPECT_EQ(SvgNum(-3), "-3");
  EXPECT_EQ(SvgNum(-0.001), "0");
  EXPECT_EQ(SvgNum(1e6), "1000000");
  EXPECT_EQ(SvgNum(NAN), "0");
  EXPECT_EQ(SvgNum(INFINITY), "0");
}

TEST(XmlEscape, EscapesMarkupRepairsUtf8DropsControls) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(XmlEscape("模型权重"), "模型权重");
  EXPECT_EQ(XmlEscape(std::string("x\xff" "y")), "x\xEF\xBF\xBDy");
  EXPECT_EQ(XmlEscape(std::string("a\x01\x1b" "b\tc\n")), "ab\tc\n");
}

TEST(Svg, ElementsWithStyleAndTitle) {
  Svg s(100, 50, "chart <1>");
  s.Rect(1, 2, 30.5, 4, {.fill = "#4e79a7", .stroke = "#fff", .stroke_width = 0.5}, "weights: 1,024.0 MB");
  s.Line(0, 0, 10, 10, {.stroke = "#222", .dash = "4 3"});
  s.Text(5, 6, "a & b", {.size = 11, .anchor = "middle"});
  EXPECT_EQ(s.Finish(),
            "<svg viewBox=\"0 0 100 50\" width=\"100%\" role=\"img\" font-family=\"sans-serif\" "
            "aria-label=\"chart &lt;1&gt;\">"
            "<rect x=\"1\" y=\"2\" width=\"30.5\" height=\"4\" fill=\"#4e79a7\" stroke=\"#fff\" stroke-width=\"0.5\">"
            "<title>weights: 1,024.0 MB</title></rect>"
            "<line x1=\"0\" y1=\"0\" x2=\"10\" y2=\"10\" stroke=\"#222\" stroke-dasharray=\"4 3\"/>"
            "<text x=\"5\" y=\"6\" font-size=\"11\" text-anchor=\"middle\" fill=\"#222\">a &amp; b</text></svg>");
}

TEST(Svg, PolylinePathCircleAndNegativeSizes) {
  Svg s(10, 10);
  s.Polyline({{0, 1}, {2.5, 3}}, {.stroke = "red"});
  s.Path({{0, 0}, {1, 0}, {1, 1}}, true, {.fill = "blue", .opacity = 0.5});
  s.Circle(1, 1, -2, {.fill = "x"});
  s.Rect(0, 0, -5, 3, {});
  const std::string out = s.Finish();
  EXPECT_NE(out.find("<polyline points=\"0,1 2.5,3\" fill=\"none\" stroke=\"red\"/>"), std::string::npos) << out;
  EXPECT_NE(out.find("<path d=\"M0,0 L1,0 L1,1 Z\" fill=\"blue\" fill-opacity=\"0.5\"/>"), std::string::npos) << out;
  EXPECT_NE(out.find("r=\"0\""), std::string::npos);
  EXPECT_NE(out.find("width=\"0\" height=\"3\""), std::string::npos);
}

TEST(Svg, GroupsCloseAtFinishAndTextRotates) {
  Svg s(10, 10);
  s.BeginGroup("bars", "hover").BeginGroup();
  s.Text(3, 4, "y", {.rotate = -90});
  s.EndGroup();
  const std::string out = s.Finish();
  EXPECT_NE(out.find("<g class=\"bars\"><title>hover</title><g>"), std::string::npos) << out;
  EXPECT_NE(out.find("transform=\"rotate(-90 3 4)\""), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("</g></g></svg>")) << out;
  // Finish does not change the builder: the same bytes again.
  EXPECT_EQ(s.Finish(), out);
  s.EndGroup().EndGroup();  // more ends than opens are ignored
  EXPECT_NE(s.Finish().find("</g></svg>"), std::string::npos);
}

TEST(Svg, NoExternalReferences) {
  Svg s(10, 10, "x");
  s.BeginGroup("g", "t");
  s.Rect(0, 0, 1, 1, {.fill = "#fff", .css_class = "c"}, "title");
  s.Line(0, 0, 1, 1, {.stroke = "#000"});
  s.Polyline({{0, 0}, {1, 1}}, {.stroke = "#000"});
  s.Path({{0, 0}, {1, 1}}, false, {.stroke = "#000"});
  s.Circle(1, 1, 1, {.fill = "#000"});
  s.Text(0, 0, "http://example.com/", {.css_class = "t"});
  const std::string out = s.Finish();
  for (const char* bad : {"href", "src=", "url(", "<use", "<image", "<script", "<foreignObject", "xmlns"})
    EXPECT_EQ(out.find(bad), std::string::npos) << bad << " in " << out;
}

}  // namespace
}  // namespace npuprof::views
