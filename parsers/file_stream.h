// Splitter of the file stream that memory.collect_csvs reads from a target in
// ONE command: a `find` listing interleaved with files, each file announced
// by a line
//
//   @@NPUPROF_FILE <size> <path>\n
//
// and followed by exactly <size> bytes (no separator after them). Every other
// line is a listing line. Pure: the caller hands in the stream; the files'
// bytes are copied out as they are (bytes, never text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof {

inline constexpr std::string_view kFileStreamMarker = "@@NPUPROF_FILE ";

struct StreamedFile {
  std::string path;  // as announced (e.g. "./PROF_x/device_0/a.csv")
  std::string data;  // exactly the announced bytes
};

struct FileStream {
  std::vector<std::string> listing;  // non-empty listing lines, then each file's path, in stream order
  std::vector<StreamedFile> files;   // stream order
};

// Errors (kCorruption, naming the byte offset of the announcement): a size
// that is not a decimal byte count (digits only, fits 64 bits), no path, or a
// truncated stream (an announcement without its line end, or a size larger
// than the bytes left). Messages are valid UTF-8.
Result<FileStream> SplitFileStream(std::string_view stream);

}  // namespace npuprof
