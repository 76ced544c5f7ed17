// The HBM watch's HTML page (views/html_hbm_watch.h), pure: the verdict per
// device from the fold of known samples, the samples and the fitted line as
// SVG, escaping, and the error without a watch.
#include <gtest/gtest.h>

#include "tests/views/hbm_watch_fixture.h"
#include "views/html_hbm_watch.h"

namespace npuprof::testing {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(HtmlHbmWatch, VerdictPerDeviceWithSamplesAndFittedLine) {
  // 1 MB per sample of 60 s: 60 MB/h exactly on device 0; device 1 flat.
  const nlohmann::json doc = HbmWatchReportDoc(30, 1, 60, "serve-<1>");
  auto html = views::RenderHbmWatchHtml(doc, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_NE(html->find("growing: +60.0 MB/h"), std::string::npos);
  EXPECT_NE(html->find(">steady<"), std::string::npos);
  EXPECT_NE(html->find("serve-&lt;1&gt;"), std::string::npos) << "escaped";
  EXPECT_EQ(html->find("serve-<1>"), std::string::npos);
  EXPECT_EQ(Count(*html, "<polyline"), 4u) << "per device: the samples and the fitted line";
  EXPECT_NE(html->find("fit: +60.0 MB/h"), std::string::npos);
  EXPECT_NE(html->find("99.999 %"), std::string::npos) << "the confidence";
  auto zh = views::RenderHbmWatchHtml(doc, "zh");
  ASSERT_TRUE(zh.ok());
  EXPECT_NE(zh->find("HBM 漂移监测"), std::string::npos);
}

TEST(HtmlHbmWatch, TheFittedLineStartsAtTheFitOfTheFirstSample) {
  const nlohmann::json doc = HbmWatchReportDoc(10, 3, 10);
  const nlohmann::json& d0 = doc["hbm_watch"]["devices"][0];
  // Exact series: the fit goes through every reading, the first one included.
  EXPECT_NEAR(d0["fit_first_used_mb"].get<double>(), 30003, 1e-6);
  EXPECT_NEAR(d0["slope_mb_per_h"].get<double>(), 3 * 360, 1e-6);
  EXPECT_NEAR(doc["hbm_watch"]["devices"][1]["fit_first_used_mb"].get<double>(), 31000, 1e-9);
}

TEST(HtmlHbmWatch, NoWatchIsAnError) {
  auto html = views::RenderHbmWatchHtml({{"run_id", "s1"}}, "en");
  ASSERT_FALSE(html.ok());
  EXPECT_NE(html.status().message().find("--watch-hbm"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::testing
