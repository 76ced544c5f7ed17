// What the service.* handlers run on the target, built without I/O so it can
// be tested: the vLLM argv, the runtime dir's _serve.sh and _start.sh, and the
// constant helper scripts (user values only ever travel as their positional
// arguments, quoted by workers/ssh/shell_quote.h).
//
// Runtime dir layout (<runtime_base>/<run_id>/service-<n>/):
//   launch.json   the launch record (devices, port, argv), first writer wins
//   _serve.sh     env script sourced, ASCEND_RT_VISIBLE_DEVICES + env exported, exec vllm serve ...
//   _start.sh     records its own pid in `pid`, then execs _serve.sh (or the wrap script)
//   .started      created (mkdir, atomic) by the one launch that starts the service
//   pid           pid of the service's process group leader (written by _start.sh)
//   stdout.log, stderr.log
// The service runs with the runtime dir as its working directory, so relative
// paths in its arguments (e.g. torch_profiler_dir "./vllm_profile") land there.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::workers::service {

using json = nlohmann::json;

// `vllm serve <model> --host 0.0.0.0 --port <p> [--served-model-name N]
//  --tensor-parallel-size tp [--data-parallel-size dp] <extra...>`
std::vector<std::string> ServeArgv(const json& launch_record);

// _serve.sh for the launch record (fields: env_script, devices, env, argv).
// Fails only on an invalid env name (validated earlier; checked again here).
Result<std::string> ServeScript(const json& launch_record);

// _start.sh: pid file, then `exec bash _serve.sh` or `exec bash WRAP _serve.sh RUNTIME`
// (the env script is sourced first when wrapping, so the wrapper finds its tools).
Result<std::string> StartScript(const json& launch_record);

// argv that starts the service once per runtime dir, or adopts it:
// prints "started PID alive|dead", "adopted PID alive|dead" or "nopid started|adopted".
std::vector<std::string> StartOrAdoptArgv(const std::string& runtime_dir);

// argv printing "leader=alive|gone members=N" for a process group led by pid
// (zombies count as gone).
std::vector<std::string> GroupStatusArgv(int64_t pid);

// argv sending signal (INT, TERM, KILL) to the process group pgid.
std::vector<std::string> SignalGroupArgv(const std::string& signal, int64_t pgid);

// argv printing a free TCP port on the target (python3 binds port 0).
std::vector<std::string> FreePortArgv();

// argv creating the runtime dir and publishing tmp as final unless final exists
// (hard link: the first writer wins); prints nothing.
std::vector<std::string> PublishOnceArgv(const std::string& runtime_dir, const std::string& tmp,
                                         const std::string& final_path);

struct GroupStatus {
  bool leader_alive = false;
  int members = 0;
  bool any_alive() const { return leader_alive || members > 0; }
};
// Parses GroupStatusArgv's output.
Result<GroupStatus> ParseGroupStatus(const std::string& out);

}  // namespace npuprof::workers::service
