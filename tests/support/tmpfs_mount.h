// TmpfsMount: a small tmpfs of its own for one test (a disk that can fill
// up): mount(2) of `size` MiB on a new directory under /tmp (or on a given
// one). Needs CAP_SYS_ADMIN (the suite runs as root); when the mount is not
// permitted `error` says why and the test skips. The destructor unmounts
// (lazily, so a process that still holds a file in it cannot keep it
// mounted) and removes the directory it made.
//
// The mount is made in a mount namespace of the test process's own
// (EnterPrivateMountNamespace), so a test that dies before its destructor
// runs (an abort is what these tests look for) leaves no mount behind: it
// goes with the last process of the namespace. The processes the test
// starts after entering it (sshd, the server, its workers) see the mount;
// one started before does not, so a test whose sshd must see a mount calls
// EnterPrivateMountNamespace before starting it. Header only: the store
// tests link no test support library.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace npuprof::testing {

// Moves this process, and every process it starts from now on, into a mount
// namespace of its own (mounts made in it are seen by no one else and vanish
// with its last process). Once per process; false when not permitted or the
// process already runs threads (mounts are then made in the shared
// namespace, and an abort may leave one).
inline bool EnterPrivateMountNamespace() {
  static const bool entered = [] {
    if (::unshare(CLONE_NEWNS) != 0) return false;
    return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
  }();
  return entered;
}

class TmpfsMount {
 public:
  // at: an existing empty directory to mount on (left in place afterwards);
  // empty = a new one under /tmp (removed afterwards).
  explicit TmpfsMount(int size_mib, const std::string& at = "") {
    EnterPrivateMountNamespace();
    if (at.empty()) {
      std::string tmpl = "/tmp/npuprof-tmpfs-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr) {
        error = std::string("mkdtemp: ") + std::strerror(errno);
        return;
      }
      dir_ = tmpl;
      owns_dir_ = true;
    } else {
      dir_ = at;
    }
    const std::string opts = "size=" + std::to_string(size_mib) + "m,mode=0700";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      error = "mount -t tmpfs on " + dir_ + ": " + std::strerror(errno) + " (needs root / CAP_SYS_ADMIN)";
      if (owns_dir_) ::rmdir(dir_.c_str());
      dir_.clear();
      return;
    }
    mounted_ = true;
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    if (owns_dir_ && !dir_.empty()) ::rmdir(dir_.c_str());
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool ok() const { return mounted_; }
  const std::string& dir() const { return dir_; }
  std::string error;

  uint64_t FreeBytes() const {
    struct statvfs st {};
    if (::statvfs(dir_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

  // Writes file `name` (random bytes, 1 MiB at a time) until at most
  // leave_bytes are free or the disk is full; returns the bytes written.
  uint64_t Fill(const std::string& name, uint64_t leave_bytes = 0) const {
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return 0;
    std::vector<char> chunk(1u << 20);
    std::mt19937_64 rng(42);
    for (auto& c : chunk) c = static_cast<char>(rng());
    uint64_t written = 0;
    while (FreeBytes() > leave_bytes) {
      const uint64_t room = FreeBytes() - leave_bytes;
      const size_t n = room < chunk.size() ? static_cast<size_t>(room) : chunk.size();
      const ssize_t w = ::write(fd, chunk.data(), n);
      if (w <= 0) break;  // ENOSPC: full
      written += static_cast<uint64_t>(w);
    }
    ::close(fd);
    return written;
  }

 private:
  std::string dir_;
  bool owns_dir_ = false;
  bool mounted_ = false;
};

}  // namespace npuprof::testing
