// What memory.weights reads of a model directory, in one remote command:
// config.json (at most kMaxConfigBytes) and, for every *.safetensors file,
// its name, size, first 8 bytes and its header (the bytes after those 8,
// as many as they say, when that is at most kMaxInlineHeaderBytes).
// Tensor data is never read. The command is built from argv; its output is
// read here, purely. The header length is not trusted from the target's
// shell: the handler computes it from the first 8 bytes and the size
// (parsers/safetensors_header.h) and reads a header that did not come back
// whole with a file operation; a caller that cannot use the command at all
// reads everything with file operations.
//
// Output of ModelHeadersArgv(dir):
//   npuprof-model 1
//   config ok <base64> | config missing
//   dir ok | dir missing                       (missing: nothing follows)
//   file <base64 name> <size> <base64 first 8 bytes>|- <base64 header>|-
//   (an unreadable file: size 0 and "-" for both, left to file operations)
//   ...
//   end
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace npuprof::workers {

inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxInlineHeaderBytes = uint64_t{16} << 20;
inline constexpr size_t kMaxModelFiles = 20000;

struct ModelFile {
  std::string name;
  uint64_t size = 0;
  std::string first8;                 // "" when not sent (unreadable)
  std::optional<std::string> header;  // nullopt: not sent (too large, or unreadable length)
};

struct ModelHeaders {
  std::optional<std::string> config;  // nullopt: no config.json
  bool dir_exists = false;
  std::vector<ModelFile> files;
};

std::vector<std::string> ModelHeadersArgv(const std::string& dir);
size_t ModelHeadersOutputCap();
Result<ModelHeaders> ParseModelHeaders(const std::string& out);

}  // namespace npuprof::workers
