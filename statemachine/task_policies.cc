#include "statemachine/task_policies.h"

#include <algorithm>
#include <array>

#include "statemachine/machine_check_machine.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/probe_machine.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/service_spec.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {

namespace {

constexpr int64_t kSecond = 1000;

constexpr TaskPolicy Tries(int attempts, int64_t lease_s, int64_t backoff_ms = 1000) {
  TaskPolicy p;
  p.max_attempts = attempts;
  p.backoff_ms = backoff_ms;
  p.lease_ms = lease_s * kSecond;
  return p;
}

constexpr std::array kPolicies = {
    NamedTaskPolicy{"probe", kProbeTask, Tries(3, 60, 500), "one npu-smi query"},
    NamedTaskPolicy{"machine-check", kMachineCheckTask, Tries(2, 60, 500), "connect and check the machine"},
    NamedTaskPolicy{"device-lease", kProbeTask, Tries(3, 60), "npu-smi before a lease"},
    NamedTaskPolicy{"device-quarantine", kProbeTask, Tries(1, 60),
                    "npu-smi on quarantined NPUs; the next check is a new task"},
    NamedTaskPolicy{"deployment", "machine.clock", Tries(2, 60),
                    "a few timestamp exchanges with every node of a multi-node run"},

    NamedTaskPolicy{"serve", kServiceLaunchTask, Tries(3, 90), "write the runtime dir, start vLLM detached"},
    NamedTaskPolicy{"serve", kServiceWaitReadyTask, Tries(3, 30), "poll until the service is ready"},
    NamedTaskPolicy{"serve", kServiceStopTask, Tries(3, 60), "SIGINT, SIGTERM graces"},
    NamedTaskPolicy{"serve", kServiceHbmSampleTask, Tries(2, 60, 500),
                    "one npu-smi query between two clock readings (serve --watch-hbm)"},
    NamedTaskPolicy{"serve", kHbmWaveTask, Tries(1, 120),
                    "the workload wave before a sample (serve --watch-workload); not re-sent"},

    NamedTaskPolicy{"torch-profile", kServiceLaunchTask, Tries(3, 120), "start vLLM with the profiler configured"},
    NamedTaskPolicy{"torch-profile", kServiceWaitReadyTask, Tries(3, 60), "poll until the service is ready"},
    NamedTaskPolicy{"torch-profile", kTpPrepareImageTask, Tries(1, 60), "write one image file"},
    NamedTaskPolicy{"torch-profile", kTpCaptureCheckTask, Tries(3, 60),
                    "one command: free disk, MemAvailable, layers, ProfilerConfig fields"},
    NamedTaskPolicy{"torch-profile", kTpControlTask, Tries(2, 60), "POST /start_profile or /stop_profile"},
    NamedTaskPolicy{"torch-profile", kTpRequestsTask, Tries(2, 60), "the benchmark wave (or the one follow-up request)"},
    NamedTaskPolicy{"torch-profile", kTpWaitFlushTask, Tries(3, 60), "poll until every rank has finalised"},
    NamedTaskPolicy{"torch-profile", kServiceStopTask, Tries(3, 120), "stop graces, the profiler's finalise"},
    NamedTaskPolicy{"torch-profile", kTpListDirsTask, Tries(3, 60), "one listing"},
    NamedTaskPolicy{"torch-profile", kTpAnalyseRankTask, Tries(3, 60), "torch_npu analyse() of one rank, then its outputs read"},

    NamedTaskPolicy{"analyse-root", kTpListDirsTask, Tries(3, 60), "one listing"},
    NamedTaskPolicy{"analyse-root", kTpAnalyseRankTask, Tries(3, 60), "torch_npu analyse() of one rank, then its outputs read"},

    NamedTaskPolicy{"memory-profile", kMemPreflightTask, Tries(3, 120), "tool checks, write the msprof wrapper"},
    NamedTaskPolicy{"memory-profile", kMemNpuSmiTask, Tries(3, 60), "one npu-smi query"},
    NamedTaskPolicy{"memory-profile", kServiceLaunchTask, Tries(3, 120), "start vLLM under msprof"},
    NamedTaskPolicy{"memory-profile", kServiceWaitReadyTask, Tries(2, 120), "poll until the service is ready"},
    NamedTaskPolicy{"memory-profile", kMemLogsTask, Tries(3, 120), "read the vLLM logs (capped)"},
    NamedTaskPolicy{"memory-profile", kMemInferTask, Tries(1, 700),
                    "one inference (600 s timeout); not repeated: it would measure a second request"},
    NamedTaskPolicy{"memory-profile", kServiceStopTask, Tries(3, 180), "stop graces with msprof attached"},
    NamedTaskPolicy{"memory-profile", kMemWeightsTask, Tries(3, 300), "read every safetensors header"},
    NamedTaskPolicy{"memory-profile", kMemWaitFlushTask, Tries(3, 60), "poll until msprof has exited and flushed"},
    NamedTaskPolicy{"memory-profile", kMemExportTask, Tries(3, 120), "msprof --export of the PROF directories"},
    NamedTaskPolicy{"memory-profile", kMemCollectTask, Tries(3, 300), "read and parse every device's CSVs"},
    NamedTaskPolicy{"memory-profile", kTpControlTask, Tries(2, 60), "--operator-memory: POST /start_profile or /stop_profile"},
    NamedTaskPolicy{"memory-profile", kMemOperatorMemoryTask, Tries(3, 60),
                    "--operator-memory: analyse() of every rank (re-attached on retry), then its digest"},
};

const NamedTaskPolicy* Find(std::string_view scheduler, std::string_view task_kind) {
  auto it = std::find_if(kPolicies.begin(), kPolicies.end(), [&](const NamedTaskPolicy& p) {
    return p.scheduler == scheduler && p.task_kind == task_kind;
  });
  return it == kPolicies.end() ? nullptr : &*it;
}

}  // namespace

std::span<const NamedTaskPolicy> TaskPolicies() { return kPolicies; }

bool HasPolicy(std::string_view scheduler, std::string_view task_kind) {
  return Find(scheduler, task_kind) != nullptr;
}

TaskPolicy PolicyFor(std::string_view scheduler, std::string_view task_kind) {
  const NamedTaskPolicy* p = Find(scheduler, task_kind);
  return p ? p->policy : TaskPolicy{};
}

TaskPolicy ServeWatchPolicy(int64_t poll_s) {
  return Tries(3, std::max<int64_t>(30, poll_s * 3));
}

TaskPolicy NodeCheckPolicy() { return Tries(3, 30, 500); }

}  // namespace npuprof::sm
