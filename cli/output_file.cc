#include "cli/output_file.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli/output_dir.h"

namespace npuprof::cli {

Status WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path())
    if (Status made = EnsureOutputDir(p.parent_path().string()); !made.ok()) return made;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::Io(fmt::format("cannot write {}", tmp));
    f << data;
    f.flush();
    if (!f) return Status::Io(fmt::format("write to {} failed", tmp));
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) return Status::Io(fmt::format("cannot rename {} to {}: {}", tmp, path, ec.message()));
  return Status::Ok();
}

}  // namespace npuprof::cli
