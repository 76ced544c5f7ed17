// SshSession SFTP operations: one sftp subsystem per connection, opened lazily
// and dropped with the connection. Every operation is idempotent, so a dropped
// connection is re-established and the operation retried once.
#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <spdlog/spdlog.h>

#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

constexpr size_t kChunk = 32768;  // below every server's SFTP read/write cap

struct FileCloser {
  void operator()(sftp_file_struct* f) const { sftp_close(f); }
};
struct AttrFree {
  void operator()(sftp_attributes_struct* a) const { sftp_attributes_free(a); }
};
using FilePtr = std::unique_ptr<sftp_file_struct, FileCloser>;
using AttrPtr = std::unique_ptr<sftp_attributes_struct, AttrFree>;

}  // namespace

Result<sftp_session_struct*> SshSession::SftpLocked() {
  Status s = ConnectLocked();
  if (!s.ok()) return s;
  if (sftp_ != nullptr) return sftp_;
  sftp_session sftp = sftp_new(session_);
  if (sftp == nullptr || sftp_init(sftp) != SSH_OK) {
    std::string err = LibError();
    if (sftp != nullptr) sftp_free(sftp);
    if (!AliveLocked()) {
      return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                  fmt::format("connection to {} lost while opening sftp: {}",
                              target_.Endpoint(), err));
    }
    return Fail(SshErrorKind::kChannelFailed, Code::kUnavailable,
                fmt::format("cannot open the sftp subsystem on {}: {}", target_.Endpoint(), err));
  }
  sftp_ = sftp;
  Note(internal::Stat::kSftpSessions);
  return sftp_;
}

Status SshSession::SftpError(const std::string& op, const std::string& path) {
  if (!AliveLocked()) {
    std::string err = LibError();
    return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                fmt::format("connection to {} lost during sftp {} '{}': {}", target_.Endpoint(),
                            op, path, err));
  }
  int code = sftp_ != nullptr ? sftp_get_error(sftp_) : -1;
  std::string where = fmt::format("sftp {} '{}' on {}", op, path, target_.Endpoint());
  switch (code) {
    case SSH_FX_NO_SUCH_FILE:
    case SSH_FX_NO_SUCH_PATH:
      return Fail(SshErrorKind::kRemoteError, Code::kNotFound, where + ": no such file");
    case SSH_FX_PERMISSION_DENIED:
      return Fail(SshErrorKind::kRemoteError, Code::kPermissionDenied,
                  where + ": permission denied");
    default:
      return Fail(SshErrorKind::kRemoteError, Code::kIoError,
                  fmt::format("{}: {} (sftp status {})", where, LibError(), code));
  }
}

// Runs fn once; if it failed because the connection died, reconnects and runs
// it again (safe: every sftp operation here is idempotent).
template <typename Fn>
auto SshSession::WithSftpRetry(Fn fn) -> decltype(fn()) {
  auto r = fn();
  if (r.ok() || ErrorKindOf(r.status()) != SshErrorKind::kConnectionLost) return r;
  spdlog::info("ssh: {}; reconnecting once", r.status().message());
  DisconnectLocked();
  return fn();
}

Result<std::string> SshSession::ReadFile(const std::string& path, uint64_t offset,
                                         uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return WithSftpRetry([&]() -> Result<std::string> {
    auto sftp = SftpLocked();
    if (!sftp.ok()) return sftp.status();
    FilePtr f(sftp_open(sftp.value(), path.c_str(), O_RDONLY, 0));
    if (!f) return SftpError("open", path);
    if (offset > 0 && sftp_seek64(f.get(), offset) != 0) return SftpError("seek", path);
    std::string out;
    char buf[kChunk];
    while (out.size() < max_bytes) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, max_bytes - out.size()));
      ssize_t n = sftp_read(f.get(), buf, want);
      if (n < 0) return SftpError("read", path);
      if (n == 0) break;  // EOF
      out.append(buf, static_cast<size_t>(n));
      Note(internal::Stat::kPayloadIn, n);
    }
    return out;
  });
}

Result<std::vector<DirEntry>> SshSession::ListDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return WithSftpRetry([&]() -> Result<std::vector<DirEntry>> {
    auto sftp = SftpLocked();
    if (!sftp.ok()) return sftp.status();
    sftp_dir dir = sftp_opendir(sftp.value(), path.c_str());
    if (dir == nullptr) return SftpError("opendir", path);
    std::vector<DirEntry> out;
    while (true) {
      AttrPtr a(sftp_readdir(sftp.value(), dir));
      if (!a) break;
      std::string name = a->name != nullptr ? a->name : "";
      if (name == "." || name == "..") continue;
      out.push_back({name, a->size, a->type == SSH_FILEXFER_TYPE_DIRECTORY});
    }
    bool clean_eof = sftp_dir_eof(dir) != 0;
    sftp_closedir(dir);
    if (!clean_eof) return SftpError("readdir", path);
    std::sort(out.begin(), out.end(),
              [](const DirEntry& x, const DirEntry& y) { return x.name < y.name; });
    return out;
  });
}

Result<FileStat> SshSession::Stat(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return WithSftpRetry([&]() -> Result<FileStat> {
    auto sftp = SftpLocked();
    if (!sftp.ok()) return sftp.status();
    AttrPtr a(sftp_stat(sftp.value(), path.c_str()));
    if (!a) return SftpError("stat", path);
    FileStat st;
    st.size = a->size;
    st.is_dir = a->type == SSH_FILEXFER_TYPE_DIRECTORY;
    st.mode = a->permissions;
    st.mtime = static_cast<int64_t>(a->mtime64 != 0 ? a->mtime64 : a->mtime);
    return st;
  });
}

Status SshSession::WriteFile(const std::string& path, std::string_view data, uint32_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  auto r = WithSftpRetry([&]() -> Result<bool> {
    auto sftp = SftpLocked();
    if (!sftp.ok()) return sftp.status();
    FilePtr f(sftp_open(sftp.value(), path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                        static_cast<mode_t>(mode)));
    if (!f) return SftpError("create", path);
    size_t off = 0;
    while (off < data.size()) {
      size_t n = std::min(kChunk, data.size() - off);
      ssize_t w = sftp_write(f.get(), data.data() + off, n);
      if (w < 0) return SftpError("write", path);
      off += static_cast<size_t>(w);
      Note(internal::Stat::kPayloadOut, w);
    }
    f.reset();
    if (sftp_chmod(sftp.value(), path.c_str(), static_cast<mode_t>(mode)) != 0) {
      return SftpError("chmod", path);
    }
    return true;
  });
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace npuprof::ssh
