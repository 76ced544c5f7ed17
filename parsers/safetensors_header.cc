#include "parsers/safetensors_header.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/utf8.h"

namespace npuprof {
namespace {

using nlohmann::json;

// a * b, or nullopt on u64 overflow.
std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

// A JSON value quoted in an error message: at most 60 bytes of its text.
std::string Quote(const json& v) { return TruncateUtf8(v.dump(), 60); }

std::optional<uint64_t> AsU64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

Result<SafetensorsTensor> ParseTensorEntry(const std::string& name, const json& entry) {
  if (!entry.is_object()) {
    return Status::Corruption(fmt::format("safetensors header: tensor '{}' is not a JSON object", name));
  }
  SafetensorsTensor t;
  t.name = name;

  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return Status::Corruption(fmt::format("safetensors header: tensor '{}' has no string 'dtype'", name));
  }
  t.dtype = dtype->get<std::string>();

  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return Status::Corruption(fmt::format("safetensors header: tensor '{}' has no array 'shape'", name));
  }
  t.num_elements = 1;
  bool elements_overflow = false;
  for (const json& d : *shape) {
    auto dim = AsU64(d);
    if (!dim) {
      return Status::Corruption(fmt::format(
          "safetensors header: tensor '{}' shape has a non-integer or negative dimension {}", name,
          Quote(d)));
    }
    t.shape.push_back(*dim);
    auto product = CheckedMul(t.num_elements, *dim);
    if (!product) elements_overflow = true;
    t.num_elements = product.value_or(0);
  }

  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    return Status::Corruption(fmt::format(
        "safetensors header: tensor '{}' has no 'data_offsets' array of two integers", name));
  }
  auto begin = AsU64((*offsets)[0]);
  auto end = AsU64((*offsets)[1]);
  if (!begin || !end) {
    return Status::Corruption(fmt::format(
        "safetensors header: tensor '{}' data_offsets {} are not non-negative integers", name,
        Quote(*offsets)));
  }
  if (*begin > *end) {
    return Status::Corruption(fmt::format(
        "safetensors header: tensor '{}' data_offsets begin {} > end {}", name, *begin, *end));
  }
  t.begin = *begin;
  t.end = *end;
  t.bytes = *end - *begin;

  if (auto elem = SafetensorsDtypeBytes(t.dtype)) {
    t.dtype_known = true;
    auto expected = elements_overflow ? std::nullopt : CheckedMul(*elem, t.num_elements);
    t.expected_bytes = expected.value_or(0);
    t.size_mismatch = !expected || *expected != t.bytes;
  }
  return t;
}

}  // namespace

std::optional<uint64_t> SafetensorsDtypeBytes(std::string_view dtype) {
  struct Entry {
    std::string_view name;
    uint64_t bytes;
  };
  static constexpr Entry kSizes[] = {
      {"F64", 8},     {"F32", 4},     {"F16", 2}, {"BF16", 2}, {"F8_E5M2", 1},
      {"F8_E4M3", 1}, {"I64", 8},     {"I32", 4}, {"I16", 2},  {"I8", 1},
      {"U8", 1},      {"BOOL", 1},    {"U64", 8}, {"U32", 4},  {"U16", 2},
  };
  for (const Entry& e : kSizes) {
    if (e.name == dtype) return e.bytes;
  }
  return std::nullopt;
}

Result<uint64_t> SafetensorsHeaderLength(std::string_view first8) {
  if (first8.size() < 8) {
    return Status::Corruption(fmt::format(
        "safetensors file truncated: need 8 bytes for the header length, got {}", first8.size()));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | static_cast<uint8_t>(first8[static_cast<size_t>(i)]);
  }
  if (n < 2) {
    return Status::Corruption(fmt::format(
        "safetensors header length {} is too small to hold a JSON object", n));
  }
  if (n > kMaxSafetensorsHeaderBytes) {
    return Status::Corruption(fmt::format(
        "safetensors header length {} bytes exceeds the {} byte limit: not a safetensors file, "
        "or a corrupt one",
        n, kMaxSafetensorsHeaderBytes));
  }
  return n;
}

Result<uint64_t> SafetensorsHeaderLength(std::string_view first8, uint64_t file_size_bytes) {
  auto n = SafetensorsHeaderLength(first8);
  if (!n.ok()) return n;
  if (file_size_bytes < 8 || *n > file_size_bytes - 8) {
    return Status::Corruption(fmt::format(
        "safetensors header length {} bytes is larger than the {} bytes the file has after its "
        "8-byte length",
        *n, file_size_bytes < 8 ? 0 : file_size_bytes - 8));
  }
  return n;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view header_json_bytes) {
  // The nesting limit is checked while parsing (common/json_depth.h); a
  // number beyond a double ("1e999") is not valid JSON there either.
  Result<json> parsed = ParseJson(header_json_bytes, kMaxSafetensorsJsonDepth);
  if (!parsed.ok())
    return Status::Corruption(
        fmt::format("safetensors header is {}: not a safetensors header", parsed.status().message()));
  const json doc = std::move(parsed).value();
  if (!doc.is_object()) {
    return Status::Corruption("safetensors header JSON is not an object");
  }

  SafetensorsHeader header;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) {
        return Status::Corruption("safetensors header: '__metadata__' is not an object");
      }
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        header.metadata[m.key()] = m.value().is_string() ? m.value().get<std::string>() : m.value().dump();
      }
      continue;
    }
    auto tensor = ParseTensorEntry(it.key(), it.value());
    if (!tensor.ok()) return tensor.status();
    header.tensors.push_back(std::move(tensor).value());
  }

  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
            });
  uint64_t expected_begin = 0;
  for (const SafetensorsTensor& t : header.tensors) {
    if (t.bytes > std::numeric_limits<uint64_t>::max() - header.total_bytes) {
      return Status::Corruption(fmt::format(
          "safetensors header: the tensor sizes add up past 2^64 bytes at tensor '{}' (overlapping "
          "data_offsets): a corrupt header",
          t.name));
    }
    header.total_bytes += t.bytes;
    header.data_end = std::max(header.data_end, t.end);
    if (t.begin != expected_begin) header.offsets_contiguous = false;
    expected_begin = t.end;
    if (t.size_mismatch) {
      header.mismatches.push_back(fmt::format(
          "tensor '{}': data_offsets give {} bytes but dtype {} x shape [{}] needs {}", t.name,
          t.bytes, t.dtype, fmt::join(t.shape, ","),
          t.expected_bytes == 0 && t.num_elements != 0 ? std::string("an overflowing size")
                                                       : std::to_string(t.expected_bytes)));
    }
  }
  return header;
}

Result<SafetensorsHeader> ParseSafetensorsPrefix(std::string_view file_prefix) {
  auto n = SafetensorsHeaderLength(file_prefix);
  if (!n.ok()) return n.status();
  if (file_prefix.size() - 8 < *n) {
    return Status::Corruption(fmt::format(
        "safetensors header truncated: length says {} bytes, only {} available", *n,
        file_prefix.size() - 8));
  }
  return ParseSafetensorsHeader(file_prefix.substr(8, *n));
}

}  // namespace npuprof
