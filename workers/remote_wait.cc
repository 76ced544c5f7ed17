#include "workers/remote_wait.h"

#include <cstdlib>

#include <fmt/format.h>

#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// $1 = slice in ms, then the check's args. _w_ms reads /proc/uptime
// ("12345.67") as ms; when it cannot, the loop's summed sleeps stand in
// (_w_slept never exceeds the real elapsed time, so the slice still ends).
// A `sleep` that takes no fractions (strict POSIX) sleeps 1 s instead, so
// the loop never spins.
constexpr const char* kLoop = R"SH(
_w_ms() {
  _w_u=; { read -r _w_u _w_rest < /proc/uptime; } 2>/dev/null
  case $_w_u in
    *.[0-9][0-9]) _w_c=${_w_u#*.}; _w_c=${_w_c#0}; _w_now=$(( ${_w_u%.*} * 1000 + _w_c * 10 )) ;;
    *) _w_now= ;;
  esac
}
_w_slice=$1; shift
_w_ms; _w_t0=$_w_now
_w_n=0 _w_slept=0 _w_sleep=10 _w_how=timeout obs=
while :; do
  _w_n=$((_w_n + 1))
  if check "$@"; then _w_how=signal; break; fi
  _w_ms
  if [ -n "$_w_now" ] && [ -n "$_w_t0" ]; then _w_el=$((_w_now - _w_t0)); else _w_el=$_w_slept; fi
  [ "$_w_el" -lt "$_w_slept" ] && _w_el=$_w_slept
  [ "$_w_el" -ge "$_w_slice" ] && break
  if sleep "0.0$_w_sleep" 2>/dev/null; then _w_slept=$((_w_slept + _w_sleep)); else sleep 1; _w_slept=$((_w_slept + 1000)); fi
  _w_sleep=$((_w_sleep * 2)); [ "$_w_sleep" -gt 50 ] && _w_sleep=50
done
_w_ms
if [ -n "$_w_now" ] && [ -n "$_w_t0" ]; then _w_el=$((_w_now - _w_t0)); else _w_el=$_w_slept; fi
printf 'npuprof-wait %s polls=%s waited_ms=%s\n%s\n' "$_w_how" "$_w_n" "$_w_el" "$obs"
)SH";

constexpr const char* kFileExists = R"SH(if [ -e "$1" ]; then obs=exists; return 0; fi
obs=absent; return 1)SH";

int64_t FieldAfter(const std::string& line, const std::string& key) {
  const auto at = line.find(key);
  return at == std::string::npos ? -1 : std::atoll(line.c_str() + at + key.size());
}

}  // namespace

std::vector<std::string> RemoteWaitArgv(const RemoteCheck& check, std::chrono::milliseconds slice) {
  std::string script = check.prelude;
  if (!script.empty() && script.back() != '\n') script += '\n';
  script += "check() {\n" + check.body + "\n}" + kLoop;
  std::vector<std::string> argv = {"sh", "-c", std::move(script), "npuprof-wait",
                                   std::to_string(std::max<int64_t>(0, slice.count()))};
  argv.insert(argv.end(), check.args.begin(), check.args.end());
  return argv;
}

Result<RemoteWaitResult> ParseRemoteWait(const std::string& out) {
  const auto at = out.rfind("npuprof-wait ");
  if (at == std::string::npos || (at > 0 && out[at - 1] != '\n'))
    return Status::Corruption("the remote wait printed no summary line: " + out.substr(0, 200));
  const auto eol = out.find('\n', at);
  const std::string line = out.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
  RemoteWaitResult r;
  if (line.rfind("npuprof-wait signal ", 0) == 0) r.signalled = true;
  else if (line.rfind("npuprof-wait timeout ", 0) != 0)
    return Status::Corruption("the remote wait's summary line is not signal|timeout: " + line.substr(0, 200));
  r.polls = static_cast<int>(FieldAfter(line, "polls="));
  r.waited_ms = FieldAfter(line, "waited_ms=");
  if (eol != std::string::npos) r.observation = out.substr(eol + 1);
  while (!r.observation.empty() && r.observation.back() == '\n') r.observation.pop_back();
  return r;
}

Result<RemoteWaitResult> RunRemoteWait(ssh::SshSession& session, const RemoteCheck& check,
                                       std::chrono::milliseconds slice) {
  auto r = RunRemote(session, RemoteWaitArgv(check, slice), slice + std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  if (r->exit_status != 0)
    return Status::Io(fmt::format("the remote wait failed on the target (it {}): {}", ExitText(*r),
                                  TailLines(r->stderr_data, 3)));
  return ParseRemoteWait(r->stdout_data);
}

RemoteCheck FileExistsCheck(const std::string& path) { return RemoteCheck{"", kFileExists, {path}}; }

}  // namespace npuprof::workers
