// The completion signals the flush waits poll for (torch_profile.wait_flush,
// memory.wait_flush): the one remote command of each poll, built from argv,
// and the pure reading of its output. No I/O here; the handlers run the
// commands and decide with these functions.
//
// torch: each *_ascend_pt dir under the profile root is finalised when it
//   holds a profiler_info*.json (torch_npu writes it last) and its file count
//   and byte total did not change between two consecutive polls.
// msprof: the flush is over when no process of the service's group is left
//   (msprof exits after its flush) and every PROF_* dir is complete: host/
//   end_info plus device_<i>/end_info.<i> for each device dir (or, failing
//   those, one "Process profiling data complete" line per PROF dir with
//   device data in msprof's console log).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::workers {

using json = nlohmann::json;

// ---- torch_npu finalise --------------------------------------------------

struct RankDirPoll {
  std::string name;       // the *_ascend_pt dir's name (not its path)
  int profiler_info = 0;  // profiler_info*.json files in it
  int64_t files = 0;      // regular files below it
  int64_t bytes = 0;      // their sizes, summed
  bool operator==(const RankDirPoll&) const = default;
};

struct TorchFlushPoll {
  bool root_exists = false;
  std::vector<RankDirPoll> dirs;
  int unparsed = 0;  // output lines not understood (a poll with any never ends the wait)
};

// argv of one poll: every *_ascend_pt directly under root with its
// profiler_info count, file count and byte total.
std::vector<std::string> TorchFlushPollArgv(const std::string& profile_root);
TorchFlushPoll ParseTorchFlushPoll(const std::string& out);

// The signal that ends the wait given this poll and the one before (nullopt:
// keep polling): "profiler_info" when every dir is finalised and unchanged
// since the previous poll; "no_profile_dirs" when two polls in a row found
// none (torch_npu creates the dirs when profiling starts, so none after the
// stop means none will come). Fewer dirs than expected ranks, all finalised,
// also end the wait: the analysis gate then reports the missing ranks.
std::optional<std::string> TorchFlushSignal(const TorchFlushPoll& prev, const TorchFlushPoll& cur, bool have_prev);
json TorchFlushDirsJson(const TorchFlushPoll& p);

// ---- msprof flush --------------------------------------------------------

struct ProfDirPoll {
  std::string name;
  bool host_end_info = false;
  int devices = 0;          // device_<i> dirs
  int device_end_info = 0;  // of those, with end_info.<i>
  bool complete() const { return host_end_info && device_end_info == devices; }
};

struct MsprofFlushPoll {
  std::vector<ProfDirPoll> profs;
  int complete_lines = 0;    // "Process profiling data complete" lines in the console log
  bool group_alive = false;  // a process of the service's group (msprof among them) is alive
  bool group_known = false;  // the group status was read (or there was no group to check)
  int unparsed = 0;
};

// argv of one poll: the PROF_* dirs of msprof_dir with their end_info
// markers, the completion lines of stdout_log, then the status of the
// service's process group (pgid > 0, with the marker of runtime_dir; 0 = no
// group check). Invalid when pgid > 0 and runtime_dir names no service.
Result<std::vector<std::string>> MsprofFlushPollArgv(const std::string& msprof_dir, const std::string& stdout_log,
                                                     int64_t pgid, const std::string& runtime_dir);
MsprofFlushPoll ParseMsprofFlushPoll(const std::string& out, bool group_checked);

// nullopt while a process of the group is alive (or its status is unknown);
// then "end_info" (every PROF dir complete), "completion_line" (end_info
// missing but msprof logged completion for each PROF dir with device data),
// "no_msprof_data" (no PROF dir), or "msprof_exited_incomplete" (it is gone
// and nothing more will come: the export works from the raw data there is).
std::optional<std::string> MsprofFlushSignal(const MsprofFlushPoll& p);
json MsprofFlushJson(const MsprofFlushPoll& p);

}  // namespace npuprof::workers
