// A profile root's listing and the target's means to analyse it, in one
// remote command, where the file operations cost a stat, an open, the reads
// of the listing and a close (about five round trips) before the means
// command. The command is built from argv with the one quoting routine (the
// root travels as a positional parameter); its output is read here, purely,
// and a caller that cannot use it falls back to the file operations and the
// means command of their own (torch_profile_list_handler.cc).
//
// Output of ProfileRootListingArgv(root), one line each:
//   "root absent"                       nothing at root (and nothing else follows)
// or
//   "root dir"
//   "listing <base64>"                  the root's entries as the exec listing
//                                       prints them ("T SIZE NAME\0" records,
//                                       ssh/file_over_exec_protocol.h), types
//                                       not followed through symlinks
//   "cores <n>"                         nproc
//   "mem_available_kb <n>"              MemAvailable of /proc/meminfo, or of the
//                                       file NPUPROF_MEMINFO names
//   "disk_free_kb <n>"                  df under the root
//   "dir_kb <base64 name> <n>"          per directory entry named *_ascend_pt
//   "end"
// A value may be empty (unread). A root that is there but is not a readable
// directory, or a target without find or `base64 -w`, exits non-zero: the
// caller's file operations then name what is wrong, as before.
// ParseProfileRootListing accepts exactly that and nothing else.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

std::vector<std::string> ProfileRootListingArgv(const std::string& root);

struct ProfileRootListing {
  bool exists = false;
  std::vector<ssh::DirEntry> entries;  // by name, as ListDir gives them
  // The means lines as ParseAnalyseMeans reads them, without the dir sizes.
  std::string cores, mem_available_kb, disk_free_kb;
  std::map<std::string, std::string> dir_kb;  // entry name -> its size in KiB ("" unread)

  // The means text for ParseAnalyseMeans (statemachine/torch_profile_analyse_limit.h)
  // with the dirs' sizes in the order of `names`.
  std::string MeansText(const std::vector<std::string>& names) const;
};

Result<ProfileRootListing> ParseProfileRootListing(const std::string& out);

}  // namespace npuprof::workers
