#include "common/time_util.h"

#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>

namespace npuprof {

int64_t NowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string IsoTimeMs(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

std::string RandomHex(int nbytes) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  out.reserve(static_cast<size_t>(nbytes) * 2);
  for (int i = 0; i < nbytes; ++i) out += fmt::format("{:02x}", static_cast<unsigned>(rng() & 0xff));
  return out;
}

std::string NewRunId(int64_t now_ms) {
  std::time_t secs = static_cast<std::time_t>(now_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("r{:04}{:02}{:02}{:02}{:02}{:02}-{}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, RandomHex(5));
}

}  // namespace npuprof
