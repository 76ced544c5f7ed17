#include "parsers/file_stream.h"

#include <charconv>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof {
namespace {

// A byte count: 1-20 decimal digits that fit 64 bits, nothing else.
std::optional<uint64_t> ByteCount(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<FileStream> SplitFileStream(std::string_view in) {
  FileStream out;
  size_t pos = 0;
  while (pos < in.size()) {
    const size_t at = pos;
    size_t eol = in.find('\n', pos);
    if (eol == std::string_view::npos) eol = in.size();
    std::string_view line = in.substr(pos, eol - pos);
    pos = eol < in.size() ? eol + 1 : in.size();
    if (!line.starts_with(kFileStreamMarker)) {
      if (!line.empty()) out.listing.emplace_back(line);
      continue;
    }
    line.remove_prefix(kFileStreamMarker.size());
    const size_t sp = line.find(' ');
    const std::string_view size_field = line.substr(0, sp);
    const auto size = ByteCount(size_field);
    if (!size) {
      return Status::Corruption(fmt::format("file stream at byte {}: size '{}' is not a byte count", at,
                                            TruncateUtf8(size_field, 40)));
    }
    if (sp == std::string_view::npos || sp + 1 == line.size()) {
      return Status::Corruption(fmt::format("file stream at byte {}: a file of {} bytes without a path", at, *size));
    }
    const std::string_view path = line.substr(sp + 1);
    if (eol == in.size()) {
      // The announcement's own line end is missing: the stream was cut inside
      // it, so even the path may be cut short.
      return Status::Corruption(fmt::format("file stream truncated: the announcement of {} at byte {} has no line end",
                                            TruncateUtf8(path, 200), at));
    }
    if (*size > in.size() - pos) {
      return Status::Corruption(fmt::format("file stream truncated: {} announced at byte {} with {} bytes, {} remain",
                                            TruncateUtf8(path, 200), at, *size, in.size() - pos));
    }
    out.files.push_back({std::string(path), std::string(in.substr(pos, *size))});
    out.listing.emplace_back(path);
    pos += *size;
  }
  return out;
}

}  // namespace npuprof
