#include "workers/handlers/ready_watch.h"

#include <algorithm>

#include "workers/handlers/ready_probe.h"
#include "workers/profiling/target_http_client.h"

namespace npuprof::workers::service {

namespace {

// argv: slice ms, pid, marker, runtime dir, port, served name. After the
// client's and the probe's definitions (target_http_client.h, ready_probe.h).
constexpr const char* kWatch = R"PY(import json, sys, time
slice_ms, pid, marker, rt, port, served = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
t0 = time.monotonic()
LINE = b"Application startup complete."
HEX = "%04X" % port
def el():
    return int((time.monotonic() - t0) * 1000)
def alive():
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return False
    s = s[s.rfind(b")") + 2:]
    return len(s) > 0 and s[:1] != b"Z"
def unmarked():
    try:
        with open(rt + "/_start.sh", "rb") as f:
            return b"NPUPROF_SERVICE=" not in f.read(1 << 20)
    except OSError:
        return False
want = ("NPUPROF_SERVICE=" + marker).encode("utf-8", "surrogateescape")
def ours():
    if unmarked():
        return True
    for _ in range(21):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                e = f.read()
        except OSError:
            return False
        if e:
            return want in e.split(b"\0")
        if not alive():
            return False
        time.sleep(0.1)
    return False
seen = {}
def logged():
    for name in ("stderr.log", "stdout.log"):
        p = rt + "/" + name
        at = seen.get(name, 0)
        try:
            with open(p, "rb") as f:
                f.seek(0, 2)
                if f.tell() < at:
                    at = 0
                f.seek(max(0, at - len(LINE) + 1))
                carry = b""
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    b = carry + b
                    if LINE in b:
                        return True
                    carry = b[1 - len(LINE):]
                seen[name] = f.tell()
        except OSError:
            continue
    return False
def listening():
    for t in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(t) as f:
                for line in f:
                    w = line.split()
                    if len(w) > 3 and w[3] == "0A" and w[1].upper().endswith(":" + HEX):
                        return True
        except OSError:
            pass
    return False
def probe():
    return npuprof_ready_probe(port, served)
def check(st):
    if not alive():
        return True, "leader=gone"
    if not ours():
        return True, "leader=gone" if not alive() else "leader=foreign"
    if st["log"] or logged():
        st["log"] = True
        h = "log"
    elif listening():
        h = "port"
    else:
        return False, "leader=alive hint=none"
    if st["out"]:
        if el() - st["last"] < st["gap"]:
            return False, "leader=alive hint=%s probes=%d probe=%s" % (h, st["np"], st["out"])
        st["gap"] = min(st["gap"] * 2, 1000)
    st["last"] = el()
    st["np"] += 1
    ok, st["out"] = probe()
    return ok, "leader=alive hint=%s probes=%d probe=%s" % (h, st["np"], st["out"])
st = {"log": False, "out": "", "last": 0, "gap": 100, "np": 0}
n, nap, how, obs = 0, 0.005, "timeout", ""
while True:
    n += 1
    done, obs = check(st)
    if done:
        how = "signal"
        break
    if el() >= slice_ms:
        break
    time.sleep(nap)
    nap = min(nap * 2, 0.01)
sys.stdout.write("npuprof-wait %s polls=%d waited_ms=%d\n%s\n" % (how, n, el(), obs))
)PY";

}  // namespace

std::vector<std::string> ReadyWatchArgv(int64_t pid, const std::string& marker, const std::string& runtime_dir,
                                        int port, const std::string& served, std::chrono::milliseconds slice) {
  // Started as "python3": the remote-command layer runs the machine's
  // resolved interpreter (workers/profiling/interpreter_command.h).
  return {"python3",
          "-I",
          "-S",
          "-c",
          std::string(profiling::kTargetHttpClientPy) + kReadyProbePy + kWatch,
          std::to_string(std::max<int64_t>(0, slice.count())),
          std::to_string(pid),
          marker,
          runtime_dir,
          std::to_string(port),
          served};
}

}  // namespace npuprof::workers::service
