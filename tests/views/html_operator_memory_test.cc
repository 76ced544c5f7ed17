// --operator-memory in the HTML memory report (views/html_operator_memory.h):
// each device's section lists the operators holding the peak with their
// rows, the fragmentation and the rank's problems (escaped), and the HBM
// curve carries a marker at the peak naming its top operator.
#include <gtest/gtest.h>

#include "views/charts.h"
#include "views/html_memory_report.h"

namespace npuprof {
namespace {

using nlohmann::json;

json Report() {
  json om = {{"status", "ok"},
             {"problems", json::array()},
             {"peak_operators",
              {{{"name", "npu::attn<b>"}, {"size_mb", 60.0}, {"allocated_at_us", 1000500.0},
                {"released_at_us", nullptr}, {"evidence", {{"file", "operator_memory.csv"}, {"row", 42}}}}}},
             {"peak_allocated_mb", 30000.25},
             {"peak_reserved_mb", 30040.75},
             {"fragmentation_mb", 40.5},
             {"peak_at_us", 1000500.0},
             {"peak_evidence", {{"file", "memory_record.csv"}, {"row", 7}}},
             {"window", {{"first_us", 1.0e6}, {"last_us", 1.001e6}, {"max_reserved_mb", 30040.75}, {"pta_rows", 9}}}};
  json broken = {{"status", "partial"},
                 {"problems", {"operator_memory.csv line 3 is not UTF-8 <script>"}},
                 {"peak_operators", json::array()},
                 {"fragmentation_mb", 12.0}};
  return {{"run_id", "r1"},
          {"mode", "standalone"},
          {"tp", 2},
          {"dp", 1},
          {"devices",
           {{{"device_id", 0}, {"components", json::array()}, {"operator_memory", om}},
            {{"device_id", 1}, {"components", json::array()}, {"operator_memory", broken}}}}};
}

TEST(OperatorMemoryHtml, ListsThePeakOperatorsAndMarksThePeakOnTheCurve) {
  views::HbmSeriesSet set;
  set.series.push_back({0, "", "Device", "msprof_csvs/npu_mem.csv", "", {{1.0e6, 100, 1}, {1.001e6, 200, 2}}});
  auto html = views::RenderMemoryReportHtml(Report(), set, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_NE(html->find("Operator memory at the activation peak"), std::string::npos);
  EXPECT_NE(html->find("npu::attn&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(html->find("npu::attn<b>"), std::string::npos) << "escaped";
  EXPECT_NE(html->find("operator_memory.csv row 42"), std::string::npos);
  EXPECT_NE(html->find("memory_record.csv row 7"), std::string::npos);
  EXPECT_NE(html->find(views::FormatMbValue(40.5) + " MB"), std::string::npos);
  EXPECT_NE(html->find("not released in the window"), std::string::npos);
  EXPECT_NE(html->find("operator peak: npu::attn&lt;b&gt; " + views::FormatMbValue(60.0) + " MB"), std::string::npos);
  EXPECT_NE(html->find("not UTF-8 &lt;script&gt;"), std::string::npos);
  auto zh = views::RenderMemoryReportHtml(Report(), set, "zh");
  ASSERT_TRUE(zh.ok());
  EXPECT_NE(zh->find("算子内存 @ 激活峰值"), std::string::npos);
}

}  // namespace
}  // namespace npuprof
