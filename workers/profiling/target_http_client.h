// The one HTTP client of npuprof's on-target Python programs (issue 38):
// the readiness probe (workers/handlers/ready_probe.h) and the HTTP program
// (target_http.h: the profiler controls, the workload's wave, memory-
// profile's inference) both define it from this text, so there is one
// definition of how npuprof speaks HTTP on the target.
//
// It is Python source (standard library only, Python 3.6+) defining
//   npuprof_http(port, method, path, body, ctype, tmo, keep, limit)
//     -> (status, reason, first `keep` bytes of the body, the body's size)
// One HTTP/1.1 exchange with 127.0.0.1:port over a plain socket
// (`Connection: close`; Content-Type when ctype is given; Content-Length for
// a body or any method but GET/HEAD), each socket operation waiting at most
// tmo seconds. The answer's head is read line by line (a line at most 64 KiB,
// at most 256 header lines; 1xx interim answers passed over), the body by
// its Content-Length (short: an error), its chunks (joined), or to the
// close; bytes beyond `keep` are counted, not kept; a body over `limit`
// bytes is a ValueError, so is an answer that is not HTTP. It raises; the
// programs catch every exception and report it as text.
//
// Why not http.client: its import (the email package) cost each program
// about 40 ms of its start on the bench machine, 100-200 ms under load
// (docs/PERFORMANCE.md runs 56 and 59). Why `_socket` and a reader of its
// own (NpuprofReader: readline(limit) and read(n) over recv) rather than
// socket.py and makefile(): socket.py imports enum, selectors and array,
// about 5 ms of each program's start there (run 61).
#pragma once

namespace npuprof::profiling {

// The definition (ends with a newline; imports _socket itself and defines
// the class NpuprofReader beside the function).
extern const char* const kTargetHttpClientPy;

}  // namespace npuprof::profiling
