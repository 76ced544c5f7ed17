#include "parsers/hbm_sample_output.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "parsers/npu_smi_parser.h"

namespace npuprof::parsers {

namespace {

// The nanoseconds after `tag` at the start of a line of text, when they are
// 16..19 digits (a plausible epoch in ns); nullopt otherwise.
std::optional<int64_t> Stamp(std::string_view text, std::string_view tag) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, tag.size()) == tag) {
      const std::string_view digits = line.substr(tag.size());
      if (digits.size() < 16 || digits.size() > 19) return std::nullopt;
      int64_t v = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
      }
      return v;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace

Result<HbmSampleReading> ParseHbmSampleOutput(std::string_view out, std::string_view err,
                                              const std::vector<int64_t>& devices, int64_t worker_t0_ms,
                                              int64_t worker_t1_ms) {
  auto snap = ParseNpuSmi(out);
  if (!snap.ok()) return snap.status();
  HbmSampleReading r;
  const auto t0 = Stamp(err, kHbmSampleT0Tag), t1 = Stamp(err, kHbmSampleT1Tag);
  if (t0 && t1 && *t0 <= *t1) {
    r.t_ms = (*t0 / 2 + *t1 / 2) / 1000000;
    r.clock = "target";
  } else {
    r.t_ms = worker_t0_ms + (worker_t1_ms - worker_t0_ms) / 2;
    r.clock = "worker";
  }
  const auto& listed = snap->devices;
  const auto add = [&](int64_t id) {
    const NpuDevice& d = listed[static_cast<size_t>(id)];
    r.devices.push_back({id, d.device_memory_used_mb, d.device_memory_total_mb});
  };
  if (devices.empty()) {
    for (size_t i = 0; i < listed.size(); ++i) add(static_cast<int64_t>(i));
    return r;
  }
  for (int64_t id : devices) {
    if (id < 0 || static_cast<size_t>(id) >= listed.size())
      return Status::Invalid(fmt::format("device {} is not listed by npu-smi info ({} device(s) listed): the "
                                         "service's devices are logical ids in npu-smi's listing order",
                                         id, listed.size()));
    add(id);
  }
  return r;
}

}  // namespace npuprof::parsers
