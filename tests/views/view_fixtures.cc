#include "tests/views/view_fixtures.h"

#include <fstream>
#include <sstream>

#include "views/hbm_series_from_run.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {

using nlohmann::json;

std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string ReadTestData(const std::string& rel) { return ReadFileBytes(std::string(npuprof::build_paths::TestDataDir()) + "/" + rel); }

json TestJson(const std::string& rel) {
  json j = json::parse(ReadTestData(rel), nullptr, false);
  return j.is_discarded() ? json() : j;
}

views::HbmSeriesSet SeriesSetFromRun(const json& events_doc, const std::string& npu_mem_csv, const std::string& file,
                                     const std::string& blob) {
  return views::HbmSeriesSetFromRun(events_doc, {{file, blob, std::nullopt, npu_mem_csv}});
}

}  // namespace npuprof::testing
