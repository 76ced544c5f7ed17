// SshSession file operations over the command channel, for a connection
// whose sshd refused the SFTP subsystem (scripts and semantics:
// file_over_exec_protocol.h). Reads go through the command shell (byte-exact
// output); a write needs stdin, so it gets an exec channel of its own.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "workers/ssh/file_over_exec_protocol.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

namespace fx = file_over_exec;

// A minute, plus a second per MiB moved (a slow link still finishes).
std::chrono::milliseconds FileOpTimeout(uint64_t bytes) {
  const uint64_t mib = std::min<uint64_t>(bytes >> 20, 24 * 3600);
  return std::chrono::seconds(60) + std::chrono::seconds(static_cast<int64_t>(mib));
}

size_t CapFor(uint64_t max_bytes) {
  if (max_bytes >= std::numeric_limits<size_t>::max() - OutputCap::kMinCap) {
    return std::numeric_limits<size_t>::max();
  }
  return static_cast<size_t>(max_bytes) + OutputCap::kMinCap;
}

}  // namespace

Result<ExecResult> SshSession::RunFileScriptLocked(const char* op, const std::string& path,
                                                   const std::vector<std::string>& argv,
                                                   std::string_view stdin_data, size_t output_cap) {
  const uint64_t moved = std::max<uint64_t>(
      stdin_data.size(), output_cap == std::numeric_limits<size_t>::max() ? uint64_t{0} : output_cap);
  auto r = ExecLocked(BuildCommand(argv), FileOpTimeout(moved), stdin_data, output_cap);
  if (!r.ok() || (r->exit_status == 0 && !r->timed_out)) return r;
  const std::string where =
      fmt::format("{} '{}' on {} (over the command channel: no sftp)", op, path, target_.Endpoint());
  if (r->timed_out) return Fail(SshErrorKind::kTimeout, Code::kTimeout, where + ": did not finish in time");
  const fx::ScriptFailure f = fx::FailureOf(r->exit_status, r->stderr_data);
  return Fail(f.kind, f.code, fmt::format("{}: {}", where, f.detail));
}

Result<std::string> SshSession::ReadOverExecLocked(const std::string& path, uint64_t offset,
                                                   uint64_t max_bytes) {
  if (max_bytes == 0) {  // nothing to read; the file must still exist
    auto st = StatOverExecLocked(path);
    if (!st.ok()) return st.status();
    return std::string();
  }
  auto r = RunFileScriptLocked("read", path, fx::ReadArgv(path, offset, max_bytes), {}, CapFor(max_bytes));
  if (!r.ok()) return r.status();
  if (r->stdout_omitted > 0 || r->stdout_data.size() > max_bytes) {
    return Fail(SshErrorKind::kRemoteError, Code::kCorruption,
                fmt::format("read '{}' on {} returned more than the {} bytes asked for", path,
                            target_.Endpoint(), max_bytes));
  }
  return std::move(r->stdout_data);
}

Result<FileStat> SshSession::StatOverExecLocked(const std::string& path) {
  auto r = RunFileScriptLocked("stat", path, fx::StatArgv(path), {}, OutputCap::kMinCap);
  if (!r.ok()) return r.status();
  auto st = fx::ParseStat(r->stdout_data);
  if (!st.ok()) {
    return Fail(SshErrorKind::kRemoteError, Code::kCorruption,
                fmt::format("stat '{}' on {}: {}", path, target_.Endpoint(), st.status().message()));
  }
  return st;
}

Result<std::vector<DirEntry>> SshSession::ListOverExecLocked(const std::string& path) {
  auto r = RunFileScriptLocked("list", path, fx::ListArgv(path), {}, kExecOutputCap);
  if (!r.ok()) return r.status();
  if (r->stdout_omitted > 0) {
    return Fail(SshErrorKind::kRemoteError, Code::kIoError,
                fmt::format("the listing of '{}' on {} is larger than the {}-byte output cap", path,
                            target_.Endpoint(), kExecOutputCap));
  }
  auto entries = fx::ParseListing(r->stdout_data);
  if (!entries.ok()) {
    return Fail(SshErrorKind::kRemoteError, Code::kCorruption,
                fmt::format("list '{}' on {}: {}", path, target_.Endpoint(), entries.status().message()));
  }
  return entries;
}

Status SshSession::WriteOverExecLocked(const std::string& path, std::string_view data, uint32_t mode) {
  const std::string tmp = fx::TempPathFor(path, NewNonce());
  auto r = RunFileScriptLocked("write", path, fx::WriteArgv(path, tmp, mode), data, OutputCap::kMinCap);
  return r.ok() ? Status::Ok() : r.status();
}

Status SshSession::RenameOverExecLocked(const std::string& tmp, const std::string& path) {
  auto r = RunFileScriptLocked("rename over", path, fx::RenameArgv(tmp, path), {}, OutputCap::kMinCap);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace npuprof::ssh
