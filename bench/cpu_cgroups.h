// CPU of a benchmark's installation split the way separate machines split
// it, with cgroup v1's `cpu` and `cpuacct` controllers
// (/sys/fs/cgroup/cpu, /sys/fs/cgroup/cpuacct; root, cgroup v1 mounted).
//
// Contract:
// * CpuCgroups::Create makes one parent group "npuprof-bench-<pid>" in the
//   cpuacct hierarchy and, with caps, in the cpu hierarchy too (without caps
//   nothing moves in the cpu hierarchy: a group there weighs as one process
//   against every process outside it, which would change what is measured);
//   it refuses, naming the path and the reason, when a hierarchy
//   is missing or not writable (cgroup v2 only, not root, read-only mount);
//   it first removes parent groups of bench processes that are gone.
// * AddGroup(name, cpus) makes a child group; with caps and cpus > 0 its CFS quota is
//   cpus × the period (a ceiling: the group's processes together never get
//   more than `cpus` of a core's time per period, however many cores are
//   idle); 0 = no ceiling, accounting only.
// * Prioritise(shares) sets the parent group's cpu.shares (default 1024,
//   as each process of the root group weighs at nice 0): while the machine
//   is contended, the groups together get shares / (shares + 1024 × the
//   root group's runnable processes) of it, each still under its ceiling.
// * Move(name, pid) puts the process and every descendant it has now into
//   the group; processes they start later inherit it.
// * Usage(name) is the group's CPU time so far (cpuacct.usage) and its
//   throttling (cpu.stat): read before and after a run for what it cost.
// * The destructor moves every process still in a group back to the root
//   group and removes the groups: nothing is left behind on a normal exit.
//
// What it does not do: it guarantees nothing against processes outside the
// groups (other users of the machine); the ceilings add up to the machine
// only if the caller chooses them so. The parsing (ParseCpuStat,
// ParseCpuList) is pure; everything else is file I/O under /sys/fs/cgroup.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::bench {

// cpu.stat's throttling counters (the other lines are ignored).
struct CpuStat {
  int64_t nr_periods = 0;
  int64_t nr_throttled = 0;
  int64_t throttled_ns = 0;
};
Result<CpuStat> ParseCpuStat(std::string_view text);

// A CPU amount as the options give it ("0.75"): a number in (0, 64]; the
// error names `field`.
Result<double> ParseCpus(std::string_view text, std::string_view field);

struct CpuUsage {
  int64_t cpu_ns = 0;        // cpuacct.usage
  int64_t throttled_ns = 0;  // cpu.stat throttled_time
  int64_t nr_throttled = 0;
};

class CpuCgroups {
 public:
  // period_us: the CFS period of every ceiling (20 ms: a group at its
  // ceiling waits at most a quarter of that at 0.75 CPU).
  static Result<std::unique_ptr<CpuCgroups>> Create(bool caps, int64_t period_us = 20000,
                                                    const std::string& root = "/sys/fs/cgroup");
  ~CpuCgroups();
  CpuCgroups(const CpuCgroups&) = delete;
  CpuCgroups& operator=(const CpuCgroups&) = delete;

  Status AddGroup(const std::string& name, double cpus);
  Status Prioritise(int64_t shares);
  Status Move(const std::string& name, pid_t pid);
  Result<CpuUsage> Usage(const std::string& name) const;
  // The group's directory in the cpu hierarchy, else cpuacct's (for messages and tests).
  std::string CpuDir(const std::string& name) const;

 private:
  CpuCgroups(std::string cpu_parent, std::string acct_parent, int64_t period_us)
      : cpu_parent_(std::move(cpu_parent)), acct_parent_(std::move(acct_parent)), period_us_(period_us) {}
  // The group's directories: cpuacct's, and cpu's with caps.
  std::vector<std::string> Dirs(const std::string& name) const;
  std::string cpu_parent_, acct_parent_;  // cpu_parent_ "" without caps
  int64_t period_us_;
  std::vector<std::string> groups_;
};

// pid and its descendants now (from /proc/<pid>/task/*/children; a process
// that exits meanwhile is skipped).
std::vector<pid_t> ProcessTree(pid_t pid);

}  // namespace npuprof::bench
