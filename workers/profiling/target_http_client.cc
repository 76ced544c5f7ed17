#include "workers/profiling/target_http_client.h"

namespace npuprof::profiling {

const char* const kTargetHttpClientPy = R"PY(import _socket
class NpuprofReader:
    def __init__(self, s):
        self.s, self.b = s, bytearray()
    def fill(self):
        d = self.s.recv(65536)
        self.b.extend(d)
        return len(d) > 0
    def readline(self, limit):
        while True:
            i = self.b.find(b"\n", 0, limit)
            if i >= 0:
                n = i + 1
                break
            if len(self.b) >= limit or not self.fill():
                n = min(limit, len(self.b))
                break
        out = bytes(self.b[:n])
        del self.b[:n]
        return out
    def read(self, n):
        if not self.b and not self.fill():
            return b""
        out = bytes(self.b[:n])
        del self.b[:n]
        return out
def npuprof_http(port, method, path, body, ctype, tmo, keep, limit):
    c = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        c.settimeout(tmo)
        c.connect(("127.0.0.1", port))
        h = ("%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\nAccept-Encoding: identity\r\n"
             "Connection: close\r\n" % (method, path, port))
        if ctype:
            h += "Content-Type: %s\r\n" % ctype
        if body or method not in ("GET", "HEAD"):
            h += "Content-Length: %d\r\n" % len(body)
        c.sendall(h.encode("latin-1") + b"\r\n" + body)
        f = NpuprofReader(c)
        status = 100
        while 100 <= status < 200:
            line = f.readline(65537)
            w = line.split(None, 2)
            if len(w) < 2 or not w[0].startswith(b"HTTP/") or not w[1].isdigit() or len(w[1]) != 3:
                raise ValueError("not an HTTP answer: %r" % line[:40])
            status = int(w[1])
            reason = w[2].strip().decode("latin-1") if len(w) > 2 else ""
            length, chunked, n = None, False, 0
            while True:
                hl = f.readline(65537)
                if not hl.strip():
                    break
                n += 1
                if n > 256 or not hl.endswith(b"\n"):
                    raise ValueError("the answer's head is too long")
                k, _, v = hl.partition(b":")
                k, v = k.strip().lower(), v.strip()
                if k == b"content-length" and v.isdigit():
                    length = int(v)
                elif k == b"transfer-encoding" and b"chunked" in v.lower():
                    chunked = True
        out, size = bytearray(), 0
        def got(b, size):
            size += len(b)
            if size > limit:
                raise ValueError("the answer is larger than %d bytes" % limit)
            if len(out) < keep:
                out.extend(b[:keep - len(out)])
            return size
        if method == "HEAD" or status in (204, 304):
            pass
        elif chunked:
            while True:
                sl = f.readline(1024)
                if not sl:
                    raise ValueError("the answer ended before its last chunk")
                n = int(sl.split(b";")[0].strip() or b"0", 16)
                if n <= 0:
                    break
                while n > 0:
                    b = f.read(min(n, 65536))
                    if not b:
                        raise ValueError("the answer ended inside a chunk")
                    n -= len(b)
                    size = got(b, size)
                f.readline(1024)
        else:
            left = length
            while left is None or left > 0:
                b = f.read(65536 if left is None else min(left, 65536))
                if not b:
                    if left is not None:
                        raise ValueError("the answer ended after %d of its %d bytes" % (size, length))
                    break
                if left is not None:
                    left -= len(b)
                size = got(b, size)
        return status, reason, bytes(out), size
    finally:
        c.close()
)PY";

}  // namespace npuprof::profiling
