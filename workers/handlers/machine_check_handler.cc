#include <sstream>

#include <fmt/format.h>

#include "workers/handlers/handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

TaskOutcome MachineCheck(const tasks::MachineCheck& payload, const proto::Task&, TaskContext& ctx) {
  const tasks::Machine& machine = payload.machine();
  auto target = TargetFromMachine(machine);
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  auto session = ctx.pool.Get(*target);
  // One round trip: uname, then where each tool is (empty line when absent).
  auto run = RunRemote(*session,
                       {"sh", "-c",
                        "uname -a; for t in npu-smi msprof python3 vllm; do printf '%s=' \"$t\"; "
                        "command -v \"$t\" || echo; done"},
                       std::chrono::seconds(30));
  if (!run.ok()) return OutcomeFromSsh(run.status(), *target);
  std::istringstream in(run->stdout_data);
  std::string line;
  json tools = json::object();
  std::string uname;
  std::getline(in, uname);
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string path = line.substr(eq + 1);
    tools[line.substr(0, eq)] = path.empty() ? json(nullptr) : json(path);
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
