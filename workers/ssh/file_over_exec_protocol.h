// Files over the command channel (pure: scripts in, parsed results out; no
// I/O). SshSession uses these when a connection's sshd refuses the SFTP
// subsystem (minimal containers, hardened hosts, dropbear without
// sftp-server), so ReadFile / ListDir / Stat / WriteFile give the same
// results and the same error kinds on such a target.
//
// Every operation is one POSIX-sh script run as `sh -c SCRIPT sh ARGS...`
// (argv built with BuildCommand, so paths may hold any byte but NUL) with
// LC_ALL=C. Tools it needs on the target's PATH (all in GNU coreutils and
// findutils, present on every mainstream Linux):
//
//   read   cat (whole file), head -c (a prefix), tail -c +N (from an offset)
//   stat   stat -L -c '%s %f %Y'
//   list   find -H DIR -mindepth 1 -maxdepth 1 -printf '%y %s %f\0'
//          (GNU find: one NUL-terminated record per entry, so a name may
//          hold any byte; lstat data, so a symlink is never followed)
//   write  cat, chmod, mv -f -T, rm (data on stdin)
//
// A tool that is missing ends the script with status 127 and a line naming
// it, reported as kToolMissing (a retry cannot help). Semantics match the
// SFTP path: read and stat follow symlinks (as SFTP open/stat do), the
// listing does not (as SFTP readdir does), and a write goes to a new temp
// file (created exclusively, mode 0600 until complete, then chmod) renamed
// over the target with `mv -T`, which replaces a symlink at the target
// instead of following it and refuses a directory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh::file_over_exec {

// Exit statuses of the scripts besides 0 (127: a tool is missing).
inline constexpr int kExitNotFound = 70;    // nothing at the path (or the parent dir, for a write)
inline constexpr int kExitDenied = 71;      // not readable / not searchable
inline constexpr int kExitWrongType = 72;   // a directory where a file is read, or the reverse
inline constexpr int kExitTempExists = 73;  // the write's temp name was taken
inline constexpr int kExitFailed = 74;      // the write or the rename failed (stderr says why)
inline constexpr int kExitToolMissing = 127;

// `path` made safe to hand to tools as an operand: relative paths get a
// leading "./" (so a name starting with '-' is never an option).
std::string OperandPath(const std::string& path);

// The temp name a write of `path` uses: `.<name>.npuprof-<nonce>.tmp` in the
// same directory (the name part cut to 64 bytes so it stays a legal name).
std::string TempPathFor(const std::string& path, std::string_view nonce);

// argv for each operation (run it with BuildCommand).
// max_bytes == UINT64_MAX: to the end of the file.
std::vector<std::string> ReadArgv(const std::string& path, uint64_t offset, uint64_t max_bytes);
std::vector<std::string> StatArgv(const std::string& path);
std::vector<std::string> ListArgv(const std::string& path);
// The data goes on stdin. Creates `tmp` (TempPathFor), fills it, chmods it
// to `mode`, renames it over `path`; removes it on any failure after creating it.
std::vector<std::string> WriteArgv(const std::string& path, const std::string& tmp, uint32_t mode);
// Renames `tmp` over `path` (mv -f -T); removes `tmp` if that fails.
std::vector<std::string> RenameArgv(const std::string& tmp, const std::string& path);

// Parses the stat script's "SIZE HEXMODE MTIME\n".
Result<FileStat> ParseStat(std::string_view out);
// Parses the list script's NUL-terminated "TYPE SIZE NAME" records; sorted
// by name (byte order), "." and ".." never appear.
Result<std::vector<DirEntry>> ParseListing(std::string_view out);

// What a script's non-zero exit means, as the SFTP path would report it.
struct ScriptFailure {
  SshErrorKind kind = SshErrorKind::kRemoteError;
  Code code = Code::kIoError;
  std::string detail;  // "no such file", "permission denied", the tool's own words...
};
ScriptFailure FailureOf(int exit_status, std::string_view stderr_text);

}  // namespace npuprof::ssh::file_over_exec
