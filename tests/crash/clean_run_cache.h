// The crash matrix's clean run, computed once per kind and build and shared
// by that kind's shards.
//
// Contract: every shard of a kind starts from the same clean run (its events'
// positions, its normalised summary and manifest, its status). The first
// shard to get the kind's lock runs it, checks it, and stores what the crash
// points are compared against in a file under the build dir; the others wait
// on the lock and read it. The file is keyed by the build that made it: the
// npuprof binary, the test binary and the simulator's files (their sizes and
// modification times), so an edit to any of them runs the clean run again.
// A shard whose clean run fails stores nothing. CRASH_MATRIX_NO_CACHE=1 runs
// the clean run in every shard.
#pragma once

#include <functional>
#include <optional>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::testing {

// What a shard needs of the clean run: {"status", "state", "summary",
// "manifest", "events"} (summary and manifest normalised).
using CleanRun = nlohmann::json;

class CleanRunCache {
 public:
  // cache_dir: where the files live (created); key_files: files and dirs
  // whose sizes and times make the key (dirs are walked).
  CleanRunCache(std::string cache_dir, std::vector<std::string> key_files);

  // The kind's clean run: read from the cache when its key matches, else
  // computed by `run` (under the kind's lock) and stored when it returns one.
  // `from_cache` says which.
  std::optional<CleanRun> Get(const std::string& kind, const std::function<std::optional<CleanRun>()>& run,
                              bool* from_cache);

 private:
  std::string Key() const;

  std::string dir_;
  std::vector<std::string> key_files_;
};

}  // namespace npuprof::testing
