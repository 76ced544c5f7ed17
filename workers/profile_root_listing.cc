#include "workers/profile_root_listing.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "common/base64.h"
#include "workers/ssh/file_over_exec_protocol.h"
#include "workers/target_means.h"

namespace npuprof::workers {

namespace {

// $1 the root (followed if a symlink, as the file operations do; its entries are not).
const std::string& ListingScript() {
  static const std::string script = std::string(R"sh(r=$1
[ -e "$r" ] || { echo "root absent"; exit 0; }
{ [ -d "$r" ] && [ -r "$r" ] && [ -x "$r" ]; } || exit 72
command -v find >/dev/null 2>&1 || exit 73
printf '' | base64 -w 0 >/dev/null 2>&1 || exit 73
l=$(find -H "$r" -mindepth 1 -maxdepth 1 -printf '%y %s %f\0' | base64 -w 0) || exit 74
echo "root dir"
echo "listing $l"
echo "cores $(nproc 2>/dev/null)"
)sh") + kMemAvailableLine + "\n" + DiskFreeLine("r") + "\n" + R"sh(find -H "$r" -mindepth 1 -maxdepth 1 -type d -name '*_ascend_pt' -exec sh -c 'for d do
  echo "dir_kb $(printf %s "${d##*/}" | base64 -w 0) $(du -sk -- "$d" 2>/dev/null | cut -f1)"
done' npuprof-du {} +
echo "end"
)sh";
  return script;
}

bool Digits(std::string_view v) {
  return v.size() <= 19 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<key> <value>" with value digits or empty; the value, or an error naming the line.
Result<std::string> Value(std::string_view line, std::string_view key) {
  if (line.substr(0, key.size()) != key || line.size() == key.size() || line[key.size()] != ' ' ||
      !Digits(line.substr(key.size() + 1)))
    return Status::Corruption(fmt::format("profile root listing: expected '{} <digits>' in line {} bytes long", key,
                                          line.size()));
  return std::string(line.substr(key.size() + 1));
}

}  // namespace

std::vector<std::string> ProfileRootListingArgv(const std::string& root) {
  return {"sh", "-c", ListingScript(), "npuprof-listing", root};
}

std::string ProfileRootListing::MeansText(const std::vector<std::string>& names) const {
  std::string out = fmt::format("cores {}\nmem_available_kb {}\ndisk_free_kb {}\n", cores, mem_available_kb,
                                disk_free_kb);
  for (const std::string& n : names) {
    const auto it = dir_kb.find(n);
    out += fmt::format("dir_kb {}\n", it == dir_kb.end() ? "" : it->second);
  }
  return out;
}

Result<ProfileRootListing> ParseProfileRootListing(const std::string& out) {
  std::vector<std::string_view> lines;
  std::string_view rest(out);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return Status::Corruption("profile root listing: the last line is cut short");
    lines.push_back(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  ProfileRootListing r;
  if (lines.size() == 1 && lines[0] == "root absent") return r;
  if (lines.size() < 6 || lines[0] != "root dir" || lines.back() != "end")
    return Status::Corruption(fmt::format("profile root listing: {} lines, not 'root dir' ... 'end'", lines.size()));
  r.exists = true;
  constexpr std::string_view kListing = "listing ";
  if (lines[1].substr(0, kListing.size()) != kListing)
    return Status::Corruption("profile root listing: the second line is not 'listing <base64>'");
  auto records = DecodeBase64(lines[1].substr(kListing.size()));
  if (!records.ok()) return Status::Corruption("profile root listing: " + records.status().message());
  auto entries = ssh::file_over_exec::ParseListing(*records);
  if (!entries.ok()) return Status::Corruption("profile root listing: " + entries.status().message());
  r.entries = std::move(*entries);
  auto cores = Value(lines[2], "cores");
  auto mem = Value(lines[3], "mem_available_kb");
  auto disk = Value(lines[4], "disk_free_kb");
  for (const auto* v : {&cores, &mem, &disk})
    if (!v->ok()) return v->status();
  r.cores = *cores;
  r.mem_available_kb = *mem;
  r.disk_free_kb = *disk;
  constexpr std::string_view kDir = "dir_kb ";
  for (size_t i = 5; i + 1 < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t sp = line.substr(0, kDir.size()) == kDir ? line.find(' ', kDir.size()) : std::string_view::npos;
    if (sp == std::string_view::npos || !Digits(line.substr(sp + 1)))
      return Status::Corruption(fmt::format("profile root listing: line {} is not 'dir_kb <base64 name> <digits>'",
                                            i + 1));
    auto name = DecodeBase64(line.substr(kDir.size(), sp - kDir.size()));
    if (!name.ok() || name->empty() || name->find('/') != std::string::npos || name->find('\0') != std::string::npos)
      return Status::Corruption(fmt::format("profile root listing: line {} names no entry", i + 1));
    const bool listed = std::any_of(r.entries.begin(), r.entries.end(),
                                    [&](const ssh::DirEntry& e) { return e.is_dir && e.name == *name; });
    if (!listed || !r.dir_kb.emplace(*name, std::string(line.substr(sp + 1))).second)
      return Status::Corruption(
          fmt::format("profile root listing: line {} sizes a dir the listing does not hold once", i + 1));
  }
  return r;
}

}  // namespace npuprof::workers
