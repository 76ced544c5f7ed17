// FakeToolsBin: a bin directory for running a remote command locally with a
// PATH of its own. It holds symlinks to this machine's real tools (looked
// up in /bin, then /usr/bin; a tool found in neither is left out) and, for
// each fake, an executable `#!/bin/sh` script with the given body (a fake
// msprof, python3, ...). Returns the directory, `<root>/bin`.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.h"

namespace npuprof::testing {

inline std::string FakeToolsBin(const std::string& root, std::initializer_list<const char*> real_tools,
                                const std::vector<std::pair<std::string, std::string>>& fakes) {
  namespace fs = std::filesystem;
  const std::string bin = root + "/bin";
  fs::create_directories(bin);
  for (const char* tool : real_tools) {
    for (const char* dir : {"/bin/", "/usr/bin/"})
      if (fs::exists(std::string(dir) + tool)) {
        fs::create_symlink(std::string(dir) + tool, bin + "/" + tool);
        break;
      }
  }
  for (const auto& [name, body] : fakes) {
    WriteTree(bin + "/" + name, "#!/bin/sh\n" + body);
    chmod((bin + "/" + name).c_str(), 0755);
  }
  return bin;
}

}  // namespace npuprof::testing
