#include "store/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace npuprof::store {

Result<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0)
    return Status::Io(fmt::format("cannot measure the free space under {}: {}", dir, std::strerror(errno)));
  const uint64_t block = st.f_frsize != 0 ? st.f_frsize : st.f_bsize;
  const uint64_t avail = static_cast<uint64_t>(st.f_bavail);
  if (block != 0 && avail > std::numeric_limits<uint64_t>::max() / block) return std::numeric_limits<uint64_t>::max();
  return avail * block;
}

uint64_t FloorFor(SpaceUse use, uint64_t reserve_bytes) {
  return use == SpaceUse::kNewWork ? reserve_bytes : reserve_bytes / 2;
}

bool Admits(uint64_t free_bytes, uint64_t bytes, uint64_t unflushed_bytes, uint64_t floor_bytes) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t need = floor_bytes;
  for (uint64_t add : {unflushed_bytes, bytes, bytes}) {
    if (add > kMax - need) return false;
    need += add;
  }
  return free_bytes >= need;
}

std::string NoSpaceMessage(const std::string& dir, uint64_t free_bytes) {
  return fmt::format("no space left on device under {} ({} MB free)", dir, free_bytes >> 20);
}

}  // namespace npuprof::store
