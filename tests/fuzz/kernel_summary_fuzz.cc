// The kernel summary of kernel_details.csv (parsers/kernel_summary.h) and the
// incremental CSV reader under it, on any bytes. The first byte picks a chunk
// size; the rest is fed whole and in those chunks. Promises: both ways give
// the same summary (or the same error); rows add up (counted + skipped =
// data rows; the by-Type counts sum to the counted rows); totals are finite
// and non-negative; top lists are ordered by total and within their caps;
// names fit kMaxKernelNameBytes; the JSON form always serialises.
#include <cmath>

#include "common/status.h"
#include "parsers/kernel_summary.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

Result<KernelSummary> Build(std::string_view text, size_t chunk) {
  KernelSummaryBuilder b(64);
  for (size_t i = 0; i < text.size(); i += chunk) {
    if (!b.Feed(text.substr(i, chunk)).ok()) break;
  }
  return b.Finish(8, 8);
}

void CheckList(const std::vector<KernelStat>& list, size_t cap, const char* what) {
  FUZZ_CHECK(list.size() <= cap, "{}: {} entries over the cap {}", what, list.size(), cap);
  for (size_t i = 0; i < list.size(); ++i) {
    const KernelStat& k = list[i];
    FUZZ_CHECK(std::isfinite(k.total_us) && k.total_us >= 0 && k.max_us <= k.total_us, "{}: total {} max {}", what,
               k.total_us, k.max_us);
    FUZZ_CHECK(k.count >= 1, "{}: an entry with no rows", what);
    FUZZ_CHECK(k.name.size() <= kMaxKernelNameBytes && k.type.size() <= kMaxKernelNameBytes, "{}: a long name", what);
    if (i > 0) FUZZ_CHECK(list[i - 1].total_us >= k.total_us, "{}: not ordered by total at {}", what, i);
  }
}

}  // namespace

int FuzzKernelSummary(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 17;
  const std::string_view text = AsText(data + 1, size - 1);
  const Result<KernelSummary> whole = Build(text, text.size() + 1);
  const Result<KernelSummary> pieces = Build(text, chunk);
  FUZZ_CHECK(whole.ok() == pieces.ok(), "whole {} but in {}-byte chunks {}", whole.status().message(), chunk,
             pieces.status().message());
  if (!whole.ok()) {
    CheckError(whole.status(), "KernelSummaryBuilder");
    FUZZ_CHECK(whole.status().message() == pieces.status().message(), "errors differ: {} / {}",
               whole.status().message(), pieces.status().message());
    return 0;
  }
  const nlohmann::json a = KernelSummaryJson(*whole), b = KernelSummaryJson(*pieces);
  FUZZ_CHECK(a == b, "the {}-byte chunking changed the summary", chunk);
  const KernelSummary& s = *whole;
  FUZZ_CHECK(s.counted_rows + s.skipped_rows == s.data_rows, "{} counted + {} skipped != {} rows", s.counted_rows,
             s.skipped_rows, s.data_rows);
  FUZZ_CHECK(std::isfinite(s.total_us) && s.total_us >= 0, "total {}", s.total_us);
  FUZZ_CHECK(s.other_rows <= s.counted_rows, "{} other rows of {}", s.other_rows, s.counted_rows);
  CheckList(s.top, 8, "top");
  CheckList(s.by_type, 8, "by_type");
  if (s.by_type.size() < 8) {
    uint64_t n = 0;
    for (const auto& t : s.by_type) n += t.count;
    FUZZ_CHECK(n == s.counted_rows, "by-Type counts {} != counted rows {}", n, s.counted_rows);
  }
  (void)a.dump();  // valid UTF-8 throughout, or this throws
  return 0;
}

}  // namespace npuprof::fuzz
