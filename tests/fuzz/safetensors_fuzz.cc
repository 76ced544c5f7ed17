// The safetensors header parser on any bytes, read three ways: as the JSON
// header itself, as the start of a file (8-byte length + header), and as the
// JSON behind a length that fits. Promises: a length is within the limit and
// within the bytes the caller has; a parsed header's tensors are sorted, their
// sizes are end - begin, the totals add up without wrapping, the contiguity
// and mismatch verdicts are what the tensors say; the weight attribution of
// its tensors adds up and its manifest serialises.
#include <algorithm>
#include <limits>

#include "parsers/safetensors_header.h"
#include "parsers/weight_attribution.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

void CheckAttribution(const SafetensorsHeader& h, int tp) {
  const auto tensors = WeightTensorsFromHeader(h, "model.safetensors");
  FUZZ_CHECK(tensors.size() == h.tensors.size(), "{} weight tensors from {} header tensors", tensors.size(),
             h.tensors.size());
  ParallelConfig config;
  config.tp = tp;
  auto a = AttributeWeights(tensors, config);
  if (!a.ok()) {
    CheckError(a.status(), "AttributeWeights");
    return;
  }
  uint64_t total = 0, per_device = 0;
  for (const AttributedTensor& t : a->tensors) {
    FUZZ_CHECK(t.divisor >= 1, "tensor {} divided by 0", t.tensor.name);
    FUZZ_CHECK(t.per_device_bytes <= t.tensor.bytes, "tensor {}: {} per device of {} bytes", t.tensor.name,
               t.per_device_bytes, t.tensor.bytes);
    total += t.tensor.bytes;
    per_device += t.per_device_bytes;
  }
  FUZZ_CHECK(a->total_bytes == total && a->per_device_bytes == per_device, "the totals do not add up");
  uint64_t category_total = 0;
  for (const CategoryTotal& c : a->categories) category_total += c.bytes;
  FUZZ_CHECK(category_total == a->total_bytes, "categories add up to {} of {}", category_total, a->total_bytes);
  CheckJson(WeightManifestJson(*a), "WeightManifestJson");
}

void CheckHeader(const Result<SafetensorsHeader>& h, int tp) {
  if (!h.ok()) {
    CheckError(h.status(), "ParseSafetensorsHeader");
    return;
  }
  uint64_t total = 0, data_end = 0, expected_begin = 0;
  bool contiguous = true;
  size_t mismatches = 0;
  for (size_t i = 0; i < h->tensors.size(); ++i) {
    const SafetensorsTensor& t = h->tensors[i];
    if (i > 0) {
      const SafetensorsTensor& p = h->tensors[i - 1];
      FUZZ_CHECK(p.begin < t.begin || (p.begin == t.begin && p.name <= t.name), "tensors out of order at {}", i);
    }
    FUZZ_CHECK(t.begin <= t.end && t.bytes == t.end - t.begin, "tensor {}: [{}, {}) is {} bytes", t.name, t.begin,
               t.end, t.bytes);
    FUZZ_CHECK(total <= std::numeric_limits<uint64_t>::max() - t.bytes, "the total size wraps at tensor {}",
               t.name);
    total += t.bytes;
    data_end = std::max(data_end, t.end);
    contiguous = contiguous && t.begin == expected_begin;
    expected_begin = t.end;
    FUZZ_CHECK(t.dtype_known || !t.size_mismatch, "tensor {}: a mismatch for an unknown dtype", t.name);
    FUZZ_CHECK(t.size_mismatch || !t.dtype_known || t.expected_bytes == t.bytes,
               "tensor {}: {} bytes expected, {} on disk, and no mismatch", t.name, t.expected_bytes, t.bytes);
    mismatches += t.size_mismatch ? 1 : 0;
  }
  FUZZ_CHECK(h->total_bytes == total, "total_bytes {} but the tensors hold {}", h->total_bytes, total);
  FUZZ_CHECK(h->data_end == data_end, "data_end {} but the tensors end at {}", h->data_end, data_end);
  FUZZ_CHECK(h->offsets_contiguous == contiguous, "offsets_contiguous {} is wrong", h->offsets_contiguous);
  FUZZ_CHECK(h->mismatches.size() == mismatches, "{} mismatch lines for {} mismatches", h->mismatches.size(),
             mismatches);
  CheckAttribution(*h, tp);
}

std::string LittleEndian64(uint64_t n) {
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

int FuzzSafetensors(const uint8_t* data, size_t size) {
  const std::string_view bytes = AsText(data, size);
  const int tp = size > 0 ? 1 + data[size - 1] % 8 : 1;

  // The bytes as the header JSON.
  const auto as_header = ParseSafetensorsHeader(bytes);
  CheckHeader(as_header, tp);

  // The bytes as the start of a file.
  if (auto n = SafetensorsHeaderLength(bytes, size); !n.ok()) {
    CheckError(n.status(), "SafetensorsHeaderLength");
  } else {
    FUZZ_CHECK(*n >= 2 && *n <= kMaxSafetensorsHeaderBytes && *n <= size - 8, "length {} of a {}-byte file", *n,
               size);
  }
  const auto as_prefix = ParseSafetensorsPrefix(bytes);
  if (as_prefix.ok()) {
    auto n = SafetensorsHeaderLength(bytes);
    FUZZ_CHECK(n.ok() && 8 + *n <= size, "a prefix parsed past the {} bytes it has", size);
  }
  CheckHeader(as_prefix, tp);

  // The bytes behind a length that fits: the same verdict as the JSON alone.
  if (size >= 2) {
    const std::string file = LittleEndian64(size) + std::string(bytes);
    const auto framed = ParseSafetensorsPrefix(file);
    FUZZ_CHECK(framed.ok() == as_header.ok(), "framed: ok={}, bare: ok={}", framed.ok(), as_header.ok());
    if (framed.ok()) {
      FUZZ_CHECK(framed->total_bytes == as_header->total_bytes && framed->tensors.size() == as_header->tensors.size(),
                 "framing changed the header");
    }
  }
  return 0;
}

}  // namespace npuprof::fuzz
