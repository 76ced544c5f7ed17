// Figures read when /metrics is scraped, on the HTTP thread (never on the
// broker loop): the process's own resource use from /proc/self, and the
// store's size on disk.
//
// The parsers are pure (text in, figures out); Read* do the I/O and return
// nullopt for whatever they could not read, so a scrape never fails for it
// (the metric is then left out of that scrape's figures, keeping its last
// value).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npuprof::metrics {

struct ProcessReadings {
  std::optional<double> start_time_seconds;  // since the Unix epoch
  std::optional<double> cpu_seconds;         // user + system
  std::optional<double> resident_bytes;
  std::optional<double> virtual_bytes;
  std::optional<double> open_fds;
  std::optional<double> max_fds;
};

struct ScrapeReadings {
  ProcessReadings process;
  std::optional<double> store_size_bytes;
};

// The fields of /proc/<pid>/stat this needs (man 5 proc): utime, stime,
// starttime (clock ticks since boot), vsize (bytes), rss (pages). The command
// name (field 2) may hold spaces and parentheses: fields are counted after
// its last ')'. nullopt for text that is not such a line.
struct ProcStat {
  uint64_t utime_ticks = 0, stime_ticks = 0, start_ticks = 0, vsize_bytes = 0, rss_pages = 0;
};
std::optional<ProcStat> ParseProcStat(std::string_view text);
// "btime <seconds>" of /proc/stat: when the machine booted.
std::optional<uint64_t> ParseBootTime(std::string_view proc_stat_text);

// This process's figures.
ProcessReadings ReadProcessReadings();
// Total size of the regular files below dir (files that vanish while it is
// walked, as RocksDB compacts, are skipped); nullopt when dir cannot be read.
std::optional<uint64_t> DirectoryBytes(const std::string& dir);

}  // namespace npuprof::metrics
