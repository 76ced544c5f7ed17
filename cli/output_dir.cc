#include "cli/output_dir.h"

#include <filesystem>
#include <optional>

#include <fmt/format.h>

namespace npuprof::cli {
namespace {

namespace fs = std::filesystem;

const char* TypeWords(fs::file_type t) {
  switch (t) {
    case fs::file_type::regular: return "a file";
    case fs::file_type::fifo: return "a named pipe";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block:
    case fs::file_type::character: return "a device";
    default: return "something other than a directory";
  }
}

// What makes `p` unusable as a directory, or nullopt when it is one or does
// not exist.
std::optional<std::string> ObstacleAt(const fs::path& p) {
  std::error_code ec;
  const fs::file_status own = fs::symlink_status(p, ec);
  if (ec || own.type() == fs::file_type::not_found) return std::nullopt;
  if (own.type() == fs::file_type::symlink) {
    const fs::path target = fs::read_symlink(p, ec);
    const std::string to = ec ? std::string("an unreadable target") : target.string();
    const fs::file_status pointed = fs::status(p, ec);
    if (pointed.type() == fs::file_type::not_found)
      return fmt::format("{} is a symbolic link to {}, which does not exist: remove the link, create {}, or give "
                         "another directory",
                         p.string(), to, to);
    if (pointed.type() != fs::file_type::directory)
      return fmt::format("{} is a symbolic link to {}, which is {}, not a directory: give another directory",
                         p.string(), to, TypeWords(pointed.type()));
    return std::nullopt;
  }
  if (own.type() != fs::file_type::directory)
    return fmt::format("{} is {}, not a directory: remove it or give another directory", p.string(),
                       TypeWords(own.type()));
  return std::nullopt;
}

}  // namespace

Status EnsureOutputDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && fs::is_directory(dir, ec)) return Status::Ok();
  // The first thing on the way down from the top that is no directory.
  const fs::path full = fs::path(dir).lexically_normal();
  fs::path at;
  for (const auto& part : full) {
    at /= part;
    if (auto why = ObstacleAt(at)) return Status::Io(fmt::format("cannot create {}: {}", dir, *why));
  }
  return Status::Io(fmt::format("cannot create {}: {}", dir, ec ? ec.message() : std::string("not a directory")));
}

}  // namespace npuprof::cli
