// Parser of a safetensors file header, from bytes the caller already read.
//
// Layout of a .safetensors file: 8 bytes little-endian u64 N, then N bytes of
// JSON (tensor name -> {dtype, shape, data_offsets:[begin,end]} plus an
// optional "__metadata__" object of strings), then the tensor data. A caller
// reading over SFTP reads 8 bytes, calls SafetensorsHeaderLength, then reads
// exactly N more bytes and calls ParseSafetensorsHeader: tensor data is never
// needed. No I/O happens here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_depth.h"
#include "common/status.h"

namespace npuprof {

// Headers longer than this are rejected as absurd (docs/FORMATS.md#safetensors: 100 MB,
// decimal: 100,000,000 bytes).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Nesting deeper than this is refused: a header is an object of tensor
// objects holding flat arrays (depth 3); a deep document would make every
// recursive JSON walk (dump, compare) overflow the stack. The limit of every
// file from a target (common/json_depth.h).
inline constexpr int kMaxSafetensorsJsonDepth = kMaxTargetJsonDepth;

// Bytes per element of a safetensors dtype string ("BF16" -> 2), or nullopt
// when the dtype is not one we know. Known: F64 8, F32 4, F16 2, BF16 2,
// F8_E5M2 1, F8_E4M3 1, I64 8, I32 4, I16 2, I8 1, U8 1, BOOL 1, and the
// unsigned U64 8, U32 4, U16 2 that the safetensors format also defines.
std::optional<uint64_t> SafetensorsDtypeBytes(std::string_view dtype);

struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;                 // data_offsets[0], relative to data start
  uint64_t end = 0;                   // data_offsets[1]
  uint64_t bytes = 0;                 // end - begin: the exact size on disk
  uint64_t num_elements = 0;          // product(shape); 1 for a scalar shape []
  bool dtype_known = false;           // SafetensorsDtypeBytes(dtype) has a value
  uint64_t expected_bytes = 0;        // element size * num_elements (0 if unknown)
  bool size_mismatch = false;         // dtype known and expected_bytes != bytes
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;       // sorted by begin offset
  std::map<std::string, std::string> metadata;  // "__metadata__"; non-string values are
                                                // kept as their JSON text
  uint64_t total_bytes = 0;                     // sum of tensor bytes
  uint64_t data_end = 0;                        // largest end offset
  // True when the sorted tensors tile [0, data_end) with no gap and no overlap
  // (what the safetensors format requires).
  bool offsets_contiguous = true;
  std::vector<std::string> mismatches;          // one readable line per size_mismatch
};

// Decodes the header length N from the first 8 bytes of a file.
// Errors: fewer than 8 bytes; N == 0 or N < 2 (no JSON object fits);
// N > kMaxSafetensorsHeaderBytes. Extra bytes after the first 8 are ignored.
Result<uint64_t> SafetensorsHeaderLength(std::string_view first8);

// Same, and also rejects N when 8 + N exceeds the file size the caller knows.
Result<uint64_t> SafetensorsHeaderLength(std::string_view first8, uint64_t file_size_bytes);

// Parses the N header bytes (exactly the JSON; trailing spaces, which writers
// use as padding, are allowed). Errors (kCorruption) name the tensor and the
// field: invalid JSON (a number beyond a double, like 1e999, included), nesting
// deeper than kMaxSafetensorsJsonDepth, not an object, missing/ill-typed dtype,
// shape or data_offsets, begin > end, tensor sizes that add up past 2^64.
// A bytes-vs-shape mismatch is not an error: it is reported in the tensor and
// in `mismatches`. Messages are valid UTF-8.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view header_json_bytes);

// Convenience for callers holding the start of a file (at least 8 + N bytes,
// more is ignored): length, truncation check, then ParseSafetensorsHeader.
Result<SafetensorsHeader> ParseSafetensorsPrefix(std::string_view file_prefix);

}  // namespace npuprof
