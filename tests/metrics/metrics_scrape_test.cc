// Scrape-time readings: the /proc parsers on fixed text, and the readers on
// this very process and a temp dir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "broker/metrics_scrape.h"

namespace npuprof::metrics {
namespace {

TEST(MetricsScrape, ProcStatFieldsAreCountedAfterTheLastParenthesis) {
  // A command name with spaces and parentheses (field 2 is free text).
  const std::string line =
      "4242 (npu (prof) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 350 120 0 0 20 0 5 0 987654 "
      "123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  auto st = ParseProcStat(line);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->utime_ticks, 350u);
  EXPECT_EQ(st->stime_ticks, 120u);
  EXPECT_EQ(st->start_ticks, 987654u);
  EXPECT_EQ(st->vsize_bytes, 123456789u);
  EXPECT_EQ(st->rss_pages, 2048u);
  EXPECT_FALSE(ParseProcStat("4242 (cut) S 1 2 3"));
  EXPECT_FALSE(ParseProcStat("no parenthesis here"));
  EXPECT_FALSE(ParseProcStat(""));
}

TEST(MetricsScrape, BootTimeIsTheBtimeLine) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), 1700000000u);
  EXPECT_EQ(ParseBootTime("cpu 1\n"), std::nullopt);
  EXPECT_EQ(ParseBootTime("btime x\n"), std::nullopt);
}

TEST(MetricsScrape, ThisProcessHasPlausibleReadings) {
  const ProcessReadings r = ReadProcessReadings();
  ASSERT_TRUE(r.start_time_seconds && r.cpu_seconds && r.resident_bytes && r.open_fds);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(*r.start_time_seconds, now + 2);  // btime is whole seconds
  EXPECT_GT(*r.start_time_seconds, now - 24 * 3600);
  EXPECT_GT(*r.resident_bytes, 0);
  EXPECT_GE(*r.open_fds, 3);  // stdin, stdout, stderr at least
}

TEST(MetricsScrape, DirectoryBytesSumsRegularFilesBelowIt) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "npuprof_scrape_XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "a") << std::string(100, 'a');
  std::ofstream(dir / "sub" / "b") << std::string(23, 'b');
  EXPECT_EQ(DirectoryBytes(dir.string()), 123u);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(DirectoryBytes(dir.string()), std::nullopt);
}

}  // namespace
}  // namespace npuprof::metrics
