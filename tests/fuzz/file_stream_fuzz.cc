// SplitFileStream on any bytes. Promises: an error has a valid UTF-8
// message; the files' paths and bytes add up to no more than the stream;
// each file is the bytes that follow its announcement; writing the files back as a stream
// and splitting that again gives the same files.
#include "parsers/file_stream.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {

int FuzzFileStream(const uint8_t* data, size_t size) {
  const std::string_view stream = AsText(data, size);
  auto split = SplitFileStream(stream);
  if (!split.ok()) {
    CheckError(split.status(), "SplitFileStream");
    return 0;
  }
  size_t bytes = 0;
  std::string rewritten;
  for (const StreamedFile& f : split->files) {
    FUZZ_CHECK(!f.path.empty() && f.path.find('\n') == std::string::npos, "path '{}' is not one line",
               f.path);
    const std::string announcement = fmt::format("{}{} {}\n", kFileStreamMarker, f.data.size(), f.path);
    FUZZ_CHECK(Within(" " + f.path + "\n" + f.data, stream), "file {} is not the bytes after its announcement",
               f.path);
    bytes += f.path.size() + f.data.size();
    rewritten += announcement + f.data;
  }
  FUZZ_CHECK(bytes <= size, "{} bytes of files from a {}-byte stream", bytes, size);
  FUZZ_CHECK(split->listing.size() >= split->files.size(), "a file missing from the listing");
  for (const std::string& line : split->listing) {
    FUZZ_CHECK(!line.empty() && line.find('\n') == std::string::npos, "listing line '{}' is not one line", line);
  }

  auto again = SplitFileStream(rewritten);
  FUZZ_CHECK(again.ok(), "the rewritten stream does not split: {}", again.status().message());
  FUZZ_CHECK(again->files.size() == split->files.size(), "{} files back from {}", again->files.size(),
             split->files.size());
  for (size_t i = 0; i < again->files.size(); ++i) {
    FUZZ_CHECK(again->files[i].path == split->files[i].path && again->files[i].data == split->files[i].data,
               "file {} changed when written back", i);
  }
  return 0;
}

}  // namespace npuprof::fuzz
