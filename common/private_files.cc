#include "common/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/time_util.h"

namespace npuprof {

namespace {

std::string Errno() { return std::strerror(errno); }

std::string ModeText(mode_t m) { return fmt::format("{:04o}", static_cast<unsigned>(m & 07777)); }

// Reads at most cap bytes from fd; more is an error naming path.
Result<std::string> ReadCapped(int fd, const std::string& path, size_t cap) {
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Io(fmt::format("cannot read {}: {}", path, Errno()));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > cap) return Status::Invalid(fmt::format("{} is larger than {} bytes: not a file npuprof wrote", path, cap));
  }
}

// Opens path for reading and fstat()s the descriptor; kNotFound when missing.
Result<int> OpenChecked(const std::string& path, struct stat* st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} does not exist", path));
    return Status::Io(fmt::format("cannot open {}: {}", path, Errno()));
  }
  if (::fstat(fd, st) != 0) {
    const std::string e = Errno();
    ::close(fd);
    return Status::Io(fmt::format("cannot stat {}: {}", path, e));
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return Status::Invalid(fmt::format("{} is not a regular file", path));
  }
  return fd;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

Status WriteAll(int fd, const std::string& text, const std::string& path) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Io(fmt::format("cannot write {}: {}", path, Errno()));
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Writes a fresh temp file next to path (mode exactly `mode`, synced); its name on success.
Result<std::string> WriteTemp(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, RandomHex(6));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Status::Io(fmt::format("cannot create {}: {}", tmp, Errno()));
  Status s;
  {
    FdCloser closer{fd};
    if (::fchmod(fd, mode) != 0) s = Status::Io(fmt::format("cannot chmod {}: {}", tmp, Errno()));
    if (s.ok()) s = WriteAll(fd, text, tmp);
    if (s.ok() && ::fsync(fd) != 0) s = Status::Io(fmt::format("cannot sync {}: {}", tmp, Errno()));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return tmp;
}

void SyncParentDir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file itself is synced
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

Result<PrivateDirOutcome> EnsurePrivateDir(const std::string& path) {
  struct stat st {};
  PrivateDirOutcome outcome = PrivateDirOutcome::kAlreadyPrivate;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::Io(fmt::format("cannot stat {}: {}", path, Errno()));
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return Status::Io(fmt::format("cannot create {}: {}", parent.string(), ec.message()));
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::Io(fmt::format("cannot create {}: {}", path, Errno()));
    if (::stat(path.c_str(), &st) != 0) return Status::Io(fmt::format("cannot stat {}: {}", path, Errno()));
    outcome = PrivateDirOutcome::kCreated;
  }
  if (!S_ISDIR(st.st_mode)) return Status::Invalid(fmt::format("{} is not a directory", path));
  if (st.st_uid != ::geteuid())
    return Status::Denied(fmt::format("{} belongs to uid {}, not to this user (uid {}): use a directory of your own",
                                      path, st.st_uid, ::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Status::Denied(fmt::format(
        "{} is writable by group or others (mode {}): someone else may have planted files in it; use a new "
        "directory, or check its contents and `chmod 700 {}`",
        path, ModeText(st.st_mode), path));
  if ((st.st_mode & 0777) != 0700) {
    if (::chmod(path.c_str(), 0700) != 0) return Status::Io(fmt::format("cannot chmod 700 {}: {}", path, Errno()));
    if (outcome != PrivateDirOutcome::kCreated) outcome = PrivateDirOutcome::kTightened;
  }
  return outcome;
}

Result<std::string> ReadSecretFile(const std::string& path, size_t cap) {
  struct stat st {};
  auto fd = OpenChecked(path, &st);
  if (!fd.ok()) return fd.status();
  FdCloser closer{*fd};
  if (st.st_uid != ::geteuid())
    return Status::Denied(fmt::format("key file {} belongs to uid {}, not to this user (uid {})", path, st.st_uid,
                                      ::geteuid()));
  if (st.st_mode & 077)
    return Status::Denied(fmt::format("key file {} is accessible by group or others (mode {}): its secret key may "
                                      "have leaked; `chmod 600 {}` (or make a new key)",
                                      path, ModeText(st.st_mode), path));
  return ReadCapped(*fd, path, cap);
}

Result<std::string> ReadProtectedFile(const std::string& path, size_t cap) {
  struct stat st {};
  auto fd = OpenChecked(path, &st);
  if (!fd.ok()) return fd.status();
  FdCloser closer{*fd};
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return Status::Denied(fmt::format("{} belongs to uid {}, not to this user (uid {})", path, st.st_uid, ::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Status::Denied(fmt::format("{} is writable by group or others (mode {}): `chmod go-w {}`", path,
                                      ModeText(st.st_mode), path));
  return ReadCapped(*fd, path, cap);
}

Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode) {
  auto tmp = WriteTemp(path, text, mode);
  if (!tmp.ok()) return tmp.status();
  if (::rename(tmp->c_str(), path.c_str()) != 0) {
    const std::string e = Errno();
    ::unlink(tmp->c_str());
    return Status::Io(fmt::format("cannot rename {} to {}: {}", *tmp, path, e));
  }
  SyncParentDir(path);
  return Status::Ok();
}

Status CreateFileAtomically(const std::string& path, const std::string& text, mode_t mode, bool* created) {
  *created = false;
  auto tmp = WriteTemp(path, text, mode);
  if (!tmp.ok()) return tmp.status();
  const int rc = ::link(tmp->c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp->c_str());
  if (rc != 0) {
    if (err == EEXIST) return Status::Ok();
    return Status::Io(fmt::format("cannot create {}: {}", path, std::strerror(err)));
  }
  *created = true;
  SyncParentDir(path);
  return Status::Ok();
}

}  // namespace npuprof
