// The shell lines that read a target's free memory and free disk, shared by
// the commands that need them (torch_profile.list_profile_dirs' listing and means,
// torch_profile.capture_check). Each prints one "key value" line that
// sm::ParseAnalyseMeans reads; an unread value prints the key alone. A real
// host reads /proc/meminfo; NPUPROF_MEMINFO names another file (the
// simulated target's own, tests/sim/README.md).
#pragma once

#include <string>

namespace npuprof::workers {

// "mem_available_kb N": MemAvailable.
inline constexpr const char* kMemAvailableLine =
    R"sh(printf 'mem_available_kb %s\n' "$(awk '$1 == "MemAvailable:" { print $2; exit }' "${NPUPROF_MEMINFO:-/proc/meminfo}" 2>/dev/null)")sh";

// "disk_free_kb N": Available of `df -Pk` for the path in shell variable `var`.
inline std::string DiskFreeLine(const std::string& var) {
  return "printf 'disk_free_kb %s\\n' \"$(df -Pk -- \"$" + var + "\" 2>/dev/null | awk 'NR == 2 { print $4 }')\"";
}

}  // namespace npuprof::workers
