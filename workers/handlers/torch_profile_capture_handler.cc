// torch_profile.capture_check: before a torch-profile launch, one remote
// command (after the machine's env script, like every tool command) reads
// the free disk under the runtime dir's nearest existing ancestor,
// MemAvailable, the model's layer count from its config.json, and — when
// asked — the field names of the target vLLM's ProfilerConfig. The command
// is built from argv (the paths travel as positional parameters); its output
// is read by sm::ParseCaptureProbe and judged by the run
// (statemachine/torch_profile_capture.h). Read-only: a re-dispatched
// attempt runs it again.
#include <chrono>
#include <string>
#include <vector>

#include "statemachine/torch_profile_capture.h"
#include "workers/target_means.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// $1 runtime dir (may start with "~/"), $2 model dir, $3 "1" = ask vLLM.
constexpr const char* kProbeHead = R"sh(d=$1
case $d in "~/"*) d="$HOME/${d#??}";; esac
while [ -n "$d" ] && [ "$d" != "/" ] && [ "$d" != "." ] && [ ! -e "$d" ]; do d=$(dirname -- "$d"); done
printf 'probe_dir %s\n' "$d")sh";

// Prints "layers N" (N empty when unread) and, with argv[2] == "1",
// "profiler_fields <JSON list>" or "profiler_fields_error <one line>".
constexpr const char* kProbePython = R"py(import json, sys
def layers(model):
    try:
        with open(model + "/config.json") as f:
            c = json.load(f)
    except Exception:
        return ""
    for part in (c, c.get("text_config"), c.get("llm_config")):
        v = part.get("num_hidden_layers") if isinstance(part, dict) else None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return str(v)
    return ""
print("layers " + layers(sys.argv[1]))
if sys.argv[2] == "1":
    try:
        import dataclasses
        from vllm.config import ProfilerConfig
        print("profiler_fields " + json.dumps([f.name for f in dataclasses.fields(ProfilerConfig)]))
    except Exception as e:
        print("profiler_fields_error " + (type(e).__name__ + ": " + str(e)).replace("\n", " ")[:300])
sys.stdout.flush()
)py";

std::string ProbeScript() {
  return std::string(kProbeHead) + "\n" + kMemAvailableLine + "\n" + DiskFreeLine("d") + "\n" +
         "\"${NPUPROF_PYTHON:-python3}\" -c \"$4\" \"$2\" \"$3\" 2>/dev/null || printf 'profiler_fields_error python3 could not run the "
         "check (exit %s)\\n' \"$?\"\n";
}

}  // namespace

TaskOutcome TorchProfileCaptureCheck(const tasks::TorchProfileCaptureCheck& p, const proto::Task&,
                                     TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  if (p.runtime_dir().empty() || (p.runtime_dir()[0] != '/' && p.runtime_dir().rfind("~/", 0) != 0))
    return TaskOutcome::Failure("bad_payload", "runtime_dir must be absolute or start with ~/", false);
  if (p.model().empty() || p.model()[0] != '/')
    return TaskOutcome::Failure("bad_payload", "model must be an absolute path", false);
  auto session = ctx.pool.Get(*target);
  const std::vector<std::string> argv = {"sh", "-c", ProbeScript(), "npuprof-capture-check", p.runtime_dir(),
                                         p.model(), p.profiler_fields() ? "1" : "0", kProbePython};
  auto r = RunRemote(*session, argv, std::chrono::seconds(120));
  if (!r.ok()) return OutcomeFromSsh(r.status(), *target);
  if (r->exit_status != 0)
    return TaskOutcome::Failure("capture_check_failed",
                                "the capture check command " + ExitText(*r) + ": " + TailLines(r->stderr_data, 3),
                                true);
  auto probe = sm::ParseCaptureProbe(r->stdout_data, p.profiler_fields());
  if (!probe.ok()) return TaskOutcome::Failure("capture_check_unreadable", probe.status().message(), false);
  json out = {{"probe_dir", probe->probe_dir},
              {"fields_read", probe->fields_read},
              {"profiler_fields", probe->profiler_fields},
              {"fields_error", probe->fields_error}};
  if (probe->disk_free_bytes) out["disk_free_bytes"] = *probe->disk_free_bytes;
  if (probe->mem_available_bytes) out["mem_available_bytes"] = *probe->mem_available_bytes;
  if (probe->layers) out["layers"] = *probe->layers;
  return TaskOutcome::Success(std::move(out));
}

}  // namespace npuprof::workers
