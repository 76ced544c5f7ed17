#include "workers/profiling/target_interpreter.h"

#include <fmt/format.h>

namespace npuprof::profiling {

Result<std::string> CheckInterpreterPath(std::string_view p) {
  if (p.empty()) return Status::Invalid("the interpreter path is empty");
  if (p.size() > kMaxInterpreterPathBytes)
    return Status::Invalid(fmt::format("the interpreter path has {} bytes (at most {})", p.size(),
                                       kMaxInterpreterPathBytes));
  if (p.front() != '/') return Status::Invalid("the interpreter path is not absolute (it must start with '/')");
  if (p.size() > 1 && p.back() == '/') return Status::Invalid("the interpreter path ends in '/' (a directory)");
  for (unsigned char c : p)
    if (c < 0x20 || c == 0x7f)
      return Status::Invalid(fmt::format("the interpreter path has a control byte 0x{:02x}", c));
  size_t at = 1;
  while (at <= p.size()) {
    const size_t slash = p.find('/', at);
    const std::string_view part = p.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
    if (part.empty() || part == "." || part == "..")
      return Status::Invalid(fmt::format("the interpreter path has a component '{}' (empty, . or ..)", part));
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  return std::string(p);
}

std::string InterpreterKey(std::string_view endpoint, std::string_view env_script) {
  return fmt::format("{}|{}", endpoint, env_script);
}

std::optional<std::string> TargetInterpreters::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = paths_.find(key);
  if (it == paths_.end()) return std::nullopt;
  return it->second;
}

void TargetInterpreters::Put(const std::string& key, std::string path) {
  std::lock_guard<std::mutex> lock(mu_);
  paths_[key] = std::move(path);
}

void TargetInterpreters::Forget(const std::string& key, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = paths_.find(key);
  if (it != paths_.end() && it->second == path) paths_.erase(it);
}

size_t TargetInterpreters::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return paths_.size();
}

TargetInterpreters& WorkerInterpreters() {
  static TargetInterpreters* cache = new TargetInterpreters();  // never destroyed: workers' threads may outlive exit
  return *cache;
}

}  // namespace npuprof::profiling
