#include "workers/handlers/stop_in_one.h"

#include <fmt/format.h>

#include "common/split_lines.h"
#include "workers/handlers/service_scripts.h"
#include "workers/log_tails.h"
#include "workers/profiling/interpreter_command.h"
#include "workers/remote_wait.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::workers::service {

namespace {

// After `gonecheck() { GroupGoneCheck's body }`: $1 the group script, $2 the
// tails script, $3 the tails' max bytes, $4 pid, $5 marker value, $6 the
// runtime dir, $7 the budget (ms of waiting), $8 N, $9 the exit wait ("" for
// none: a snippet run with "$1" the pid and "$2" the most ms to wait, exit 0
// when the pid exited, 4 when the time ran out), then N steps "SIG:wait_ms",
// then the check's argv. The time comes from /proc/uptime
// (the shell's `read`), or from the summed sleeps where it cannot be read,
// as workers/remote_wait.h's loop does.
//
// The first step's signal goes before the dir check when the leader is
// alive and its environment holds the marker (one grep): every path of
// service.stop with a known pid sends it then, whatever the check says, so
// only its moment moves; its record is printed where the ladder's first
// signal record would be (before an early "live" end too, so that the
// handler replays it rather than signalling again). Its members count is
// the group's, marker-checked, right after the signal. The group and tails
// scripts run in a subshell of this one (no new shell started). While the
// leader is alive and the caller gave an exit wait ($9), the wait blocks in
// it until the leader exits (pidfd: an exit to a zombie counts, which a
// kill(pid, 0) poll such as `tail --pid` does not see) or the next look is
// due (at most 1 s); without one, or where it fails, or without a readable
// /proc/uptime, it naps as before.
constexpr const char* kStop = R"SH(
grp=$1 tails=$2 tmax=$3 pid=$4 marker=$5 rt=$6 budget=$7 ns=$8 xw=$9; shift 9
steps=
while [ "$ns" -gt 0 ]; do steps="$steps $1"; shift; ns=$((ns-1)); done
early= said=
case $pid in ''|0|*[!0-9]*) ;; *)
  first=${steps# }; first=${first%% *}; esig=${first%%:*}
  if [ -n "$esig" ] && [ -n "$marker" ]; then
    s=; { read -r s < "/proc/$pid/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
    if [ -n "$st" ] && [ "$st" != Z ] &&
       LC_ALL=C grep -qszxF -e "NPUPROF_SERVICE=$marker" -- "/proc/$pid/environ" 2>/dev/null; then
      kill -s "$esig" -- "-$pid" 2>/dev/null || kill -s "$esig" "$pid" 2>/dev/null
      early=$esig
    fi
  fi ;;
esac
say_early() {
  [ -n "$early" ] && [ -z "$said" ] || return 0
  said=1
  gs=$(set -- status "$pid" "$marker" ""; eval "$grp")
  n=${gs#*members=}; n=${n%% *}
  case $n in ''|*[!0-9]*) n=0 ;; esac
  echo "npuprof-stop-signal $early 0 leader=alive members=$n signalled=yes"
}
out=$("$@"); rc=$?
echo "npuprof-stop-dir $rc"
[ -n "$out" ] && printf '%s\n' "$out"
fin() { say_early; echo "npuprof-stop-end $1"; exit 0; }
logs() { echo "npuprof-stop-end ladder"; (set -- "$tmax" "$rt/stderr.log" "$rt/stdout.log"; eval "$tails"); exit 0; }
[ "$rc" -eq 0 ] || fin live
case "
$out
" in *"
dir ok
"*) ;; *) fin live ;; esac
case "
$out
" in *"
entry absent - .started
"*) fin live ;; esac
case $pid in ''|0|*[!0-9]*) fin live ;; esac
_ms() {
  _u=; { read -r _u _r < /proc/uptime; } 2>/dev/null
  case $_u in
    *.[0-9][0-9]) _c=${_u#*.}; _c=${_c#0}; now=$(( ${_u%.*} * 1000 + _c * 10 )) ;;
    *) now= ;;
  esac
}
slept=0 noblock= tz=
[ -n "$xw" ] || noblock=1
_ms; t0=$now
el() { _ms; if [ -n "$now" ] && [ -n "$t0" ]; then e=$((now - t0)); else e=$slept; fi; [ "$e" -lt "$slept" ] && e=$slept; }
nap() {
  if sleep "0.0$z" 2>/dev/null; then slept=$((slept + z)); else sleep 1; slept=$((slept + 1000)); fi
  z=$((z * 2)); [ "$z" -gt 50 ] && z=50
}
block() {
  t=$((w - (e - s0))); u=$((1000 - (e - q))); [ "$u" -lt "$t" ] && t=$u
  u=$((budget - e)); [ "$u" -lt "$t" ] && t=$u
  [ "$t" -lt 10 ] && t=10
  (set -- "$pid" "$t"; eval "$xw") </dev/null >/dev/null 2>&1
  case $? in 0) tz=1 ;; 4) ;; *) noblock=1 ;; esac
}
alive() { case "$gs" in *leader=alive*|*members=[1-9]*) return 0 ;; esac; return 1; }
for step in $steps; do
  sig=${step%%:*} w=${step#*:}
  el; [ "$e" -lt "$budget" ] || fin budget
  if [ -n "$early" ] && [ -z "$said" ]; then
    say_early
  else
    gs=$(set -- "$sig" "$pid" "$marker" "$rt"; eval "$grp"); src=$?
    printf 'npuprof-stop-signal %s %s %s\n' "$sig" "$src" "$gs"
    [ "$src" -eq 0 ] || fin failed
    case "$gs" in *signalled=yes*) ;; *) logs ;; esac
  fi
  el; s0=$e; q=$e; z=10; res=
  while :; do
    if gonecheck "$pid"; then res=gone; break; fi
    if [ -n "$tz" ] && [ "$obs" = leader=alive ]; then noblock=1; fi
    tz=
    el
    if [ $((e - s0)) -ge "$w" ] || [ $((e - q)) -ge 1000 ]; then
      gs=$(set -- status "$pid" "$marker" "$rt"; eval "$grp") || { res=failed; break; }
      q=$e
      if ! alive; then res=gone; break; fi
      if [ $((e - s0)) -ge "$w" ]; then res=alive; break; fi
    fi
    if [ "$e" -ge "$budget" ]; then res=pending; break; fi
    if [ "$obs" = leader=alive ] && [ -z "$noblock" ] && [ -n "$now" ]; then block; else nap; fi
  done
  el
  printf 'npuprof-stop-wait %s %s %s\n' "$sig" "$res" "$((e - s0))"
  case $res in gone) logs ;; pending) fin budget ;; failed) fin failed ;; esac
done
fin ladder
)SH";

constexpr uint64_t kRecordsBytes = 64 << 10;

// The exit wait: $1 pid, $2 ms. A pidfd is readable once the process has
// exited (a zombie included); no pidfd (Python < 3.9, Linux < 5.3): exit 3.
constexpr const char* kExitWait = R"PY(import os, select, sys
try:
    fd = os.pidfd_open(int(sys.argv[1]))
except ProcessLookupError:
    sys.exit(0)
except (AttributeError, OSError, ValueError):
    sys.exit(3)
r, _, _ = select.select([fd], [], [], int(sys.argv[2]) / 1000.0)
sys.exit(0 if r else 4)
)PY";

bool Digits(std::string_view t, size_t max = 9) {
  return !t.empty() && t.size() <= max && t.find_first_not_of("0123456789") == std::string_view::npos;
}

// Splits "a b rest..." into n words and the rest (which may hold spaces).
std::vector<std::string_view> Words(std::string_view line, size_t n) {
  std::vector<std::string_view> w;
  while (w.size() + 1 < n) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) break;
    w.push_back(line.substr(0, sp));
    line.remove_prefix(sp + 1);
  }
  w.push_back(line);
  return w;
}

Status Bad(std::string_view line, std::string_view why) {
  return Status::Corruption(
      fmt::format("the one-command stop printed {:?}: {}", std::string(line.substr(0, 120)), why));
}

}  // namespace

std::vector<std::string> StopInOneArgv(const std::vector<std::string>& runtime_dir_argv, int64_t pid,
                                       const std::string& marker, const std::string& runtime_dir,
                                       const std::vector<StopStep>& steps, std::chrono::milliseconds budget,
                                       uint64_t tail_max_bytes, bool exit_wait) {
  const std::string script = "gonecheck() {\n" + GroupGoneCheck(pid).body + "\n}" + kStop;
  std::vector<std::string> argv = {"sh",
                                   "-c",
                                   script,
                                   "npuprof-stop",
                                   GroupStatusScript(),
                                   LogTailsArgv(tail_max_bytes, {"x", "y"}).at(2),
                                   std::to_string(tail_max_bytes),
                                   std::to_string(std::max<int64_t>(0, pid)),
                                   marker,
                                   runtime_dir,
                                   std::to_string(std::max<int64_t>(0, budget.count())),
                                   std::to_string(steps.size()),
                                   exit_wait ? std::string(profiling::kPythonRef) + " -I -S -c " +
                                                   ssh::ShellQuote(kExitWait) + " \"$1\" \"$2\""
                                             : std::string()};
  for (const StopStep& s : steps) argv.push_back(fmt::format("{}:{}", s.signal, std::max<int64_t>(0, s.wait_ms)));
  argv.insert(argv.end(), runtime_dir_argv.begin(), runtime_dir_argv.end());
  return argv;
}

size_t StopInOneOutputCap(uint64_t tail_max_bytes) { return kRecordsBytes + LogTailsOutputCap(tail_max_bytes, 2); }

Result<StopFold> ParseStopInOne(const std::string& out, const std::vector<StopStep>& steps) {
  StopFold f;
  const size_t at = out.rfind("npuprof-stop-dir ", 0) == 0 ? 0 : out.find("\nnpuprof-stop-dir ");
  if (at == std::string::npos) return Status::Corruption("the one-command stop printed no npuprof-stop-dir line");
  const std::string_view body = std::string_view(out).substr(at == 0 ? 0 : at + 1);
  const std::vector<std::string_view> lines = SplitLines(body);
  size_t i = 0;
  {
    const auto w = Words(lines[0], 2);
    if (w.size() != 2 || !Digits(w[1], 3)) return Bad(lines[0], "not \"npuprof-stop-dir <status>\"");
    f.dir_exit = std::stoi(std::string(w[1]));
  }
  for (i = 1; i < lines.size() && lines[i].rfind("npuprof-stop-", 0) != 0; ++i)
    f.dir_report += std::string(lines[i]) + "\n";
  bool waited_last = true;  // the next record may be a step's signal
  for (; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.rfind("npuprof-stop-signal ", 0) == 0) {
      const auto w = Words(line, 4);
      const size_t k = f.steps.size();
      if (!waited_last || k >= steps.size()) return Bad(line, "a signal the ladder does not send here");
      if (w.size() < 3 || w[1] != steps[k].signal || !Digits(w[2], 3))
        return Bad(line, fmt::format("not \"npuprof-stop-signal {} <status> <line>\"", steps[k].signal));
      StopSignalRecord r{std::string(w[1]), std::stoi(std::string(w[2])), w.size() > 3 ? std::string(w[3]) : ""};
      f.steps.emplace_back(std::move(r), std::nullopt);
      waited_last = false;
    } else if (line.rfind("npuprof-stop-wait ", 0) == 0) {
      const auto w = Words(line, 4);
      if (waited_last || f.steps.empty()) return Bad(line, "a wait without its signal");
      const std::string& sig = f.steps.back().first.signal;
      if (w.size() != 4 || w[1] != sig || !Digits(w[3], 12) ||
          (w[2] != "gone" && w[2] != "alive" && w[2] != "pending" && w[2] != "failed"))
        return Bad(line, fmt::format("not \"npuprof-stop-wait {} gone|alive|pending|failed <ms>\"", sig));
      f.steps.back().second = StopWaitRecord{sig, std::string(w[2]), std::stoll(std::string(w[3]))};
      waited_last = w[2] == "alive";
    } else if (line.rfind("npuprof-stop-end ", 0) == 0) {
      const std::string_view end = line.substr(17);
      if (end != "live" && end != "budget" && end != "ladder" && end != "failed")
        return Bad(line, "not \"npuprof-stop-end live|budget|ladder|failed\"");
      f.end = std::string(end);
      if (i + 1 < lines.size()) {
        const size_t rest = static_cast<size_t>(lines[i + 1].data() - body.data());
        f.tails = std::string(body.substr(rest));
      }
      return f;
    } else {
      return Bad(line, "not a record of the stop");
    }
  }
  return Status::Corruption("the one-command stop printed no npuprof-stop-end line (cut short?)");
}

}  // namespace npuprof::workers::service
