#include "workers/ssh/file_over_exec_protocol.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace npuprof::ssh::file_over_exec {
namespace {

// Shared start of every script: C locale (messages the parser may read),
// and `need TOOL...`, which ends the script with 127 naming a missing tool.
constexpr std::string_view kPrologue =
    "LC_ALL=C; export LC_ALL\n"
    "need() { for __np_t; do command -v \"$__np_t\" >/dev/null 2>&1 || {\n"
    "  printf 'npuprof: the target has no %s on PATH\\n' \"$__np_t\" >&2; exit 127; }; done; }\n";

// $1 file, $2 "" or 1-based start byte, $3 "" or max bytes.
constexpr std::string_view kRead =
    "f=$1\n"
    "[ -e \"$f\" ] || exit 70\n"
    "[ -d \"$f\" ] && exit 72\n"
    "[ -r \"$f\" ] || exit 71\n"
    "if [ -z \"$2\" ]; then\n"
    "  if [ -z \"$3\" ]; then need cat; exec cat -- \"$f\"; fi\n"
    "  need head; exec head -c \"$3\" -- \"$f\"\n"
    "fi\n"
    "need tail head\n"
    "if [ -z \"$3\" ]; then exec tail -c \"+$2\" -- \"$f\"; fi\n"
    "tail -c \"+$2\" -- \"$f\" | head -c \"$3\"\n";

// $1 path (followed, as SFTP stat does).
constexpr std::string_view kStat =
    "[ -e \"$1\" ] || exit 70\n"
    "need stat\n"
    "exec stat -L -c '%s %f %Y' -- \"$1\"\n";

// $1 directory (followed if a symlink, as SFTP opendir does; entries are not).
constexpr std::string_view kList =
    "d=$1\n"
    "[ -e \"$d\" ] || exit 70\n"
    "[ -d \"$d\" ] || exit 72\n"
    "{ [ -r \"$d\" ] && [ -x \"$d\" ]; } || exit 71\n"
    "need find\n"
    "exec find -H \"$d\" -mindepth 1 -maxdepth 1 -printf '%y %s %f\\0'\n";

// $1 target, $2 temp (same directory, a fresh random name), $3 octal mode;
// the data on stdin. The temp file is created exclusively (noclobber) under
// umask 077, so nobody else can read it before it is complete.
constexpr std::string_view kWrite =
    "p=$1 t=$2\n"
    "[ -d \"${t%/*}/\" ] || exit 70\n"
    "need cat chmod mv rm\n"
    "{ [ -e \"$t\" ] || [ -L \"$t\" ]; } && exit 73\n"
    "umask 077\n"
    "(set -C; : > \"$t\") 2>/dev/null || { echo \"npuprof: cannot create $t\" >&2; exit 73; }\n"
    "cat > \"$t\" || { rm -f -- \"$t\"; exit 74; }\n"
    "chmod \"$3\" -- \"$t\" || { rm -f -- \"$t\"; exit 74; }\n"
    "mv -f -T -- \"$t\" \"$p\" || { rm -f -- \"$t\"; exit 74; }\n";

// $1 temp, $2 target.
constexpr std::string_view kRename =
    "need mv rm\n"
    "mv -f -T -- \"$1\" \"$2\" || { rm -f -- \"$1\"; exit 74; }\n";

std::vector<std::string> ScriptArgv(std::string_view body, std::vector<std::string> args) {
  std::vector<std::string> argv = {"sh", "-c", std::string(kPrologue) + std::string(body), "sh"};
  for (auto& a : args) argv.push_back(std::move(a));
  return argv;
}

template <typename T>
bool ParseNumber(std::string_view text, T* out, int base = 10) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return ec == std::errc() && p == text.data() + text.size();
}

// The first line of a tool's stderr, for an error message.
std::string FirstLine(std::string_view err) {
  while (!err.empty() && (err.front() == '\n' || err.front() == ' ')) err.remove_prefix(1);
  const size_t nl = err.find('\n');
  std::string line(err.substr(0, std::min<size_t>(nl, 300)));
  return line.empty() ? std::string("no message") : line;
}

}  // namespace

std::string OperandPath(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.rfind("./", 0) == 0) return path;
  return "./" + path;
}

std::string TempPathFor(const std::string& path, std::string_view nonce) {
  const std::string p = OperandPath(path);
  const size_t slash = p.rfind('/');
  const std::string dir = p.substr(0, slash + 1);  // "" cannot happen: OperandPath adds "./"
  std::string name = p.substr(slash + 1);
  if (name.size() > 64) name.resize(64);
  return fmt::format("{}.{}.npuprof-{}.tmp", dir, name, nonce);
}

std::vector<std::string> ReadArgv(const std::string& path, uint64_t offset, uint64_t max_bytes) {
  const std::string from = offset == 0 ? "" : fmt::format("{}", offset + 1);  // tail -c +N is 1-based
  const std::string max =
      max_bytes == std::numeric_limits<uint64_t>::max() ? "" : fmt::format("{}", max_bytes);
  return ScriptArgv(kRead, {OperandPath(path), from, max});
}

std::vector<std::string> StatArgv(const std::string& path) {
  return ScriptArgv(kStat, {OperandPath(path)});
}

std::vector<std::string> ListArgv(const std::string& path) {
  return ScriptArgv(kList, {OperandPath(path)});
}

std::vector<std::string> WriteArgv(const std::string& path, const std::string& tmp, uint32_t mode) {
  return ScriptArgv(kWrite, {OperandPath(path), OperandPath(tmp), fmt::format("{:o}", mode & 07777)});
}

std::vector<std::string> RenameArgv(const std::string& tmp, const std::string& path) {
  return ScriptArgv(kRename, {OperandPath(tmp), OperandPath(path)});
}

Result<FileStat> ParseStat(std::string_view out) {
  while (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  const size_t a = out.find(' ');
  const size_t b = a == std::string_view::npos ? a : out.find(' ', a + 1);
  FileStat st;
  uint64_t mode = 0;
  if (b == std::string_view::npos || !ParseNumber(out.substr(0, a), &st.size) ||
      !ParseNumber(out.substr(a + 1, b - a - 1), &mode, 16) || mode > 0xffffffffu ||
      !ParseNumber(out.substr(b + 1), &st.mtime)) {
    return Status::Corruption(
        fmt::format("stat printed '{}', not 'SIZE HEXMODE MTIME'", out.substr(0, 80)));
  }
  st.mode = static_cast<uint32_t>(mode);
  st.is_dir = (st.mode & 0170000) == 0040000;
  return st;
}

Result<std::vector<DirEntry>> ParseListing(std::string_view out) {
  std::vector<DirEntry> entries;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\0', pos);
    if (end == std::string_view::npos) {
      return Status::Corruption(
          fmt::format("directory listing cut short after {} entries", entries.size()));
    }
    std::string_view rec = out.substr(pos, end - pos);
    pos = end + 1;
    // "T SIZE NAME": the type is one letter, the name everything after the second space.
    const size_t sp = rec.size() > 2 && rec[1] == ' ' ? rec.find(' ', 2) : std::string_view::npos;
    DirEntry e;
    if (sp == std::string_view::npos || !ParseNumber(rec.substr(2, sp - 2), &e.size) ||
        sp + 1 >= rec.size()) {
      return Status::Corruption(
          fmt::format("bad directory listing record after {} entries", entries.size()));
    }
    e.name = std::string(rec.substr(sp + 1));
    if (e.name == "." || e.name == ".." || e.name.find('/') != std::string::npos) {
      return Status::Corruption(
          fmt::format("bad name in directory listing after {} entries", entries.size()));
    }
    e.is_dir = rec[0] == 'd';
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const DirEntry& x, const DirEntry& y) { return x.name < y.name; });
  return entries;
}

ScriptFailure FailureOf(int exit_status, std::string_view stderr_text) {
  switch (exit_status) {
    case kExitNotFound:
      return {SshErrorKind::kRemoteError, Code::kNotFound, "no such file"};
    case kExitDenied:
      return {SshErrorKind::kRemoteError, Code::kPermissionDenied, "permission denied"};
    case kExitWrongType:
      return {SshErrorKind::kRemoteError, Code::kIoError, "is a directory (or, for a listing, not one)"};
    case kExitTempExists:
      return {SshErrorKind::kRemoteError, Code::kIoError,
              "the temp file name was already taken: " + FirstLine(stderr_text)};
    case 126:
    case kExitToolMissing:
      return {SshErrorKind::kToolMissing, Code::kFailedPrecondition,
              FirstLine(stderr_text) +
                  "; without SFTP, npuprof moves files with sh, cat, head, tail, stat, find, chmod, "
                  "mv and rm: install coreutils and findutils on the target, or enable its sshd's "
                  "sftp subsystem"};
    default:
      return {SshErrorKind::kRemoteError, Code::kIoError,
              fmt::format("exit {}: {}", exit_status, FirstLine(stderr_text))};
  }
}

}  // namespace npuprof::ssh::file_over_exec
