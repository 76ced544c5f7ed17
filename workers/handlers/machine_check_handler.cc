#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workers/handlers/handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

TaskOutcome MachineCheck(const tasks::MachineCheck& payload, const proto::Task&, TaskContext& ctx) {
  const tasks::Machine& machine = payload.machine();
  auto target = TargetFromMachine(machine);
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  auto session = ctx.pool.Get(*target);
  // One round trip: uname, where each tool is (empty line when absent), and
  // whether the env script is there. An env script that fails to source
  // fails the check naming it (RunRemote: env_script_failed).
  auto run = RunRemote(*session,
                       {"sh", "-c",
                        "uname -a; for t in npu-smi msprof python3 vllm; do printf '%s=' \"$t\"; "
                        "command -v \"$t\" || echo; done; "
                        "[ -z \"$1\" ] || { [ -f \"$1\" ] && echo 'np:env_script=found' || echo 'np:env_script=missing'; }",
                        "sh", target->env_script},
                       std::chrono::seconds(30));
  if (!run.ok()) return OutcomeFromSsh(run.status(), *target);
  std::istringstream in(run->stdout_data);
  std::string line;
  json tools = json::object();
  std::string uname;
  bool env_missing = false;
  std::getline(in, uname);
  while (std::getline(in, line)) {
    if (line == "np:env_script=missing") env_missing = true;
    auto eq = line.find('=');
    if (eq == std::string::npos || line.rfind("np:", 0) == 0) continue;
    std::string path = line.substr(eq + 1);
    tools[line.substr(0, eq)] = path.empty() ? json(nullptr) : json(path);
  }
  if (env_missing) {
    std::vector<std::string> absent;
    for (const auto& tool : tools.items())
      if (tool.value().is_null()) absent.push_back(tool.key());
    return TaskOutcome::Failure(
        "env_script_missing",
        fmt::format("the env script '{}' does not exist on {}{}: fix the machine's --env-script (npuprof machine "
                    "add NAME ... --env-script PATH)",
                    target->env_script, target->Endpoint(),
                    absent.empty() ? std::string() : fmt::format(" (and {} not on PATH without it)", fmt::join(absent, ", "))),
        false);
  }
  json result = {{"uname", uname},
                 {"endpoint", target->Endpoint()},
                 {"env_script", target->env_script},
                 {"tools", tools},
                 {"npu_smi", !tools.value("npu-smi", json(nullptr)).is_null()},
                 {"msprof", !tools.value("msprof", json(nullptr)).is_null()},
                 {"python3", !tools.value("python3", json(nullptr)).is_null()}};
  if (auto fp = session->host_key_fingerprint()) result["host_key_fingerprint"] = *fp;
  NoteHostKeyAcceptance(*session, machine, result);
  TaskOutcome out = TaskOutcome::Success(result);
  out.blobs.emplace_back("machine_check.txt", run->stdout_data);  // uname and tool paths, exact bytes
  return out;
}

}  // namespace npuprof::workers
