#include "statemachine/torch_profile_analyse_limit.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace npuprof::sm {

namespace {

// Up to 2^40 KiB (1 PiB): anything larger is garbage.
constexpr int64_t kMaxKib = int64_t{1} << 40;
constexpr int64_t kMaxCores = 1 << 20;

std::optional<int64_t> Number(const std::string& s, int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (unsigned char c : s)
    if (!std::isdigit(c)) return std::nullopt;
  const int64_t v = std::stoll(s);
  if (v > max) return std::nullopt;
  return v;
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

std::string BytesText(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (bytes >= 1024) return fmt::format("{} KiB", bytes / 1024);
  return fmt::format("{} B", bytes);
}

AnalyseLimit ChooseAnalyseLimit(const AnalyseMeans& m, size_t ranks, std::optional<int64_t> override_limit) {
  AnalyseLimit out;
  bool sizes_known = ranks > 0 && m.rank_bytes.size() >= ranks;
  int64_t largest = 0, total = 0;
  for (size_t i = 0; i < ranks && i < m.rank_bytes.size(); ++i) {
    if (!m.rank_bytes[i]) {
      sizes_known = false;
      continue;
    }
    largest = std::max(largest, *m.rank_bytes[i]);
    total += *m.rank_bytes[i];
  }
  if (sizes_known) {
    out.largest_rank_bytes = largest;
    out.total_rank_bytes = total;
    if (m.disk_free_bytes && *m.disk_free_bytes < kAnalyseRawFactor * total)
      out.warning = fmt::format("{} free on disk under the profile root, less than {}× the raw data ({} × {} = {})",
                                BytesText(*m.disk_free_bytes), kAnalyseRawFactor, BytesText(total),
                                kAnalyseRawFactor, BytesText(kAnalyseRawFactor * total));
  }
  if (override_limit) {
    out.limit = std::max<int64_t>(1, *override_limit);
    out.source = "override";
    out.reason = fmt::format("--analyse-parallel {}", out.limit);
    return out;
  }
  std::vector<std::string> missing;
  if (!m.cores || *m.cores < 1) missing.push_back("the core count (nproc)");
  if (!m.mem_available_bytes) missing.push_back("MemAvailable (/proc/meminfo)");
  if (!sizes_known) missing.push_back("the rank dirs' sizes (du)");
  if (!missing.empty()) {
    out.limit = 1;
    out.source = "default";
    out.reason = fmt::format("{} could not be read → 1 at a time (the safe default)", fmt::join(missing, ", "));
    return out;
  }
  out.source = "means";
  const int64_t each = kAnalyseRawFactor * largest;
  const int64_t by_cores = *m.cores;
  const int64_t by_memory = each > 0 ? *m.mem_available_bytes / each : by_cores;
  const int64_t n_ranks = static_cast<int64_t>(ranks);
  out.limit = std::max<int64_t>(1, std::min({by_cores, by_memory, n_ranks}));
  std::string bound;
  if (by_memory < 1) bound = "memory is short even for one; one runs anyway";
  else if (out.limit == by_memory && by_memory < by_cores) bound = "bound by memory";
  else if (out.limit == by_cores && by_cores < n_ranks) bound = "bound by cores";
  else bound = n_ranks == 1 ? "the only rank" : fmt::format("all {} ranks", n_ranks);
  out.reason = fmt::format("{}, {} available, largest rank {} raw ×{} = {} each → {} at a time ({})",
                           Plural(by_cores, "core", "cores"), BytesText(*m.mem_available_bytes), BytesText(largest),
                           kAnalyseRawFactor, BytesText(each), out.limit, bound);
  return out;
}

AnalyseMeans ParseAnalyseMeans(const std::string& text, size_t dirs) {
  AnalyseMeans m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    const auto kib = [&]() -> std::optional<int64_t> {
      const auto v = Number(value, kMaxKib);
      return v ? std::optional<int64_t>(*v * 1024) : std::nullopt;
    };
    if (key == "cores") {
      const auto v = Number(value, kMaxCores);
      if (v && *v >= 1) m.cores = v;
    } else if (key == "mem_available_kb") {
      m.mem_available_bytes = kib();
    } else if (key == "disk_free_kb") {
      m.disk_free_bytes = kib();
    } else if (key == "dir_kb" && m.rank_bytes.size() < dirs) {
      m.rank_bytes.push_back(kib());
    }
  }
  m.rank_bytes.resize(dirs);
  return m;
}

}  // namespace npuprof::sm
