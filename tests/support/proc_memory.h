// A process's memory as the kernel reports it in /proc/<pid>/status, for
// tests and benchmarks that bound npuprof's own footprint: VmHWM is the
// peak resident set size since the process started (the high-water mark of
// VmRSS), VmRSS the current one; both in kB (KiB).
//
// ProcStatusKb reads one "Vm...:" field: NotFound when the process is gone
// or the field is absent (a kernel thread has no Vm lines), Corruption when
// its value is no whole number of kB. Reads /proc only. Header-only.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof::testing {

inline Result<int64_t> ProcStatusKb(pid_t pid, std::string_view field) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream f(path);
  if (!f) return Status::NotFound(path + ": no such process (it exited or was reaped)");
  const std::string key = std::string(field) + ":";
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const std::string rest = line.substr(key.size());
    const size_t at = rest.find_first_of("0123456789");
    const size_t unit = rest.find(" kB");
    if (at == std::string::npos || unit == std::string::npos || unit < at)
      return Status::Corruption(path + ": " + std::string(field) + " is '" + rest + "', not '<number> kB'");
    errno = 0;
    char* end = nullptr;
    const long long kb = std::strtoll(rest.c_str() + at, &end, 10);
    if (errno != 0 || end != rest.c_str() + unit || kb < 0)
      return Status::Corruption(path + ": " + std::string(field) + " is '" + rest + "', not '<number> kB'");
    return static_cast<int64_t>(kb);
  }
  return Status::NotFound(path + ": no " + std::string(field) + " line (a kernel thread, or not Linux)");
}

// The peak resident set size of `pid` in kB (VmHWM).
inline Result<int64_t> PeakRssKb(pid_t pid) { return ProcStatusKb(pid, "VmHWM"); }

}  // namespace npuprof::testing
