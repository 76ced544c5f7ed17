// Free space under the store, and the rule that keeps RocksDB from ever
// meeting a full disk.
//
// RocksDB (7.8, as Debian ships it) does not survive a full disk well: a
// write that meets ENOSPC puts the database in a background-error state, and
// its info log, written into the store directory, then trips an assertion on
// the next line it logs (the process aborts). So the store measures the free
// space of its file system (statvfs) before every write and refuses one that
// would leave less than a floor free. The floor depends on what the write is
// for:
//
//   SpaceUse::kNewWork   evidence blobs, new runs and imports: the whole
//                        reserve (StoreOptions::min_free_bytes, 64 MiB)
//   SpaceUse::kProgress  events of runs already under way (results,
//                        failures, cancels, index rows): half of it
//
// so that when space runs short a run that needed a large write can still
// record why it failed. A write of N bytes counts twice (the write-ahead log
// now, a table file when its memtable is flushed), plus what the memtables
// hold and is not flushed yet.
//
// Pure except FreeBytes (one statvfs).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace npuprof::store {

enum class SpaceUse { kProgress, kNewWork };

// Bytes an unprivileged writer may still use on the file system holding dir.
Result<uint64_t> FreeBytes(const std::string& dir);

// The floor a write for `use` must leave free, given the store's reserve.
uint64_t FloorFor(SpaceUse use, uint64_t reserve_bytes);

// Whether a write of `bytes` fits: free >= floor + unflushed + 2 * bytes
// (saturating: a sum past 2^64 never fits).
bool Admits(uint64_t free_bytes, uint64_t bytes, uint64_t unflushed_bytes, uint64_t floor_bytes);

// "no space left on device under DIR (N MB free)" — the one wording every
// refusal for space uses (server log, client answers, a refused start).
std::string NoSpaceMessage(const std::string& dir, uint64_t free_bytes);

}  // namespace npuprof::store
