// memory.preflight: msprof present and answering --help, a Python with
// torch_npu, and the msprof wrap script written on the target.
#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "workers/handlers/preflight_tools.h"
#include "workers/handlers/service_common.h"
#include "workers/handlers/service_scripts.h"
#include "workers/ssh/shell_quote.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

std::string MsprofWrapScript(int mem_freq_hz) {
  return fmt::format(R"(#!/bin/bash
# npuprof msprof wrap script: runs a vLLM service under msprof so that
# component memory (HCCL, RUNTIME, SLOG, ...) is recorded.
# Usage: bash msprof_wrap.sh <_serve.sh> <runtime dir>
# Output: <runtime dir>/msprof_data/PROF_*  (export later: msprof --export=on)
set -u
serve_sh="$1"
runtime_dir="$2"
mkdir -p "$runtime_dir/msprof_data"
exec msprof --output="$runtime_dir/msprof_data" --sys-hardware-mem=on --sys-hardware-mem-freq={} \
  --task-time=off --ai-core=off --ascendcl=off --application="bash $serve_sh"
)",
                     mem_freq_hz);
}

namespace {

// The checks one command at a time: for a target where the one command
// cannot run (no `base64 -w`) or printed what preflight_tools.h does not
// accept.
Result<PreflightTools> CheckToolsOneByOne(ssh::SshSession& s) {
  PreflightTools t;
  auto which = RunRemote(s, {"sh", "-c", "command -v msprof || which msprof"}, std::chrono::seconds(30));
  if (!which.ok()) return which.status();
  if (which->exit_status != 0 || which->stdout_data.empty()) return t;
  t.msprof_found = true;
  t.msprof_path = which->stdout_data.substr(0, which->stdout_data.find('\n'));
  auto help = RunRemote(s, {"msprof", "--help"}, std::chrono::seconds(60));
  if (!help.ok()) return help.status();
  t.help_text = help->stdout_data + help->stderr_data;
  t.help_exit = help->exit_status;
  for (const char* py : {"python3", "python"}) {
    auto r = RunRemote(s, {py, "-c", "import sys, torch_npu; print(sys.executable)"}, std::chrono::seconds(120));
    if (!r.ok()) return r.status();
    if (r->exit_status == 0) {
      t.python = r->stdout_data.substr(0, r->stdout_data.find('\n'));
      break;
    }
  }
  return t;
}

// msprof, its help and a Python with torch_npu: one command (the env script
// sourced once), or one by one where that command cannot be used.
Result<PreflightTools> CheckTools(ssh::SshSession& s, const ssh::SshTarget& target) {
  auto r = RunRemote(s, PreflightToolsArgv(), std::chrono::seconds(210));
  if (!r.ok()) return r.status();
  if (r->exit_status == 0 && r->stdout_omitted == 0) {
    auto t = ParsePreflightTools(r->stdout_data);
    if (t.ok()) return t;
    spdlog::info("preflight on {}: {}; checking the tools one by one", target.Endpoint(), t.status().ToString());
  } else if (r->timed_out) {
    return Status::Timeout(fmt::format(
        "the preflight's tool checks (command -v msprof, msprof --help, a Python importing torch_npu) {}",
        ExitText(*r)));
  } else {
    spdlog::info("preflight on {}: the tool check {} ({}); checking the tools one by one", target.Endpoint(),
                 ExitText(*r), TailLines(r->stderr_data, 2));
  }
  return CheckToolsOneByOne(s);
}

// Writes a small file in one command (no env script), else with a file
// operation (which names the cause of a failure).
Status WriteSmall(ssh::SshSession& s, const std::string& path, const std::string& text) {
  if (text.size() <= service::kMaxInlineFileBytes) {
    auto r = s.Exec(ssh::BuildCommand(service::WriteFileArgv(path, text)), std::chrono::seconds(30));
    if (r.ok() && r->exit_status == 0) return Status::Ok();
  }
  return s.WriteFile(path, text, 0700);
}

}  // namespace

TaskOutcome MemPreflight(const tasks::MemoryPreflight& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  auto& s = *c->session;
  const std::string where = fmt::format("{} (env script '{}')", mem::MachineName(*c), c->target.env_script);

  auto tools = CheckTools(s, c->target);
  if (!tools.ok()) {
    if (tools.status().code() == Code::kTimeout && ssh::ErrorKindOf(tools.status()) == ssh::SshErrorKind::kNone)
      return TaskOutcome::Failure("preflight_timeout",
                                  fmt::format("{} on {}. Nothing was launched.", tools.status().message(), where), false);
    return OutcomeFromSsh(tools.status(), c->target);
  }
  if (!tools->msprof_found)
    return TaskOutcome::Failure(
        "msprof_missing",
        fmt::format("msprof is not on PATH on {}: install the CANN toolkit, source its set_env.sh (make it the "
                    "machine's env script) so msprof is on PATH, then submit again. Nothing was launched.",
                    where),
        false);
  const std::string msprof_path = tools->msprof_path;
  const std::string& help_text = tools->help_text;
  if (help_text.find("--output") == std::string::npos && help_text.find("Usage") == std::string::npos)
    return TaskOutcome::Failure("msprof_broken",
                                fmt::format("`msprof --help` on {} did not print the msprof usage (exited {}): {}",
                                            where, tools->help_exit, TailLines(help_text, 5)),
                                false);
  const std::string python = tools->python;
  if (python.empty())
    return TaskOutcome::Failure("torch_npu_missing",
                                fmt::format("no Python on {} can `import torch_npu`: install torch_npu for the Python "
                                            "vLLM uses, or source its environment in the machine's env script",
                                            where),
                                false);

  // The wrap script lives in the run's runtime dir: "~/" resolved, the dirs
  // created 0700 and checked like a service's (service_runtime_dir.h).
  auto resolved = service::ResolveRemotePath(s, p.wrap_script());
  if (!resolved.ok()) return service::RemoteFailure(resolved.status(), c->target);
  const std::string wrap = *resolved;
  const int64_t freq = p.msprof_mem_freq();
  if (freq < 1 || freq > 100)
    return TaskOutcome::Failure("bad_payload", fmt::format("msprof_mem_freq {} is not 1..100 Hz", freq), false);
  if (wrap.empty() || wrap[0] != '/' || wrap.rfind('/') == 0)
    return TaskOutcome::Failure("bad_payload", "wrap_script must be an absolute path", false);
  const std::string dir = wrap.substr(0, wrap.rfind('/'));
  const std::string name = wrap.substr(wrap.rfind('/') + 1);
  auto checked = service::InspectRuntimeDir(s, c->machine, dir, /*create=*/true, {name});
  if (!checked.ok()) {
    if (service::IsRuntimeDirRefusal(checked.status()))
      return TaskOutcome::Failure("unsafe_runtime_dir", checked.status().message() + ". Nothing was launched.", false);
    return service::RemoteFailure(checked.status(), c->target);
  }
  if (auto why = service::UntrustedFile(*checked, dir, name, "the msprof wrap script"))
    return TaskOutcome::Failure("untrusted_runtime", *why + ". Nothing was launched.", false);
  if (Status st = WriteSmall(s, wrap, MsprofWrapScript(static_cast<int>(freq))); !st.ok())
    return TaskOutcome::Failure("remote_error", fmt::format("writing {} failed: {}", wrap, st.message()), true);

  TaskOutcome out = TaskOutcome::Success(json{{"msprof_path", msprof_path},
                                              {"python", python},
                                              {"wrap_script", wrap},
                                              {"msprof_mem_freq", freq}});
  out.blobs.emplace_back("msprof_help.txt", help_text);
  return out;
}

}  // namespace npuprof::workers
