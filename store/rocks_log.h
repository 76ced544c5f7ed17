// RocksDB's info log, sent to the process's own log (spdlog) instead of a
// LOG file in the store directory: a LOG file that meets a full disk makes
// RocksDB 7.8 abort on its next line (WritableFileWriter's
// "sync_without_flush_called_" assertion), and a full disk is exactly when
// its warnings matter. Warnings and errors only.
#pragma once

#include <memory>

namespace rocksdb {
class Logger;
}

namespace npuprof::store {

std::shared_ptr<rocksdb::Logger> MakeRocksLogForwarder();

}  // namespace npuprof::store
