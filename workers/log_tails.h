// The tails (or heads and tails) of a few remote files in one remote command, where reading each
// over SFTP costs a stat, an open, the reads and a close (about four round
// trips a file). The command is built from argv with the one quoting
// routine (the paths travel as positional parameters); its output is read
// here, purely, and a caller that cannot use it falls back to the file
// operations.
//
// Output of LogTailsArgv(max, {p0, p1, ...}): the line "npuprof-tails",
// then one line per path in order: "<i> ok <base64 of its last max bytes>",
// "<i> missing" (no regular file there) or "<i> unreadable". base64 keeps
// the bytes as they are (logs are bytes, not text) and each line
// self-delimited. ParseLogTails accepts exactly that and nothing else:
// every index once and in order, decoded tails of at most max bytes; a
// missing or unreadable file is an empty tail, as ReadTail gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace npuprof::workers {

std::vector<std::string> LogTailsArgv(uint64_t max_bytes, const std::vector<std::string>& paths);

// The output a command with `files` paths and `max_bytes` may print at most
// (the cap to read it with).
size_t LogTailsOutputCap(uint64_t max_bytes, size_t files);

Result<std::vector<std::string>> ParseLogTails(const std::string& out, size_t files, uint64_t max_bytes);

// Head and tail, as ReadHeadTail (workers/remote.h) reads one file: a file
// of at most cap bytes whole, a larger one as its first cap/2 and last
// cap - cap/2 bytes. Output of HeadTailsArgv(cap, {p0, ...}): the line
// "npuprof-headtails", then per path "<i> ok <size> <base64 head>
// <base64 tail>" (the tail empty for a whole file), "<i> missing" or
// "<i> unreadable".
struct HeadTail {
  bool found = false;  // missing and unreadable files are not found
  uint64_t size = 0;   // the file's size when its head was read
  std::string head, tail;
};
std::vector<std::string> HeadTailsArgv(uint64_t cap, const std::vector<std::string>& paths);
size_t HeadTailsOutputCap(uint64_t cap, size_t files);
Result<std::vector<HeadTail>> ParseHeadTails(const std::string& out, size_t files, uint64_t cap);

}  // namespace npuprof::workers
