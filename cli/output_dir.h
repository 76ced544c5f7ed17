// The directory a verb writes its files into (`export RUN DIR`, the parent of
// `-o FILE`): created with its parents when missing; when it cannot be,
// the error says what is in the way ("DIR is a symbolic link to X, which
// does not exist", "DIR is a file, not a directory") and the fix, rather
// than the system's "File exists".
#pragma once

#include <string>

#include "common/status.h"

namespace npuprof::cli {

Status EnsureOutputDir(const std::string& dir);

}  // namespace npuprof::cli
