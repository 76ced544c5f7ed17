// EnvFromFlags, EnvGridName: see env_option.h.
#include "cli/env_option.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace npuprof::cli {

Result<nlohmann::json> EnvFromFlags(const std::vector<std::string>& entries) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& kv : entries) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::Invalid(fmt::format("--env '{}' is not KEY=VALUE (e.g. --env HCCL_BUFFSIZE=200)", kv));
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

bool IsEnvGridKey(const std::string& key) { return key.rfind(kEnvGridPrefix, 0) == 0; }

Result<std::string> EnvGridName(const std::string& key) {
  const std::string name = key.substr(std::min(key.size(), std::string(kEnvGridPrefix).size()));
  const bool ok = !name.empty() && name.size() <= 128 && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                  std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
  if (!IsEnvGridKey(key) || !ok)
    return Status::Invalid(fmt::format("--grid {}: env name '{}' is not a shell variable name: use letters, digits "
                                       "and _ and do not start with a digit (e.g. --grid env.HCCL_BUFFSIZE=100,200)",
                                       key, name));
  return name;
}

}  // namespace npuprof::cli
