#include "tests/crash/clean_run_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace npuprof::testing {
namespace fs = std::filesystem;

namespace {

std::string StatLine(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return p.string() + " missing\n";
  return fmt::format("{} {} {}.{:09}\n", p.string(), static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
}

// Holds an exclusive flock on a file for its lifetime.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

CleanRunCache::CleanRunCache(std::string cache_dir, std::vector<std::string> key_files)
    : dir_(std::move(cache_dir)), key_files_(std::move(key_files)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

std::string CleanRunCache::Key() const {
  std::string key;
  for (const std::string& f : key_files_) {
    std::error_code ec;
    if (!fs::is_directory(f, ec)) {
      key += StatLine(f);
      continue;
    }
    std::vector<std::string> lines;
    for (auto it = fs::recursive_directory_iterator(f, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->path().string().find("__pycache__") != std::string::npos) continue;
      if (it->is_regular_file(ec)) lines.push_back(StatLine(it->path()));
    }
    std::sort(lines.begin(), lines.end());
    for (const auto& l : lines) key += l;
  }
  return key;
}

std::optional<CleanRun> CleanRunCache::Get(const std::string& kind,
                                           const std::function<std::optional<CleanRun>()>& run, bool* from_cache) {
  *from_cache = false;
  const char* no_cache = std::getenv("CRASH_MATRIX_NO_CACHE");
  if (no_cache && std::string(no_cache) == "1") return run();
  const std::string file = dir_ + "/clean-" + kind + ".json";
  FileLock lock(file + ".lock");
  const std::string key = Key();
  {
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    const auto cached = nlohmann::json::parse(ss.str(), nullptr, false);
    if (cached.is_object() && cached.value("key", "") == key && cached.contains("run")) {
      *from_cache = true;
      return cached["run"];
    }
  }
  std::optional<CleanRun> computed = run();
  if (!computed) return std::nullopt;
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"key", key}, {"run", *computed}}.dump();
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  return computed;
}

}  // namespace npuprof::testing
