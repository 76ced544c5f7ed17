#include "workers/handlers/service_scripts.h"

#include <sstream>

#include <fmt/format.h>

#include "workers/ssh/shell_quote.h"

namespace npuprof::workers::service {

namespace {

// Start once (mkdir is atomic), in its own session/process group, detached;
// then wait up to 10 s for _start.sh to record its pid. `setsid -f` forks by
// itself, so the service is not a background job of this non-interactive
// shell (which would start it with SIGINT and SIGQUIT ignored, and a SIGINT
// stop during model loading would do nothing); the `&` form is the fallback
// for a setsid without -f (util-linux < 2.31).
constexpr const char* kStartOrAdopt = R"SH(rt=$1
if mkdir "$rt/.started" 2>/dev/null; then
  cd "$rt" || exit 3
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
while [ ! -s "$rt/pid" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if [ ! -s "$rt/pid" ]; then echo "nopid $how"; exit 4; fi
pid=$(cat "$rt/pid")
s=$(cat "/proc/$pid/stat" 2>/dev/null); s=${s##*) }; st=${s%% *}
if [ -n "$st" ] && [ "$st" != Z ]; then echo "$how $pid alive"; else echo "$how $pid dead"; fi
)SH";

// Leader state and live (non-zombie) members of process group $1, from /proc.
constexpr const char* kGroupStatus = R"SH(pg=$1
s=$(cat "/proc/$pg/stat" 2>/dev/null); s=${s##*) }; st=${s%% *}
leader=gone
if [ -n "$st" ] && [ "$st" != Z ]; then leader=alive; fi
n=0
for f in /proc/[0-9]*/stat; do
  s=$(cat "$f" 2>/dev/null) || continue
  s=${s##*) }
  set -- $s
  if [ "$3" = "$pg" ] && [ "$1" != Z ]; then n=$((n+1)); fi
done
echo "leader=$leader members=$n"
)SH";

constexpr const char* kSignalGroup = R"SH(kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "$2" 2>/dev/null; exit 0)SH";

constexpr const char* kFreePort = R"PY(import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
)PY";

constexpr const char* kPublishOnce = R"SH(mkdir -p "$1" && ln "$2" "$3" 2>/dev/null; rm -f "$2"; [ -f "$3" ])SH";

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

}  // namespace

std::vector<std::string> ServeArgv(const json& r) {
  std::vector<std::string> argv = {"vllm", "serve", r.value("model", ""), "--host", "0.0.0.0",
                                   "--port", std::to_string(r.value("port", 0))};
  if (r.contains("served_model_name") && r["served_model_name"].is_string() && r["served_model_name"] != "") {
    argv.push_back("--served-model-name");
    argv.push_back(r["served_model_name"]);
  }
  argv.push_back("--tensor-parallel-size");
  argv.push_back(std::to_string(r.value("tp", 1)));
  if (r.value("dp", 1) > 1) {
    argv.push_back("--data-parallel-size");
    argv.push_back(std::to_string(r.value("dp", 1)));
  }
  for (const auto& a : r.value("extra_args", json::array())) argv.push_back(a.get<std::string>());
  return argv;
}

Result<std::string> ServeScript(const json& r) {
  auto body = ssh::BuildRemoteScriptChecked(r.value("env_script", ""), EnvList(r), ServeArgv(r));
  if (!body.ok()) return body.status();
  return fmt::format("#!/bin/bash\n# npuprof: service {} of run {} (generated; every token shell-quoted)\n{}\n",
                     r.value("launch_no", 1), r.value("run_id", ""), *body);
}

Result<std::string> StartScript(const json& r) {
  const std::string rt = r.value("runtime_dir", "");
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
  return fmt::format("#!/bin/sh\n# npuprof: records this process group's leader pid, then runs the service\n"
                     "echo $$ > {0} && mv -f {0} {1}\n{2}\n",
                     ssh::ShellQuote(rt + "/pid.tmp"), ssh::ShellQuote(rt + "/pid"), exec_line);
}

std::vector<std::string> StartOrAdoptArgv(const std::string& runtime_dir) {
  return {"sh", "-c", kStartOrAdopt, "npuprof-start", runtime_dir};
}

std::vector<std::string> GroupStatusArgv(int64_t pid) {
  return {"sh", "-c", kGroupStatus, "npuprof-status", std::to_string(pid)};
}

std::vector<std::string> SignalGroupArgv(const std::string& signal, int64_t pgid) {
  return {"sh", "-c", kSignalGroup, "npuprof-signal", signal, std::to_string(pgid)};
}

std::vector<std::string> FreePortArgv() { return {"python3", "-c", kFreePort}; }

std::vector<std::string> PublishOnceArgv(const std::string& runtime_dir, const std::string& tmp,
                                         const std::string& final_path) {
  return {"sh", "-c", kPublishOnce, "npuprof-publish", runtime_dir, tmp, final_path};
}

Result<GroupStatus> ParseGroupStatus(const std::string& out) {
  GroupStatus g;
  const auto l = out.find("leader=");
  const auto m = out.find("members=");
  if (l == std::string::npos || m == std::string::npos)
    return Status::Corruption("unexpected process status output: " + out.substr(0, 200));
  g.leader_alive = out.compare(l + 7, 5, "alive") == 0;
  g.members = std::atoi(out.c_str() + m + 8);
  return g;
}

}  // namespace npuprof::workers::service
