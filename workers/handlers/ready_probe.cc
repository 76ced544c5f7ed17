#include "workers/handlers/ready_probe.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "workers/handlers/service_scripts.h"
#include "workers/profiling/target_http_client.h"

namespace npuprof::workers::service {

namespace {

using nlohmann::json;

// Defined before the check (after `ours`/`unmarked` of ReadySignalCheck's
// prelude). rp_ms: /proc/uptime as ms in rp_now ("" when unreadable; then
// every 10th poll probes). rp_listening PORT: a TCP listener on PORT.
constexpr const char* kPrelude = R"SH(rp_ms() {
  rp_u=; { read -r rp_u rp_rest < /proc/uptime; } 2>/dev/null
  case $rp_u in
    *.[0-9][0-9]) rp_c=${rp_u#*.}; rp_c=${rp_c#0}; rp_now=$(( ${rp_u%.*} * 1000 + rp_c * 10 )) ;;
    *) rp_now= ;;
  esac
}
rp_listening() {
  [ -n "$rp_hex" ] || rp_hex=$(printf '%04X' "$1")
  grep -qsE "^ *[0-9]+: [0-9A-Fa-f]+:$rp_hex [0-9A-Fa-f]+:[0-9A-Fa-f]+ 0A " /proc/net/tcp /proc/net/tcp6
}
rp_last= rp_gap=100 rp_n=0 rp_np=0 rp_out=
)SH";

// $1 pid, $2 marker, $3 runtime dir, $4 port, $5 served name, $6 the probe.
constexpr const char* kCheck = R"SH(s=; { read -r s < "/proc/$1/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
if [ -z "$st" ] || [ "$st" = Z ]; then obs=leader=gone; return 0; fi
m="NPUPROF_SERVICE=$2"
if unmarked "$3"; then m=; fi
if ! ours "$1"; then
  s=; { read -r s < "/proc/$1/stat"; } 2>/dev/null; s=${s##*) }; st=${s%% *}
  if [ -z "$st" ] || [ "$st" = Z ]; then obs=leader=gone; else obs=leader=foreign; fi
  return 0
fi
if grep -qsF 'Application startup complete.' "$3/stderr.log" "$3/stdout.log"; then rp_h=log
elif rp_listening "$4"; then rp_h=port
else obs="leader=alive hint=none"; return 1; fi
rp_ms; rp_n=$((rp_n + 1))
if [ -n "$rp_out" ]; then
  if [ -n "$rp_now" ] && [ -n "$rp_last" ]; then
    [ $((rp_now - rp_last)) -lt "$rp_gap" ] && { obs="leader=alive hint=$rp_h probes=$rp_np $rp_out"; return 1; }
  elif [ $((rp_n % 10)) -ne 0 ]; then obs="leader=alive hint=$rp_h probes=$rp_np $rp_out"; return 1
  fi
  rp_gap=$((rp_gap * 2)); [ "$rp_gap" -gt 1000 ] && rp_gap=1000
fi
rp_last=$rp_now; rp_np=$((rp_np + 1))
if ! rp_p=$("${NPUPROF_PYTHON:-python3}" -I -S -c "$6" "$4" "$5" 2>/dev/null); then obs="leader=alive hint=$rp_h probes=$rp_np probe=unavailable"; return 0; fi
case $rp_p in
  'yes {'*|'no {'*) ;;
  *) obs="leader=alive hint=$rp_h probes=$rp_np probe=unavailable"; return 0 ;;
esac
rp_out="probe=$rp_p"
obs="leader=alive hint=$rp_h probes=$rp_np $rp_out"
case $rp_p in 'yes '*) return 0 ;; esac
return 1)SH";

// The probe program's argv: port, served name; it prints the probe's line.
// HTTP by npuprof's on-target client (workers/profiling/target_http_client.h,
// defined before this text), not http.client, whose import cost the probe
// that sees the service ready about 40 ms of its start on the bench machine
// (issue 38, docs/PERFORMANCE.md run 56); started with -I -S, the standard
// library only.
constexpr const char* kProbeMain = R"PY(import sys
print(npuprof_ready_probe(int(sys.argv[1]), sys.argv[2])[1])
)PY";

Status Bad(std::string_view what, std::string_view obs) {
  return Status::Corruption(fmt::format("the readiness wait's observation {:?}: {}",
                                        std::string(obs.substr(0, 200)), what));
}

Status ReadAnswers(std::string_view text, std::string_view obs, ReadyObservation& o) {
  auto doc = ParseJson(text, kMaxTargetJsonDepth);
  if (!doc.ok()) return Bad("the probe's answers are not JSON (" + doc.status().message() + ")", obs);
  const json& j = *doc;
  if (!j.is_object()) return Bad("the probe's answers are not an object", obs);
  for (const char* key : {"health", "models"})
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0 || j[key].get<int64_t>() > 999)
      return Bad(fmt::format("the probe's '{}' is not an HTTP status (0-999)", key), obs);
  if (!j.contains("ids") || !j["ids"].is_array()) return Bad("the probe's 'ids' is not a list", obs);
  if (!j.contains("error") || !j["error"].is_string()) return Bad("the probe's 'error' is not a string", obs);
  o.health = j["health"].get<int>();
  o.models_status = j["models"].get<int>();
  for (const auto& id : j["ids"]) {
    if (!id.is_string()) return Bad("an id in the probe's 'ids' is not a string", obs);
    o.ids.push_back(id.get<std::string>());
  }
  o.error = j["error"].get<std::string>();
  return Status::Ok();
}

}  // namespace

const char* const kReadyProbePy = R"PY(import json
def npuprof_ready_probe(port, served):
    r = {"health": 0, "models": 0, "ids": [], "error": ""}
    try:
        r["health"] = npuprof_http(port, "GET", "/health", b"", "", 3, 65536, 1 << 20)[0]
        if r["health"] == 200:
            st, _, body, _ = npuprof_http(port, "GET", "/v1/models", b"", "", 3, 65536, 1 << 20)
            r["models"] = st
            d = json.loads(body.decode("utf-8", "replace")) if st == 200 else None
            data = d.get("data") if isinstance(d, dict) else None
            if isinstance(data, list):
                r["ids"] = [m["id"][:1024] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)][:64]
    except Exception as e:
        r["error"] = (type(e).__name__ + ": " + str(e))[:200]
    ok = r["health"] == 200 and served in r["ids"]
    return ok, ("yes " if ok else "no ") + json.dumps(r, ensure_ascii=True, separators=(",", ":"))
)PY";

RemoteCheck ReadyProbeCheck(int64_t pid, const std::string& marker, const std::string& runtime_dir, int port,
                            const std::string& served) {
  RemoteCheck c = ReadySignalCheck(pid, marker, runtime_dir);  // its prelude: ours, unmarked
  c.prelude += kPrelude;
  c.body = kCheck;
  c.args = {std::to_string(pid), marker, runtime_dir, std::to_string(port), served,
            std::string(profiling::kTargetHttpClientPy) + kReadyProbePy + kProbeMain};
  return c;
}

Result<ReadyObservation> ParseReadyObservation(std::string_view obs) {
  ReadyObservation o;
  if (obs == "leader=gone") {
    o.leader = ReadyObservation::Leader::kGone;
    return o;
  }
  if (obs == "leader=foreign") {
    o.leader = ReadyObservation::Leader::kForeign;
    return o;
  }
  constexpr std::string_view kAlive = "leader=alive hint=";
  if (obs.substr(0, kAlive.size()) != kAlive) return Bad("it is not leader=gone|foreign|alive hint=...", obs);
  std::string_view rest = obs.substr(kAlive.size());
  const auto sp = rest.find(' ');
  o.hint = std::string(rest.substr(0, sp));
  if (o.hint == "none") {
    if (sp != std::string_view::npos) return Bad("hint=none is followed by more", obs);
    return o;
  }
  if (o.hint != "log" && o.hint != "port") return Bad("the hint is not none, log or port", obs);
  if (sp == std::string_view::npos) return Bad("a hint without the probe's answer", obs);
  rest = rest.substr(sp + 1);
  constexpr std::string_view kProbes = "probes=";
  const auto sp2 = rest.find(' ');
  const std::string_view n = rest.substr(0, sp2).substr(std::min(rest.size(), kProbes.size()));
  if (rest.substr(0, kProbes.size()) != kProbes || sp2 == std::string_view::npos || n.empty() || n.size() > 6 ||
      !std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return Bad("the hint is not followed by probes=<count> and the probe's answer", obs);
  o.probes = std::stoi(std::string(n));
  rest = rest.substr(sp2 + 1);
  if (rest == "probe=unavailable") {
    o.probe = ReadyObservation::Probe::kUnavailable;
    return o;
  }
  if (rest.substr(0, 10) == "probe=yes ") {
    o.probe_said_ready = true;
    rest = rest.substr(10);
  } else if (rest.substr(0, 9) == "probe=no ") {
    rest = rest.substr(9);
  } else {
    return Bad("the probe's answer is not probe=unavailable|yes {...}|no {...}", obs);
  }
  o.probe = ReadyObservation::Probe::kAnswered;
  if (Status s = ReadAnswers(rest, obs, o); !s.ok()) return s;
  return o;
}

bool ProbeSaysReady(const ReadyObservation& o, const std::string& served) {
  return o.leader == ReadyObservation::Leader::kAlive && o.probe == ReadyObservation::Probe::kAnswered &&
         o.health == 200 && o.models_status == 200 && std::find(o.ids.begin(), o.ids.end(), served) != o.ids.end();
}

std::string DescribeObservation(const ReadyObservation& o, const std::string& served) {
  if (o.leader != ReadyObservation::Leader::kAlive) return "the service's leader is gone";
  if (o.probe == ReadyObservation::Probe::kNone)
    return "no sign of readiness yet (no start-up line in its logs, no listener on its port)";
  if (o.probe == ReadyObservation::Probe::kUnavailable) return "the probe on the target could not run (python3)";
  if (ProbeSaysReady(o, served)) return "ready";
  if (o.health == 0) return "/health: " + (o.error.empty() ? std::string("no answer") : o.error);
  if (o.health != 200) return fmt::format("/health answered {}", o.health);
  if (o.models_status == 0) return "/v1/models: " + (o.error.empty() ? std::string("no answer") : o.error);
  return fmt::format("/v1/models answered {} without '{}' (lists {})", o.models_status, served, json(o.ids).dump());
}

}  // namespace npuprof::workers::service
