// The clock exchange protocol (pure: text in, text out; no I/O).
//
// Measuring a machine's clock with a `date +%s%N` per round trip starts
// processes on the target (the command shell's `head -c`, a subshell, `date`)
// between receiving the request and reading the clock, and almost nothing
// after it: on a loaded host the read lands late in the round trip and the
// offset comes out tens of ms high. The exchange instead opens ONE exec
// channel running a small loop, started once, that answers each request line
// with one line holding its clock, read by a builtin or an interpreter that
// is already running:
//
//   python  `python3 -Sc` (time.time_ns(), nanoseconds)  first: an Ascend
//           machine has python3 (the toolkit, vLLM), and it reads nanoseconds;
//           -S skips site-packages (the loop needs none; their .pth files
//           were most of the interpreter's start-up), and the loop imports
//           the host's sitecustomize itself when there is one
//   bash    bash's $EPOCHREALTIME (bash >= 5; "S.UUUUUU", the separator
//           follows the locale: '.' or ',')
//   date    `date +%s%N` per line: a process per sample, the last resort
//
// The loop runs under the user's login shell like any exec channel, after the
// machine's env script (sourced as BuildRemoteScript's prefix does, so the
// same python3 and `date` answer as for every other command). Once running it
// writes "\n<ready nonce> <method>\n" to stdout (anything an rc file printed
// before it is skipped); then, for every line it reads, one line: the clock
// (digits, or digits, '.' or ',', digits for bash). It ends at EOF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::ssh {

enum class ClockMethod { kAuto, kPython, kBash, kDate };
// "auto", "python", "bash", "date".
const char* ClockMethodName(ClockMethod m);

// A reply line longer than this (without its '\n') is refused.
inline constexpr size_t kClockReplyMaxBytes = 64;
// At most this much may come before the ready line (rc-file noise).
inline constexpr size_t kClockPreambleMaxBytes = 64 * 1024;

// One exchange, on the worker's wall clock: the request was written at t0_us,
// the reply read complete at t1_us; the machine read remote_ns in between.
struct ClockSample {
  int64_t t0_us = 0;
  int64_t remote_ns = 0;
  int64_t t1_us = 0;
  ClockMethod method = ClockMethod::kAuto;
};

// The remote command (a POSIX sh script for the login shell). env_script: the
// machine's, sourced first when it exists (empty: none). prefer = kAuto tries
// python, bash, date in that order; another method is the only one tried (a
// target without it makes the script fail, naming it on stderr).
std::string ClockExchangeScript(std::string_view ready_nonce, ClockMethod prefer,
                                std::string_view env_script = {});

struct ClockReady {
  ClockMethod method = ClockMethod::kAuto;
  size_t end = 0;  // index just past the ready line: the first reply starts here
};
// Finds "\n<ready_nonce> <method>\n" in what the loop printed first. nullopt
// until it is complete; an unknown method after the nonce is an error.
Result<std::optional<ClockReady>> FindClockReady(std::string_view out, std::string_view ready_nonce);

// A reply line (without its '\n'; a trailing '\r' is allowed) as nanoseconds
// since the epoch. Digits are nanoseconds; for bash, "S.F" or "S,F" with 1..9
// fraction digits. Anything else, or more than kClockReplyMaxBytes, is an
// error that shows what came back (non-printable bytes escaped).
Result<int64_t> ParseClockReply(std::string_view line, ClockMethod method);

// What a set of samples says about the machine's clock: the sample with the
// shortest round trip (the least queueing on either side), offset = remote -
// (t0 + t1) / 2, to within half its round trip.
struct ClockEstimate {
  double offset_ms = 0;
  double rtt_ms = 0;
  double uncertainty_ms = 0;
  ClockMethod method = ClockMethod::kAuto;
};
std::optional<ClockEstimate> BestClockEstimate(const std::vector<ClockSample>& samples);

// Bytes from the target shown in an error: printable ASCII kept, every other
// byte as \xHH, at most max_bytes of the input (then "...").
std::string ShowReplyBytes(std::string_view bytes, size_t max_bytes = kClockReplyMaxBytes);

}  // namespace npuprof::ssh
