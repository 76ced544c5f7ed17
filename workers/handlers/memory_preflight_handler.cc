// memory.preflight: msprof present and answering --help, a Python with
// torch_npu, and the msprof wrap script written on the target: in one remote
// command (preflight_in_one.h), else step by step.
#include <optional>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "workers/handlers/preflight_in_one.h"
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

// The verdict on the tools: a failure, or nullopt when msprof answers and a
// Python imports torch_npu.
std::optional<TaskOutcome> ToolsRefused(const PreflightTools& tools, const std::string& where) {
  if (!tools.msprof_found)
    return TaskOutcome::Failure(
        "msprof_missing",
        fmt::format("msprof is not on PATH on {}: install the CANN toolkit, source its set_env.sh (make it the "
                    "machine's env script) so msprof is on PATH, then submit again. Nothing was launched.",
                    where),
        false);
  if (tools.help_text.find("--output") == std::string::npos && tools.help_text.find("Usage") == std::string::npos)
    return TaskOutcome::Failure("msprof_broken",
                                fmt::format("`msprof --help` on {} did not print the msprof usage (exited {}): {}",
                                            where, tools.help_exit, TailLines(tools.help_text, 5)),
                                false);
  if (tools.python.empty())
    return TaskOutcome::Failure("torch_npu_missing",
                                fmt::format("no Python on {} can `import torch_npu`: install torch_npu for the Python "
                                            "vLLM uses, or source its environment in the machine's env script",
                                            where),
                                false);
  return std::nullopt;
}

TaskOutcome ToolsFailure(const Status& st, const ssh::SshTarget& target, const std::string& where) {
  if (st.code() == Code::kTimeout && ssh::ErrorKindOf(st) == ssh::SshErrorKind::kNone)
    return TaskOutcome::Failure("preflight_timeout", fmt::format("{} on {}. Nothing was launched.", st.message(), where),
                                false);
  return OutcomeFromSsh(st, target);
}

// The verdict on the wrap script's dir: a failure, or nullopt when the dir
// was accepted and the script's name there may be written.
std::optional<TaskOutcome> DirRefused(const Result<service::RuntimeDirReport>& checked, const std::string& dir,
                                      const std::string& name, const ssh::SshTarget& target) {
  if (!checked.ok()) {
    if (service::IsRuntimeDirRefusal(checked.status()))
      return TaskOutcome::Failure("unsafe_runtime_dir", checked.status().message() + ". Nothing was launched.", false);
    return service::RemoteFailure(checked.status(), target);
  }
  if (auto why = service::UntrustedFile(*checked, dir, name, "the msprof wrap script"))
    return TaskOutcome::Failure("untrusted_runtime", *why + ". Nothing was launched.", false);
  return std::nullopt;
}

struct WrapPlace {
  std::string path, dir, name;
  int64_t freq = 0;
};

TaskOutcome Checked(const PreflightTools& tools, const WrapPlace& w) {
  TaskOutcome out = TaskOutcome::Success(json{{"msprof_path", tools.msprof_path},
                                              {"python", tools.python},
                                              {"wrap_script", w.path},
                                              {"msprof_mem_freq", w.freq}});
  out.blobs.emplace_back("msprof_help.txt", tools.help_text);
  return out;
}

// The steps one command at a time: the tool check (itself one by one where
// its one command cannot run), the dir check, the write.
TaskOutcome StepByStep(ssh::SshSession& s, const mem::Ctx& c, const WrapPlace& w, const std::string& where) {
  auto tools = CheckTools(s, c.target);
  if (!tools.ok()) return ToolsFailure(tools.status(), c.target, where);
  if (auto refused = ToolsRefused(*tools, where)) return *refused;
  auto checked = service::InspectRuntimeDir(s, c.machine, w.dir, /*create=*/true, {w.name});
  if (auto refused = DirRefused(checked, w.dir, w.name, c.target)) return *refused;
  if (Status st = WriteSmall(s, w.path, MsprofWrapScript(static_cast<int>(w.freq))); !st.ok())
    return TaskOutcome::Failure("remote_error", fmt::format("writing {} failed: {}", w.path, st.message()), true);
  return Checked(*tools, w);
}

}  // namespace

TaskOutcome MemPreflight(const tasks::MemoryPreflight& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  auto& s = *c->session;
  const std::string where = fmt::format("{} (env script '{}')", mem::MachineName(*c), c->target.env_script);

  // The wrap script lives in the run's runtime dir: "~/" resolved, the dirs
  // created 0700 and checked like a service's (service_runtime_dir.h).
  auto resolved = service::ResolveRemotePath(s, p.wrap_script());
  if (!resolved.ok()) return service::RemoteFailure(resolved.status(), c->target);
  WrapPlace w;
  w.path = *resolved;
  w.freq = p.msprof_mem_freq();
  if (w.freq < 1 || w.freq > 100)
    return TaskOutcome::Failure("bad_payload", fmt::format("msprof_mem_freq {} is not 1..100 Hz", w.freq), false);
  if (w.path.empty() || w.path[0] != '/' || w.path.rfind('/') == 0)
    return TaskOutcome::Failure("bad_payload", "wrap_script must be an absolute path", false);
  w.dir = w.path.substr(0, w.path.rfind('/'));
  w.name = w.path.substr(w.path.rfind('/') + 1);
  const std::string text = MsprofWrapScript(static_cast<int>(w.freq));

  // The tools, the dir and the write in one command (preflight_in_one.h).
  auto dir_argv = service::InspectRuntimeDirArgv(s, c->machine, w.dir, /*create=*/true, {w.name});
  if (!dir_argv.ok()) return service::RemoteFailure(dir_argv.status(), c->target);
  auto run = RunRemote(s, PreflightInOneArgv(*dir_argv, w.path, text), std::chrono::seconds(240));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c->target);
  if (run->timed_out)
    return TaskOutcome::Failure(
        "preflight_timeout",
        fmt::format("the preflight's checks (command -v msprof, msprof --help, a Python importing torch_npu, the "
                    "runtime dir) {} on {}. Nothing was launched.",
                    ExitText(*run), where),
        false);
  auto split = run->stdout_omitted == 0 ? SplitPreflightInOne(run->stdout_data)
                                        : Result<PreflightInOne>(Status::Corruption("output over its cap"));
  std::optional<PreflightTools> tools;
  if (split.ok() && (split->dir_checked || run->exit_status == 0)) {
    auto t = ParsePreflightTools(split->tools_out);
    if (t.ok()) tools = std::move(*t);
  }
  if (!tools) {
    // The command could not be used here (no `base64 -w`, output not in its
    // format): each step on its own, as before.
    spdlog::info("preflight on {}: the one command {} ({}); the steps one at a time", c->target.Endpoint(),
                 split.ok() ? ExitText(*run) : split.status().message(), TailLines(run->stderr_data, 2));
    return StepByStep(s, *c, w, where);
  }
  if (auto refused = ToolsRefused(*tools, where)) return *refused;
  if (!split->dir_checked) return StepByStep(s, *c, w, where);  // the tools passed but the dir was not checked
  ssh::ExecResult dir_run = *run;  // the check's part, as RuntimeDirReportOf reads it
  dir_run.stdout_data = split->dir_out;
  if (auto refused = DirRefused(service::RuntimeDirReportOf(dir_run, w.dir), w.dir, w.name, c->target))
    return *refused;
  if (split->write != PreflightInOne::Write::kWritten)
    if (Status st = WriteSmall(s, w.path, text); !st.ok())  // names the cause of a failure
      return TaskOutcome::Failure("remote_error", fmt::format("writing {} failed: {}", w.path, st.message()), true);
  return Checked(*tools, w);
}

}  // namespace npuprof::workers
