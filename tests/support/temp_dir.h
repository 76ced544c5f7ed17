// TempDir: a private directory under /tmp for one test (mkdtemp, 0700),
// removed with everything in it when the object goes out of scope. `path`
// is empty when it could not be made. WriteTree: a file written with its
// parent directories, for laying out what a tool leaves on disk.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
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

inline void WriteTree(const std::string& path, const std::string& body) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << body;
}

}  // namespace npuprof::testing
