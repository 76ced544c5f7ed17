// TempDir: a private directory under /tmp for one test (mkdtemp, 0700),
// removed with everything in it when the object goes out of scope. `path`
// is empty when it could not be made.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace npuprof::testing {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "npuprof-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace npuprof::testing
