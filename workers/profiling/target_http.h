// HTTP asked on the target (issue 42): the profiler controls, the
// workload's wave and memory-profile's inference sent by one short python3
// program run next to the service, against its loopback port, instead of
// one SSH direct-tcpip channel per connection from here. One remote
// command: one round trip for the whole exchange, however many requests
// (the direct-tcpip path costs a channel open and a request per slot).
//
// Pure: the program's argv from a plan, and its output read strictly. The
// handlers run it (workers/handlers/target_http_run.h) and keep the
// direct-tcpip path for targets where it cannot run.
//
// The program (INTERPRETER -I -S -c, or INTERPRETER -S -c when it reads the
// clock, which then imports the host's sitecustomize itself; INTERPRETER is `python3`, or the path a first exchange on that
// machine reported: target_interpreter.h;
// standard library only, Python 3.6+):
//   argv[1..]: the plan as JSON (base64 request bodies), cut into pieces of
//   at most kArgPieceBytes (one argv string may not exceed 128 KiB).
//   Its HTTP is npuprof's on-target client (target_http_client.h, the
//   readiness probe's too), not http.client (a 40 ms import); it imports
//   binascii (not base64) and threading only for more than one slot.
//   It first writes the line "npuprof-target-http 1" and flushes it, before
//   any request: output without that line means it never started (no
//   python3, or one too old to compile it), so nothing was sent and the
//   direct path may be used. Then it sends the requests, at most
//   `concurrency` at once (a connection each, to 127.0.0.1:port; each
//   socket operation waits at most timeout), in input order per slot, and
//   writes ONE line of JSON:
//     {"wall_ms": W,                      first request sent -> last answer
//      "clock": {"before_ns": B, "after_ns": A},   only when asked: the
//                                         target's clock around the requests
//      "exe": "<base64 of sys.executable>",  only when asked: the interpreter
//                                         that ran it ("" unless an absolute
//                                         path it may execute;
//                                         target_interpreter.h)
//      "results": [ {"status": S, "reason": R, "latency_ms": L,
//                    "size": N, "body": "<base64 of the first max_body bytes>"}
//                 | {"error": "<type: text, at most 300 chars>", "latency_ms": L}, ...]}
//   latency_ms: connect -> whole answer read, measured on the target. A
//   body is read to its end (counted in size) but at most kMaxBodyRead
//   bytes; beyond, the request is an error.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::profiling {

inline constexpr std::string_view kTargetHttpMagic = "npuprof-target-http 1";
// One argv string holds at most this much of the plan.
inline constexpr size_t kArgPieceBytes = 96 * 1024;
// A plan larger than this is not sent on a command line (ARG_MAX is 2 MiB
// on a default Linux, shared with the environment): the direct path then.
inline constexpr size_t kMaxPlanBytes = 1024 * 1024;
// The most the program reads of one answer (as the direct path's cap).
inline constexpr uint64_t kMaxBodyRead = uint64_t{16} << 20;
// The digest must fit a remote command's captured output (64 MiB): a plan
// whose answers, every one at max_body in base64, could pass this goes the
// direct path (a wave of 64 KiB answers: more than about 570 requests).
inline constexpr uint64_t kMaxDigestBytes = uint64_t{48} << 20;

struct TargetHttpRequest {
  std::string method = "POST";
  std::string path;          // "/start_profile", "/v1/chat/completions", ...
  std::string content_type;  // "" = no Content-Type header
  std::string body;          // bytes
};

struct TargetHttpPlan {
  int port = 0;
  int concurrency = 1;
  std::chrono::seconds timeout{60};  // per request (each socket operation)
  uint64_t max_body = kMaxBodyRead;  // bytes of each answer's body sent back
  bool clock = false;                // read the target's clock around the requests
  std::vector<TargetHttpRequest> requests;
  // Started as this ("python3", or an absolute path checked by
  // CheckInterpreterPath), and whether the program reports sys.executable.
  std::string interpreter = "python3";
  bool report_interpreter = false;
};

// The argv (INTERPRETER [-I -S] -c PROGRAM PIECE...), or nullopt when the plan is over
// kMaxPlanBytes, its digest could pass kMaxDigestBytes, it has a method
// or path with CR, LF, NUL or a space, or its interpreter is neither
// "python3" nor a path CheckInterpreterPath accepts.
std::optional<std::vector<std::string>> TargetHttpArgv(const TargetHttpPlan& plan);

// How long the whole program may run: every slot's requests one after
// another at their timeout, plus 30 s.
std::chrono::milliseconds TargetHttpDeadline(const TargetHttpPlan& plan);

struct TargetHttpAnswer {
  bool answered = false;    // an HTTP status came back
  int status = 0;
  std::string reason;
  int64_t latency_ms = 0;
  uint64_t size = 0;        // the body's whole size
  std::string body;         // its first max_body bytes
  std::string error;        // when !answered
};

struct TargetHttpDigest {
  int64_t wall_ms = 0;
  std::optional<int64_t> before_ns, after_ns;
  std::vector<TargetHttpAnswer> answers;  // one per request, in input order
  // When asked (report_interpreter): the interpreter's path, checked
  // (CheckInterpreterPath); nullopt when it reported none or one that fails
  // the check (the answers stand: the requests were sent).
  std::optional<std::string> interpreter;
};

// Reads what the program wrote (stdout, the command's exit status and its
// stderr for the message). nullopt: it never started (no magic line), the
// caller may take the direct path. Corruption (naming the part): it
// started but its digest is missing or not as described, e.g. killed at its
// deadline; its requests may have been sent.
Result<std::optional<TargetHttpDigest>> ParseTargetHttpOutput(std::string_view out, int exit_status,
                                                              std::string_view err, const TargetHttpPlan& plan);

}  // namespace npuprof::profiling
