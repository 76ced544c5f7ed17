// SshSession file operations: one sftp subsystem per connection, opened
// lazily and dropped with the connection; on a connection whose sshd refuses
// it, the same operations over the command channel (file_over_exec.cc).
// Every operation is idempotent, so a dropped connection is re-established
// and the operation retried once.
#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <fmt/format.h>
#include <memory>
#include <spdlog/spdlog.h>

#include "workers/ssh/file_over_exec_protocol.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/shell_quote.h"
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
  // Not Fail(): the caller goes on over the command channel, this is no error of the operation.
  const Status refused(Code::kUnavailable,
                       fmt::format("{}: {} refuses the sftp subsystem",
                                   SshErrorKindName(SshErrorKind::kSubsystemRefused), target_.Endpoint()));
  if (sftp_refused_) return refused;
  sftp_session sftp = sftp_new(session_);
  const bool opened = sftp != nullptr;
  if (opened && sftp_init(sftp) == SSH_OK) {
    sftp_ = sftp;
    Note(internal::Stat::kSftpSessions);
    Note(internal::Stat::kRoundTrips, kSftpStartRoundTrips);
    return sftp_;
  }
  std::string err = LibError();
  if (sftp != nullptr) sftp_free(sftp);
  if (!AliveLocked()) {
    return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                fmt::format("connection to {} lost while opening sftp: {}", target_.Endpoint(), err));
  }
  // sftp_new fails both when no channel can be opened (transient: too many
  // sessions) and when sshd refuses the subsystem (permanent for this
  // connection); a subsystem that starts but does not speak SFTP (sftp_init
  // failed) is as good as refused.
  if (opened || SubsystemRefusedLocked()) {
    sftp_refused_ = true;
    spdlog::info("ssh: {} has no usable sftp subsystem ({}); file operations on this connection go "
                 "over the command channel",
                 target_.Endpoint(), err);
    return refused;
  }
  return Fail(SshErrorKind::kChannelFailed, Code::kUnavailable,
              fmt::format("cannot open the sftp subsystem on {}: {}", target_.Endpoint(), err));
}

bool SshSession::SubsystemRefusedLocked() {
  ssh_channel ch = ssh_channel_new(session_);
  if (ch == nullptr) return false;
  internal::ChannelGuard guard(ch);
  if (ssh_channel_open_session(ch) != SSH_OK) return false;  // no channel at all: not a refusal
  Note(internal::Stat::kRoundTrips, 2);  // the open, the subsystem request
  return ssh_channel_request_subsystem(ch, "sftp") != SSH_OK && AliveLocked();
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

namespace {

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) { return r.status(); }

}  // namespace

// Runs the operation once, on SFTP or (sshd refused it) over the command
// channel; if it failed because the connection died, reconnects and runs it
// again (safe: every file operation here is idempotent).
template <typename SftpFn, typename ExecFn>
auto SshSession::FileOpLocked(SftpFn via_sftp, ExecFn via_exec) -> decltype(via_exec()) {
  auto once = [&]() -> decltype(via_exec()) {
    auto sftp = SftpLocked();
    if (sftp.ok()) return via_sftp(sftp.value());
    if (ErrorKindOf(sftp.status()) == SshErrorKind::kSubsystemRefused) return via_exec();
    return sftp.status();
  };
  auto r = once();
  if (StatusOf(r).ok() || ErrorKindOf(StatusOf(r)) != SshErrorKind::kConnectionLost) return r;
  spdlog::info("ssh: {}; reconnecting once", StatusOf(r).message());
  DisconnectLocked();
  return once();
}

bool SshSession::files_over_exec() {
  std::lock_guard<std::mutex> lock(mu_);
  return sftp_refused_;
}

Result<std::string> SshSession::ReadFile(const std::string& path, uint64_t offset,
                                         uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return FileOpLocked([&](sftp_session sftp) { return SftpReadLocked(sftp, path, offset, max_bytes); },
                      [&] { return ReadOverExecLocked(path, offset, max_bytes); });
}

Result<std::vector<DirEntry>> SshSession::ListDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return FileOpLocked([&](sftp_session sftp) { return SftpListLocked(sftp, path); },
                      [&] { return ListOverExecLocked(path); });
}

Result<FileStat> SshSession::Stat(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  return FileOpLocked([&](sftp_session sftp) { return SftpStatLocked(sftp, path); },
                      [&] { return StatOverExecLocked(path); });
}

Status SshSession::WriteFile(const std::string& path, std::string_view data, uint32_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Note(internal::Stat::kSftpOps);
  Status s = FileOpLocked([&](sftp_session sftp) { return SftpWriteLocked(sftp, path, data, mode); },
                          [&] { return WriteOverExecLocked(path, data, mode); });
  // SFTP v3 says only "Failure" for a full disk: when a write fails for no
  // reason it names, look at the file system's free space and say so.
  if (s.ok() || s.code() != Code::kIoError || ErrorKindOf(s) != SshErrorKind::kRemoteError || !AliveLocked()) return s;
  if (auto full = FullDiskLocked(path, data.size(), s)) return *full;
  return s;
}

std::optional<Status> SshSession::FullDiskLocked(const std::string& path, uint64_t bytes, const Status& failure) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  // GNU stat -f: blocks free to an unprivileged user, and their size.
  auto r = ExecLocked(BuildCommand({"stat", "-f", "-c", "%a %S", "--", dir}), std::chrono::seconds(10), {},
                      OutputCap::kMinCap);
  if (!r.ok() || r->exit_status != 0) return std::nullopt;
  unsigned long long blocks = 0, block_size = 0;
  if (std::sscanf(r->stdout_data.c_str(), "%llu %llu", &blocks, &block_size) != 2 || block_size == 0) return std::nullopt;
  const uint64_t free_bytes = blocks > UINT64_MAX / block_size ? UINT64_MAX : blocks * block_size;
  constexpr uint64_t kSlack = 64 << 10;  // file system metadata, the temp file's own block
  if (free_bytes >= bytes + kSlack) return std::nullopt;
  spdlog::debug("ssh: {}: a write failed on a full file system: {}", target_.Endpoint(), failure.ToString());
  return Fail(SshErrorKind::kRemoteDiskFull, Code::kNoSpace,
              fmt::format("no space left on the target's file system holding {} on {} ({} KB free; writing {} needs "
                          "{} KB); nothing of that write was left there",
                          dir, target_.Endpoint(), free_bytes >> 10,
                          slash == std::string::npos ? path : path.substr(slash + 1), (bytes + 1023) >> 10));
}

Result<std::string> SshSession::SftpReadLocked(sftp_session sftp, const std::string& path,
                                               uint64_t offset, uint64_t max_bytes) {
  FilePtr f(sftp_open(sftp, path.c_str(), O_RDONLY, 0));
  Note(internal::Stat::kRoundTrips, f ? 2 : 1);  // the open (and the close when f goes)
  if (!f) return SftpError("open", path);
  if (offset > 0 && sftp_seek64(f.get(), offset) != 0) return SftpError("seek", path);
  std::string out;
  char buf[kChunk];
  while (out.size() < max_bytes) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, max_bytes - out.size()));
    ssize_t n = sftp_read(f.get(), buf, want);
    Note(internal::Stat::kRoundTrips);
    if (n < 0) return SftpError("read", path);
    if (n == 0) break;  // EOF
    out.append(buf, static_cast<size_t>(n));
    Note(internal::Stat::kPayloadIn, n);
  }
  return out;
}

Result<std::vector<DirEntry>> SshSession::SftpListLocked(sftp_session sftp, const std::string& path) {
  sftp_dir dir = sftp_opendir(sftp, path.c_str());
  Note(internal::Stat::kRoundTrips);
  if (dir == nullptr) return SftpError("opendir", path);
  std::vector<DirEntry> out;
  int64_t names = 0;  // every name the server sent, "." and ".." included
  while (true) {
    AttrPtr a(sftp_readdir(sftp, dir));
    if (!a) break;
    ++names;
    std::string name = a->name != nullptr ? a->name : "";
    if (name == "." || name == "..") continue;
    out.push_back({name, a->size, a->type == SSH_FILEXFER_TYPE_DIRECTORY});
  }
  bool clean_eof = sftp_dir_eof(dir) != 0;
  sftp_closedir(dir);
  Note(internal::Stat::kRoundTrips, SftpListRoundTrips(names) - 1);  // the opendir is counted
  if (!clean_eof) return SftpError("readdir", path);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& x, const DirEntry& y) { return x.name < y.name; });
  return out;
}

Result<FileStat> SshSession::SftpStatLocked(sftp_session sftp, const std::string& path) {
  AttrPtr a(sftp_stat(sftp, path.c_str()));
  Note(internal::Stat::kRoundTrips);
  if (!a) return SftpError("stat", path);
  FileStat st;
  st.size = a->size;
  st.is_dir = a->type == SSH_FILEXFER_TYPE_DIRECTORY;
  st.mode = a->permissions;
  st.mtime = static_cast<int64_t>(a->mtime64 != 0 ? a->mtime64 : a->mtime);
  return st;
}

// A new temp file (O_EXCL: never an existing file or a planted symlink;
// 0600 until complete), filled, chmod-ed, then renamed over the target:
// SFTP v3 rename (a link, so atomic) when nothing is at the target, else
// `mv -T` over the command channel (it replaces a symlink, refuses a
// directory). The temp file is removed on every failure after it exists.
Status SshSession::SftpWriteLocked(sftp_session sftp, const std::string& path, std::string_view data,
                                   uint32_t mode) {
  const std::string tmp = file_over_exec::TempPathFor(path, NewNonce());
  FilePtr f(sftp_open(sftp, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600));
  Note(internal::Stat::kRoundTrips);
  if (!f) return SftpError("create", tmp);
  auto fail = [&](const char* op) {
    Status s = SftpError(op, tmp);
    if (AliveLocked()) {
      sftp_unlink(sftp, tmp.c_str());
      Note(internal::Stat::kRoundTrips);
    }
    return s;
  };
  size_t off = 0;
  while (off < data.size()) {
    size_t n = std::min(kChunk, data.size() - off);
    ssize_t w = sftp_write(f.get(), data.data() + off, n);
    Note(internal::Stat::kRoundTrips);
    if (w < 0) {
      f.reset();
      Note(internal::Stat::kRoundTrips);  // the close
      return fail("write");
    }
    off += static_cast<size_t>(w);
    Note(internal::Stat::kPayloadOut, w);
  }
  Note(internal::Stat::kRoundTrips, 2);  // the close, the chmod
  if (sftp_close(f.release()) != SSH_NO_ERROR) return fail("close");
  if (sftp_chmod(sftp, tmp.c_str(), static_cast<mode_t>(mode)) != 0) return fail("chmod");
  Note(internal::Stat::kRoundTrips);
  if (sftp_rename(sftp, tmp.c_str(), path.c_str()) == 0) return Status::Ok();
  if (!AliveLocked()) return SftpError("rename", path);
  return RenameOverExecLocked(tmp, path);
}

}  // namespace npuprof::ssh
