#include "store/rocks_log.h"

#include <rocksdb/env.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

#include <spdlog/spdlog.h>

namespace npuprof::store {
namespace {

class RocksLogForwarder : public rocksdb::Logger {
 public:
  RocksLogForwarder() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}

  using rocksdb::Logger::Logv;
  // The options dump at every open: not worth the log.
  void LogHeader(const char*, va_list) override {}
  // Lines without a level (old call sites): information only.
  void Logv(const char* format, va_list ap) override {
    if (GetInfoLogLevel() <= rocksdb::InfoLogLevel::INFO_LEVEL) Emit(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level == rocksdb::InfoLogLevel::HEADER_LEVEL || level < GetInfoLogLevel()) return;
    Emit(level, format, ap);
  }

 private:
  static void Emit(rocksdb::InfoLogLevel level, const char* format, va_list ap) {
    char buf[1024];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(buf, sizeof buf, format, copy);
    va_end(copy);
    if (n < 0) return;
    std::string line(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
    while (!line.empty() && line.back() == '\n') line.pop_back();
    switch (level) {
      case rocksdb::InfoLogLevel::DEBUG_LEVEL:
      case rocksdb::InfoLogLevel::INFO_LEVEL: spdlog::info("rocksdb: {}", line); break;
      case rocksdb::InfoLogLevel::WARN_LEVEL: spdlog::warn("rocksdb: {}", line); break;
      default: spdlog::error("rocksdb: {}", line); break;
    }
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> MakeRocksLogForwarder() { return std::make_shared<RocksLogForwarder>(); }

}  // namespace npuprof::store
