#include "workers/ssh/clock_exchange_protocol.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "workers/ssh/env_script_protocol.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh {
namespace {

// The python loop: argv[1] is the ready nonce. Started with -S (no site:
// the loop needs sys and time only, and the site-packages' .pth files cost
// an interpreter most of its start-up: 50 of 70 ms of CPU on the bench
// machine's); the host's sitecustomize, if it has one, is still imported,
// so the loop reads the clock every other program of the host reads.
constexpr std::string_view kPythonLoop =
    "import sys, time\n"
    "try:\n"
    "    import sitecustomize\n"
    "except Exception:\n"
    "    pass\n"
    "now = getattr(time, 'time_ns', None) or (lambda: int(time.time() * 1e9))\n"
    "i, o = sys.stdin.buffer, sys.stdout.buffer\n"
    "o.write(('\\n%s python\\n' % sys.argv[1]).encode()); o.flush()\n"
    "while i.readline():\n"
    "    o.write(b'%d\\n' % now()); o.flush()\n";

// The bash loop: $1 is the ready nonce; read and printf are builtins.
constexpr std::string_view kBashLoop =
    "printf '\\n%s bash\\n' \"$1\"; while IFS= read -r _; do printf '%s\\n' \"$EPOCHREALTIME\"; done";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllDigits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit); }

// Digits as a non-negative int64; nullopt past its range.
std::optional<int64_t> Digits(std::string_view s) {
  int64_t v = 0;
  for (char c : s) {
    const int d = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace

const char* ClockMethodName(ClockMethod m) {
  switch (m) {
    case ClockMethod::kAuto: return "auto";
    case ClockMethod::kPython: return "python";
    case ClockMethod::kBash: return "bash";
    case ClockMethod::kDate: return "date";
  }
  return "auto";
}

std::string ClockExchangeScript(std::string_view ready_nonce, ClockMethod prefer, std::string_view env_script) {
  std::string s = env_script.empty() ? std::string() : EnvScriptPrefix(env_script);
  s += fmt::format("__np_r={}; __np_m={}; __np_py={}; __np_sh={}\n", ShellQuote(ready_nonce),
                   ClockMethodName(prefer), ShellQuote(kPythonLoop), ShellQuote(kBashLoop));
  s +=
      "case $__np_m in auto|python) if command -v python3 >/dev/null 2>&1; then "
      "exec python3 -Sc \"$__np_py\" \"$__np_r\"; fi;; esac\n"
      "case $__np_m in auto|bash) if command -v bash >/dev/null 2>&1 && "
      "bash -c '[ -n \"${EPOCHREALTIME-}\" ]' </dev/null >/dev/null 2>&1; then "
      "exec bash -c \"$__np_sh\" npuprof-clock \"$__np_r\"; fi;; esac\n"
      "case $__np_m in auto|date) printf '\\n%s date\\n' \"$__np_r\"; "
      "while IFS= read -r __np_l; do date +%s%N || exit 1; done; exit 0;; esac\n"
      "echo \"npuprof clock exchange: no $__np_m clock reader on this machine\" >&2; exit 127\n";
  return s;
}

Result<std::optional<ClockReady>> FindClockReady(std::string_view out, std::string_view ready_nonce) {
  const std::string key = fmt::format("\n{} ", ready_nonce);
  const size_t at = out.find(key);
  if (at == std::string_view::npos) return std::optional<ClockReady>();
  const size_t name_at = at + key.size();
  const size_t nl = out.find('\n', name_at);
  if (nl == std::string_view::npos) {
    if (out.size() - name_at > 16) {
      return Status::Invalid(fmt::format("the clock exchange's ready line names no method: '{}'",
                                         ShowReplyBytes(out.substr(name_at))));
    }
    return std::optional<ClockReady>();
  }
  const std::string_view name = out.substr(name_at, nl - name_at);
  for (ClockMethod m : {ClockMethod::kPython, ClockMethod::kBash, ClockMethod::kDate}) {
    if (name == ClockMethodName(m)) return std::optional<ClockReady>(ClockReady{m, nl + 1});
  }
  return Status::Invalid(fmt::format("the clock exchange's ready line names an unknown method '{}' "
                                     "(expected python, bash or date)",
                                     ShowReplyBytes(name)));
}

Result<int64_t> ParseClockReply(std::string_view line, ClockMethod method) {
  if (line.size() > kClockReplyMaxBytes) {
    return Status::Invalid(fmt::format("the clock reply of {} is longer than {} bytes: '{}'", ClockMethodName(method),
                                       kClockReplyMaxBytes, ShowReplyBytes(line)));
  }
  std::string_view t = line;
  if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
  auto bad = [&](std::string_view expected) {
    return Status::Invalid(fmt::format("the clock reply of {} is not {}: '{}'", ClockMethodName(method), expected,
                                       ShowReplyBytes(line)));
  };
  if (method == ClockMethod::kBash) {
    const size_t sep = t.find_first_of(".,");
    if (sep == std::string_view::npos) return bad("seconds.microseconds");
    const std::string_view sec = t.substr(0, sep), frac = t.substr(sep + 1);
    if (!AllDigits(sec) || sec.size() > 10 || !AllDigits(frac) || frac.size() > 9) {
      return bad("seconds.microseconds");
    }
    const int64_t s = *Digits(sec);
    int64_t f = *Digits(frac);
    for (size_t k = frac.size(); k < 9; ++k) f *= 10;
    return s * 1000000000 + f;
  }
  if (!AllDigits(t) || t.size() > 19) return bad("nanoseconds since the epoch");
  const auto v = Digits(t);
  if (!v) return bad("nanoseconds since the epoch");
  return *v;
}

std::optional<ClockEstimate> BestClockEstimate(const std::vector<ClockSample>& samples) {
  std::optional<ClockEstimate> best;
  for (const ClockSample& s : samples) {
    if (s.t1_us < s.t0_us) continue;
    const double rtt_ms = static_cast<double>(s.t1_us - s.t0_us) / 1000.0;
    if (best && rtt_ms >= best->rtt_ms) continue;
    // In integer ns: (t0 + t1) / 2 µs is exactly (t0 + t1) * 500 ns.
    const int64_t offset_ns = s.remote_ns - (s.t0_us + s.t1_us) * 500;
    ClockEstimate e;
    e.rtt_ms = rtt_ms;
    e.uncertainty_ms = rtt_ms / 2.0;
    e.offset_ms = static_cast<double>(offset_ns) / 1e6;
    e.method = s.method;
    best = e;
  }
  return best;
}

std::string ShowReplyBytes(std::string_view bytes, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (bytes.size() > max_bytes) out += "...";
  return out;
}

}  // namespace npuprof::ssh
