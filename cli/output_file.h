// Writing what a verb produced to a local file: `-o FILE` of `report` and
// `trace`. The file appears whole or not at all (written to FILE.tmp, then
// renamed); its directory is created when missing.
#pragma once

#include <string>

#include "common/status.h"

namespace npuprof::cli {

Status WriteFileAtomic(const std::string& path, const std::string& data);

}  // namespace npuprof::cli
