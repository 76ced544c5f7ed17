#include "workers/handlers/service_scripts.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "statemachine/serve_argv.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::workers::service {

namespace {

// `ours PID`: true when /proc/PID/environ holds the line in $m (the marker
// "NPUPROF_SERVICE=<value>"); always true when $m is empty. One grep reads
// the environ as NUL-separated entries (-z: no `tr` and no pipe); where it
// does not find the marker (no GNU grep -z, an empty or unreadable environ)
// the old walk decides: a process that is exec'ing reads as an empty environ
// for a moment, so an empty read is polled again (up to 2 s: only a process
// started with no environment at all stays empty) before it counts as not
// ours; an unreadable one (another user's) is not ours at once. Shared by
// the scripts below (each is `sh -c SCRIPT NAME ARGS...`).
// `marked PID...`: one grep over every PID's environ at once, the ones
// holding $m kept in $marked_l; `oursq PID` then answers from that list and
// asks `ours` only for a PID not in it (so the answer is ours' own).
// `unmarked RT`: true when RT's _start.sh sets no marker (written by an
// npuprof from before markers): such a service is judged by pid alone. The
// shell reads the script's first lines itself (npuprof writes the marker on
// its fourth); grep reads the file when they do not name it (or it cannot
// be read: then, as before, the service counts as unmarked).
constexpr const char* kOursFunction = R"SH(ours() {
  [ -z "$m" ] && return 0
  LC_ALL=C grep -qszxF -e "$m" -- "/proc/$1/environ" 2>/dev/null && return 0
  ours_n=0
  while :; do
    ours_e=$(LC_ALL=C tr '\000' '\n' < "/proc/$1/environ" 2>/dev/null) || return 1
    [ -n "$ours_e" ] && break
    [ -d "/proc/$1" ] && [ "$ours_n" -lt 20 ] || return 1
    ours_n=$((ours_n+1))
    sleep 0.1
  done
  printf '%s\n' "$ours_e" | LC_ALL=C grep -qxF -e "$m"
}
marked() {
  marked_l=
  [ -n "$m" ] && [ $# -gt 0 ] || return 0
  for marked_p; do set -- "$@" "/proc/$marked_p/environ"; shift; done
  marked_l=$(LC_ALL=C grep -lszxF -e "$m" -- "$@" 2>/dev/null)
}
oursq() {
  [ -z "$m" ] && return 0
  case "
$marked_l
" in *"
/proc/$1/environ
"*) return 0 ;; esac
  ours "$1"
}
unmarked() {
  [ -n "$1" ] && [ -f "$1/_start.sh" ] || return 1
  unm_i=0
  { while [ "$unm_i" -lt 16 ]; do
      unm_l=; IFS= read -r unm_l || [ -n "$unm_l" ] || return 0
      case $unm_l in *NPUPROF_SERVICE=*) return 1 ;; esac
      unm_i=$((unm_i+1))
    done; } 2>/dev/null < "$1/_start.sh"
  ! grep -q 'NPUPROF_SERVICE=' "$1/_start.sh" 2>/dev/null
}
)SH";

// Start once (mkdir is atomic), in its own session/process group, detached,
// with the marker in its environment from the first instant; then wait up to
// 10 s for _start.sh to record its pid (looking every 10 ms: it is written
// within a few ms of the start). The logs are created 0600 first (the
// service itself keeps the caller's umask). `setsid -f` forks by itself, so
// the service is not a background job of this non-interactive shell (which
// would start it with SIGINT and SIGQUIT ignored, and a SIGINT stop during
// model loading would do nothing); the `&` form is the fallback for a setsid
// without -f (util-linux < 2.31).
constexpr const char* kStartOrAdopt = R"SH(rt=$1
NPUPROF_SERVICE=$2
export NPUPROF_SERVICE
m="NPUPROF_SERVICE=$2"
if mkdir -m 700 "$rt/.started" 2>/dev/null; then
  cd "$rt" || exit 3
  (umask 077 && : >"$rt/stdout.log" && : >"$rt/stderr.log") || exit 3
  if setsid -f true </dev/null >/dev/null 2>&1; then
    setsid -f nohup sh "$rt/_start.sh" </dev/null >"$rt/stdout.log" 2>"$rt/stderr.log"
  else
    setsid nohup sh "$rt/_start.sh" </dev/null >"$rt/stdout.log" 2>"$rt/stderr.log" &
  fi
  how=started
else
  how=adopted
fi
i=0
while [ ! -s "$rt/pid" ] && [ "$i" -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
pid=$(cat "$rt/pid" 2>/dev/null)
if unmarked "$rt"; then m=; fi
case $pid in ''|*[!0-9]*) echo "nopid $how"; exit 4;; esac
s=$(cat "/proc/$pid/stat" 2>/dev/null); s=${s##*) }; st=${s%% *}
if [ -z "$st" ] || [ "$st" = Z ]; then echo "$how $pid dead"
elif ours "$pid"; then echo "$how $pid alive"
else echo "$how $pid foreign"; fi
)SH";

// $1 status|INT|TERM|KILL, $2 pgid, $3 marker value, $4 runtime dir. The
// leader's state and the group's live members carrying the marker, from
// /proc (read with the shell's own `read`: no process per /proc entry, which
// cost ~1 ms each); a signal goes to the group only when one of them is ours.
// The markers of the leader and every member are read by one grep (`marked`);
// when the leader is gone and `kill -0` finds no process in the group at all
// ("No such process": not a refusal), /proc is not walked; where it is, one
// cat reads every /proc/PID/stat (the shell's `read` takes a byte per system
// call: 25-35 ms for 75 processes on a busy 2-core host) and the shell splits
// the lines (a stat line whose comm holds a line break is not counted, as
// before).
constexpr const char* kGroup = R"SH(act=$1 pg=$2 m="NPUPROF_SERVICE=$3" rt=$4
if unmarked "$rt"; then m=; fi
s=; { read -r s < "/proc/$pg/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
lead=
if [ -n "$st" ] && [ "$st" != Z ]; then lead=$pg; fi
mem=
case $lead$(LC_ALL=C kill -0 "-$pg" 2>&1) in
  *"No such process"*) ;;
  *)
    all=$(cat /proc/[0-9]*/stat 2>/dev/null)
    set -f; IFS='
'
    for x in $all; do
      p=${x%% *} s=${x##*) }
      IFS=' '
      set -- $s
      IFS='
'
      [ "$3" = "$pg" ] && [ "$1" != Z ] || continue
      case $p in ''|*[!0-9]*) continue ;; esac
      mem="$mem $p"
    done
    IFS=' 	
'; set +f ;;
esac
marked $lead $mem
leader=gone
if [ -n "$lead" ]; then
  if oursq "$pg"; then leader=alive; else leader=foreign; fi
fi
n=0
for p in $mem; do
  if oursq "$p"; then n=$((n+1)); fi
done
sent=no
if [ "$act" != status ] && { [ "$leader" = alive ] || [ "$n" -gt 0 ]; }; then
  kill -s "$act" -- "-$pg" 2>/dev/null || kill -s "$act" "$pg" 2>/dev/null
  sent=yes
fi
echo "leader=$leader members=$n signalled=$sent"
)SH";

// A free port for a service to listen on, picked below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a port from that range
// (what binding port 0 gives) may be taken as the local port of an outgoing
// connection before the service binds it, a minute later on a busy host,
// and the service then dies with EADDRINUSE. Up to 200 random candidates in
// the 12,000 ports below the range, each bound on every interface (as a
// listener binds it); port 0 when none is free or the range is unreadable.
// The candidates are drawn with os.urandom (a partial Fisher-Yates shuffle)
// and bound with _socket: `random` and `socket` cost the launch's command
// about 10 ms of imports on the bench machine (docs/PERFORMANCE.md run 61).
constexpr const char* kPickPort = R"PY(import _socket, os
def pick():
    lo = 0
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 0
    if lo > 2048:
        base = max(1024, lo - 12000)
        cands, k = list(range(base, lo)), min(200, lo - base)
        rnd = os.urandom(4 * k)
        for i in range(k):
            j = i + int.from_bytes(rnd[4 * i:4 * i + 4], "little") % (len(cands) - i)
            cands[i], cands[j] = cands[j], cands[i]
        for p in cands[:k]:
            s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
            try:
                s.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
                s.bind(("", p))
                return p
            except OSError:
                pass
            finally:
                s.close()
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]
)PY";

constexpr const char* kFreePort = R"PY(print(pick())
)PY";

constexpr const char* kHeadPorts = R"PY(import errno, socket, sys
api = 0
if sys.argv[2] == "1":
    for _ in range(20):
        api = pick()
        if api != int(sys.argv[1]):
            break
r = socket.socket()
r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    r.bind(("", int(sys.argv[1])))
    r.listen(1)
    print(api, "free")
except OSError as e:
    print(api, "busy:%d" % (e.errno or 0))
)PY";

// $1 runtime dir, $2 and $3 the byte counts of _serve.sh and _start.sh,
// which arrive one after the other on stdin (GNU head -c reads no more than
// it is asked for from a pipe). Written only while nothing was started.
constexpr const char* kWriteScripts = R"SH([ -e "$1/.started" ] && exit 0
(umask 077 && head -c "$2" >"$1/_serve.sh" && head -c "$3" >"$1/_start.sh" &&
 [ "$(wc -c <"$1/_serve.sh")" -eq "$2" ] && [ "$(wc -c <"$1/_start.sh")" -eq "$3" ] &&
 chmod 700 "$1/_serve.sh" "$1/_start.sh") || { echo scripts-not-written >&2; exit 7; })SH";

// $1 runtime dir, $2 attempt, $3 max bytes to print; the record on stdin.
constexpr const char* kPublishRecord = R"SH(t="$1/launch.json.tmp-$2"; f="$1/launch.json"
(umask 077 && cat >"$t") || { rm -f "$t"; exit 5; }
ln "$t" "$f" 2>/dev/null; rm -f "$t"
[ -f "$f" ] && [ ! -L "$f" ] || exit 6
head -c "$3" "$f")SH";

constexpr const char* kPublishOnce = R"SH(ln "$1" "$2" 2>/dev/null; rm -f "$1"; [ -f "$2" ] && [ ! -L "$2" ])SH";

std::vector<std::pair<std::string, std::string>> EnvList(const json& rec) {
  std::vector<std::pair<std::string, std::string>> env;
  std::string devs;
  for (const auto& d : rec.value("devices", json::array())) {
    if (!devs.empty()) devs += ",";
    devs += std::to_string(d.get<int64_t>());
  }
  env.emplace_back("ASCEND_RT_VISIBLE_DEVICES", devs);
  const json user_env = rec.value("env", json::object());
  for (const auto& [k, v] : user_env.items())
    env.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  return env;
}

// Checks for workers/remote_wait.h ($1 pid, $2 marker value, $3 runtime dir;
// $1 pgid for the second). The leader's state is read with the shell's own
// `read`; `ours` costs one grep per poll; the group check walks /proc only
// while `kill -0` still finds a process in the group.
constexpr const char* kReadySignal = R"SH(s=; { read -r s < "/proc/$1/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
if [ -z "$st" ] || [ "$st" = Z ]; then obs=leader=gone; return 0; fi
m="NPUPROF_SERVICE=$2"
if unmarked "$3"; then m=; fi
if ! ours "$1"; then
  s=; { read -r s < "/proc/$1/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
  if [ -z "$st" ] || [ "$st" = Z ]; then obs=leader=gone; else obs=leader=foreign; fi
  return 0
fi
if grep -qsF 'Application startup complete.' "$3/stderr.log" "$3/stdout.log"; then obs="leader=alive log=ready"; return 0; fi
obs="leader=alive log=starting"; return 1)SH";

constexpr const char* kGroupGone = R"SH(pg=$1
s=; { read -r s < "/proc/$pg/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
if [ -n "$st" ] && [ "$st" != Z ]; then obs=leader=alive; return 1; fi
case $(LC_ALL=C kill -0 "-$pg" 2>&1) in *"No such process"*) obs=members=0; return 0 ;; esac
n=0 all=$(cat /proc/[0-9]*/stat 2>/dev/null)
set -f; IFS='
'
for x in $all; do
  s=${x##*) }
  IFS=' '
  set -- $s
  IFS='
'
  [ "$3" = "$pg" ] && [ "$1" != Z ] && n=$((n+1))
done
IFS=' 	
'; set +f
obs="members=$n"; [ "$n" -eq 0 ])SH";

std::string WithOurs(const char* script) { return std::string(kOursFunction) + script; }

}  // namespace

std::vector<std::string> ServeArgv(const json& r) {
  sm::ServeArgvFields f;
  f.model = r.value("model", "");
  if (r.contains("served_model_name") && r["served_model_name"].is_string())
    f.served_model_name = r["served_model_name"].get<std::string>();
  if (r.contains("host") && r["host"].is_string()) f.host = r["host"].get<std::string>();
  f.port = r.contains("port") && r["port"].is_number_integer() ? r["port"].get<int64_t>() : 0;  // null on a headless node
  f.tp = r.value("tp", 1);
  f.dp = r.value("dp", 1);
  for (const auto& a : r.value("extra_args", json::array()))
    if (a.is_string()) f.extra_args.push_back(a.get<std::string>());
  if (r.contains("deployment") && r["deployment"].is_object() && r["deployment"].value("nodes", 0) > 1) {
    const json& d = r["deployment"];
    tasks::ServiceDeployment dep;
    dep.set_node(d.value("node", 0));
    dep.set_nodes(d.value("nodes", 0));
    dep.set_machine(d.value("machine", ""));
    dep.set_dp_local(d.value("dp_local", 1));
    dep.set_dp_address(d.value("dp_address", ""));
    dep.set_dp_rpc_port(d.value("dp_rpc_port", 0));
    dep.set_dp_start_rank(d.value("dp_start_rank", 0));
    dep.set_headless(d.value("headless", false));
    f.deployment = dep;
  }
  return sm::BuildServeArgv(f);
}

std::vector<std::string> ArgvToRun(const json& r) {
  std::vector<std::string> argv;
  if (r.contains("argv") && r["argv"].is_array())
    for (const auto& a : r["argv"])
      if (a.is_string()) argv.push_back(a.get<std::string>());
  return argv.empty() ? ServeArgv(r) : argv;
}

Result<std::string> ServeScript(const json& r) {
  auto body = ssh::BuildRemoteScriptChecked(r.value("env_script", ""), EnvList(r), ArgvToRun(r));
  if (!body.ok()) return body.status();
  return fmt::format("#!/bin/bash\n# npuprof: service {} of run {} (generated; every token shell-quoted)\n{}\n",
                     r.value("launch_no", 1), r.value("run_id", ""), *body);
}

Result<std::string> StartScript(const json& r) {
  const std::string rt = r.value("runtime_dir", "");
  auto marker = ServiceMarker(rt);
  if (!marker.ok()) return marker.status();
  const std::string serve_sh = rt + "/_serve.sh";
  std::string exec_line;
  if (r.contains("wrap_script") && r["wrap_script"].is_string() && r["wrap_script"] != "") {
    auto s = ssh::BuildRemoteScriptChecked(r.value("env_script", ""), {},
                                           {"bash", r["wrap_script"].get<std::string>(), serve_sh, rt});
    if (!s.ok()) return s.status();
    exec_line = *s;
  } else {
    exec_line = "exec " + ssh::BuildCommand({"bash", serve_sh});
  }
  return fmt::format("#!/bin/sh\n# npuprof: marks the service's processes (NPUPROF_SERVICE, checked before any signal),\n"
                     "# records this process group's leader pid, then runs the service\n"
                     "NPUPROF_RUN_ID={0}; NPUPROF_SERVICE={1}; export NPUPROF_RUN_ID NPUPROF_SERVICE\n"
                     "(umask 077 && echo $$ > {2}) && mv -f {2} {3}\n{4}\n",
                     ssh::ShellQuote(r.value("run_id", "")), ssh::ShellQuote(*marker),
                     ssh::ShellQuote(rt + "/pid.tmp"), ssh::ShellQuote(rt + "/pid"), exec_line);
}

Result<std::string> ServiceMarker(const std::string& runtime_dir) {
  std::string rt = runtime_dir;
  while (rt.size() > 1 && rt.back() == '/') rt.pop_back();
  const auto last = rt.rfind('/');
  const auto prev = last == std::string::npos || last == 0 ? std::string::npos : rt.rfind('/', last - 1);
  if (prev == std::string::npos)
    return Status::Invalid("runtime_dir '" + runtime_dir + "' does not end in <run_id>/service-<n>");
  const std::string run = rt.substr(prev + 1, last - prev - 1);
  const std::string svc = rt.substr(last + 1);
  // service-<n>, or service-<n>-node<i> for node i of a multi-node deployment.
  const auto digits = [](const std::string& s, size_t from, size_t to) {
    return to > from && s.find_first_not_of("0123456789", from) >= to;
  };
  bool numbered = svc.size() > 8 && svc.rfind("service-", 0) == 0;
  if (numbered) {
    const size_t node = svc.find("-node", 8);
    numbered = node == std::string::npos ? digits(svc, 8, svc.size())
                                         : digits(svc, 8, node) && digits(svc, node + 5, svc.size());
  }
  if (run.empty() || run == "." || run == ".." || !numbered)
    return Status::Invalid("runtime_dir '" + runtime_dir + "' does not end in <run_id>/service-<n>[-node<i>]");
  return run + "/" + svc;
}

std::vector<std::string> StartOrAdoptArgv(const std::string& runtime_dir, const std::string& marker) {
  return {"sh", "-c", WithOurs(kStartOrAdopt), "npuprof-start", runtime_dir, marker};
}

std::vector<std::string> WriteScriptsArgv(const std::string& runtime_dir, size_t serve_bytes, size_t start_bytes) {
  return {"sh", "-c", kWriteScripts, "npuprof-scripts", runtime_dir, std::to_string(serve_bytes),
          std::to_string(start_bytes)};
}

std::vector<std::string> WriteFileArgv(const std::string& path, const std::string& text) {
  return {"sh", "-c", "(umask 077 && printf '%s' \"$2\" >\"$1\" && chmod 700 \"$1\")", "npuprof-write", path, text};
}

std::vector<std::string> PublishRecordArgv(const std::string& runtime_dir, uint32_t attempt, size_t max_bytes) {
  return {"sh", "-c", kPublishRecord, "npuprof-publish", runtime_dir, std::to_string(attempt),
          std::to_string(max_bytes)};
}

std::vector<std::string> GroupStatusArgv(int64_t pid, const std::string& marker, const std::string& runtime_dir) {
  return {"sh", "-c", WithOurs(kGroup), "npuprof-status", "status", std::to_string(pid), marker, runtime_dir};
}

std::string GroupStatusScript() { return WithOurs(kGroup); }

std::vector<std::string> SignalGroupArgv(const std::string& signal, int64_t pgid, const std::string& marker,
                                         const std::string& runtime_dir) {
  return {"sh", "-c", WithOurs(kGroup), "npuprof-signal", signal, std::to_string(pgid), marker, runtime_dir};
}

RemoteCheck ReadySignalCheck(int64_t pid, const std::string& marker, const std::string& runtime_dir) {
  return RemoteCheck{kOursFunction, kReadySignal, {std::to_string(pid), marker, runtime_dir}};
}

RemoteCheck GroupGoneCheck(int64_t pgid) {
  return RemoteCheck{"", kGroupGone, {std::to_string(pgid)}};
}

std::vector<std::string> FreePortArgv() { return {"python3", "-S", "-c", std::string(kPickPort) + kFreePort}; }

std::vector<std::string> HeadPortsArgv(int32_t rpc_port, bool pick_api) {
  return {"python3", "-S", "-c", std::string(kPickPort) + kHeadPorts, std::to_string(rpc_port), pick_api ? "1" : "0"};
}

Result<HeadPorts> ParseHeadPorts(const std::string& out, bool pick_api) {
  const std::string shown = out.substr(0, 80);
  std::istringstream words(out.substr(0, 200));
  std::string api_text, rpc_text, extra;
  words >> api_text >> rpc_text;
  HeadPorts h;
  const auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 5 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(api_text) || (words >> extra))
    return Status::Corruption(fmt::format("the port check printed {:?}, not \"<port> free|busy:<errno>\"", shown));
  h.api = std::atoi(api_text.c_str());
  if (pick_api && (h.api <= 0 || h.api > 65535))
    return Status::Corruption(fmt::format("the port check picked no API port: {:?}", shown));
  if (rpc_text == "free") {
    h.rpc_free = true;
  } else if (rpc_text.rfind("busy:", 0) == 0 && digits(rpc_text.substr(5))) {
    h.rpc_why = rpc_text;
  } else {
    return Status::Corruption(fmt::format("the port check printed {:?}, not \"<port> free|busy:<errno>\"", shown));
  }
  return h;
}

std::vector<std::string> PublishOnceArgv(const std::string& tmp, const std::string& final_path) {
  return {"sh", "-c", kPublishOnce, "npuprof-publish", tmp, final_path};
}

Result<GroupStatus> ParseGroupStatus(const std::string& out) {
  GroupStatus g;
  const auto l = out.find("leader=");
  const auto m = out.find("members=");
  if (l == std::string::npos || m == std::string::npos)
    return Status::Corruption("unexpected process status output: " + out.substr(0, 200));
  g.leader_alive = out.compare(l + 7, 5, "alive") == 0;
  g.leader_foreign = out.compare(l + 7, 7, "foreign") == 0;
  g.members = std::atoi(out.c_str() + m + 8);
  const auto sig = out.find("signalled=");
  g.signalled = sig != std::string::npos && out.compare(sig + 10, 3, "yes") == 0;
  return g;
}

}  // namespace npuprof::workers::service
