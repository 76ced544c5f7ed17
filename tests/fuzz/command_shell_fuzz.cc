// The command shell protocol's scanners and framing on any bytes. The first
// byte picks a nonce length (1..32); the next bytes, mapped to hex digits,
// are the nonce; the rest is what the driver's stdout (and stderr) carried.
// Promises: a stdout marker is "\n<nonce>:<status>\n" with status 0..255,
// no longer than MaxMarkerSize, and the first one in the output; scanning a
// growing buffer from (previous size - MaxMarkerSize) finds what a scan from
// 0 finds (SshSession re-scans that way); the stderr marker likewise; a ready
// line names a positive pid; a frame announces its payload's exact size and
// the payload ends in "\n<nonce>".
#include <charconv>

#include "tests/fuzz/fuzz_targets.h"
#include "workers/ssh/command_shell_protocol.h"

namespace npuprof::fuzz {
namespace {

using ssh::FindStderrMarker;
using ssh::FindStdoutMarker;
using ssh::MaxMarkerSize;

bool SameMarker(const std::optional<ssh::StdoutMarker>& a, const std::optional<ssh::StdoutMarker>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->begin == b->begin && a->end == b->end && a->exit_status == b->exit_status);
}

void CheckStdout(std::string_view out, const std::string& nonce) {
  const auto m = FindStdoutMarker(out, nonce);
  if (m) {
    const std::string head = "\n" + nonce + ":";
    FUZZ_CHECK(m->begin < m->end && m->end <= out.size(), "marker [{}, {}) in {} bytes", m->begin, m->end,
               out.size());
    FUZZ_CHECK(out.substr(m->begin).starts_with(head) && out[m->end - 1] == '\n', "not a marker at {}", m->begin);
    FUZZ_CHECK(m->exit_status >= 0 && m->exit_status <= 255, "exit status {}", m->exit_status);
    const std::string_view digits = out.substr(m->begin + head.size(), m->end - 1 - m->begin - head.size());
    int value = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    FUZZ_CHECK(ec == std::errc() && end == digits.data() + digits.size() && value == m->exit_status,
               "status '{}' read as {}", digits, m->exit_status);
    FUZZ_CHECK(m->end - m->begin <= MaxMarkerSize(nonce), "a {}-byte marker, MaxMarkerSize {}", m->end - m->begin,
               MaxMarkerSize(nonce));
    FUZZ_CHECK(!FindStdoutMarker(out.substr(0, m->end - 1), nonce), "not the first marker");
  }
  // The output arrived in two reads, cut anywhere: the re-scan finds the same.
  const size_t back = MaxMarkerSize(nonce);
  for (size_t cut : {out.size() / 2, out.size() / 3, out.size() - std::min<size_t>(out.size(), 3)}) {
    if (FindStdoutMarker(out.substr(0, cut), nonce)) continue;
    const size_t from = cut > back ? cut - back : 0;
    FUZZ_CHECK(SameMarker(FindStdoutMarker(out, nonce, from), m), "the re-scan from {} (cut {}) differs", from,
               cut);
    if (FindStderrMarker(out.substr(0, cut), nonce)) continue;
    FUZZ_CHECK(FindStderrMarker(out, nonce, from) == FindStderrMarker(out, nonce),
               "the stderr re-scan from {} (cut {}) differs", from, cut);
  }
  if (const auto at = FindStderrMarker(out, nonce)) {
    FUZZ_CHECK(out.substr(*at).starts_with("\n" + nonce + "\n"), "not a stderr marker at {}", *at);
  }
}

}  // namespace

int FuzzCommandShell(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t nonce_size = std::min<size_t>(1 + data[0] % 32, size - 1);
  if (nonce_size == 0) return 0;
  std::string nonce;
  for (size_t i = 1; i <= nonce_size; ++i) nonce.push_back("0123456789abcdef"[data[i] % 16]);
  const std::string_view out = AsText(data + 1 + nonce_size, size - 1 - nonce_size);

  CheckStdout(out, nonce);
  if (const auto pid = ssh::FindShellReady(out, nonce)) {
    FUZZ_CHECK(*pid > 0, "ready with pid {}", *pid);
  }

  const std::string command(out.substr(0, out.find('\0')));
  const std::string frame = ssh::CommandShellFrame(command, nonce);
  const size_t nl = frame.find('\n');
  const std::string payload = frame.substr(nl + 1);
  FUZZ_CHECK(frame.substr(0, nl) == std::to_string(payload.size()) + " " + nonce, "frame header '{}'",
             frame.substr(0, nl));
  FUZZ_CHECK(payload == command + "\n" + nonce, "the payload is not command + \\n + nonce");
  return 0;
}

}  // namespace npuprof::fuzz
