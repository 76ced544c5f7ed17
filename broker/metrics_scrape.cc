#include "broker/metrics_scrape.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <vector>

namespace npuprof::metrics {

namespace {

std::optional<uint64_t> ToU64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) ++i;
    const size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\n' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::optional<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string s(64 * 1024, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After ") ": field 3 (state) onwards; utime is field 14, stime 15,
  // starttime 22, vsize 23, rss 24.
  const auto f = Fields(text.substr(close + 1));
  auto field = [&](size_t n) -> std::optional<uint64_t> {
    if (n < 3 || n - 3 >= f.size()) return std::nullopt;
    return ToU64(f[n - 3]);
  };
  const auto ut = field(14), st = field(15), start = field(22), vs = field(23), rss = field(24);
  if (!ut || !st || !start || !vs || !rss) return std::nullopt;
  return ProcStat{*ut, *st, *start, *vs, *rss};
}

std::optional<uint64_t> ParseBootTime(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const auto f = Fields(text.substr(pos, end - pos));
    if (f.size() == 2 && f[0] == "btime") return ToU64(f[1]);
    pos = end + 1;
  }
  return std::nullopt;
}

ProcessReadings ReadProcessReadings() {
  ProcessReadings r;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  if (auto text = ReadSmallFile("/proc/self/stat")) {
    if (auto st = ParseProcStat(*text); st && ticks > 0 && page > 0) {
      r.cpu_seconds = static_cast<double>(st->utime_ticks + st->stime_ticks) / static_cast<double>(ticks);
      r.resident_bytes = static_cast<double>(st->rss_pages) * static_cast<double>(page);
      r.virtual_bytes = static_cast<double>(st->vsize_bytes);
      if (auto stat = ReadSmallFile("/proc/stat"))
        if (auto boot = ParseBootTime(*stat))
          r.start_time_seconds =
              static_cast<double>(*boot) + static_cast<double>(st->start_ticks) / static_cast<double>(ticks);
    }
  }
  std::error_code ec;
  size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  if (!ec) r.open_fds = static_cast<double>(fds);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) r.max_fds = static_cast<double>(lim.rlim_cur);
  return r;
}

std::optional<uint64_t> DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, std::filesystem::directory_options::skip_permission_denied, ec);
  if (ec) return std::nullopt;
  uint64_t total = 0;
  for (std::filesystem::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code fe;
    if (!it->is_regular_file(fe) || fe) continue;
    const auto n = it->file_size(fe);
    if (!fe) total += n;
  }
  return total;
}

}  // namespace npuprof::metrics
