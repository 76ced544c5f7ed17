#include "workers/profiling/chat_requests.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json_depth.h"

namespace npuprof::profiling {

namespace {
constexpr const char* kPrefix = "You are helping to profile an Ascend NPU inference service. Request number";
constexpr size_t kMaxBody = kRecordBodyMax;

// Printable ASCII only, so the record always serialises as JSON.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? c : '?';
  return out;
}
}  // namespace

std::string BuildPrompt(int64_t index, int64_t prompt_tokens) {
  std::string p = fmt::format("{} {}.", kPrefix, index);
  int64_t words = 1;
  for (char c : p)
    if (c == ' ') ++words;
  static const char* kFiller[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"};
  for (int64_t i = 0; words < prompt_tokens; ++i, ++words) {
    p += ' ';
    p += kFiller[i % 8];
  }
  return p;
}

nlohmann::json ChatBody(const std::string& model, const std::string& prompt, int64_t max_tokens,
                        const std::string& image_data_url) {
  nlohmann::json content;
  if (image_data_url.empty()) {
    content = prompt;
  } else {
    content = nlohmann::json::array({{{"type", "text"}, {"text", prompt}},
                                     {{"type", "image_url"}, {"image_url", {{"url", image_data_url}}}}});
  }
  return {{"model", model},
          {"messages", nlohmann::json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"top_p", 1},
          {"stream", false}};
}

nlohmann::json RequestRecord(int64_t index, const Result<ssh::HttpResponse>& r, int64_t elapsed_ms,
                             uint64_t body_size) {
  if (!r.ok())
    return {{"index", index}, {"ok", false}, {"status", nullptr}, {"latency_ms", elapsed_ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(elapsed_ms)}, {"error", r.status().message()}};
  const bool ok = r->status >= 200 && r->status < 300;
  nlohmann::json rec = {{"index", index}, {"ok", ok}, {"status", r->status}, {"latency_ms", r->latency_ms}};
  const uint64_t size = std::max<uint64_t>(body_size, r->body.size());
  Result<nlohmann::json> body = ParseJson(r->body, kMaxTargetJsonDepth);
  if (body.ok() && size <= kMaxBody) {
    rec["body"] = std::move(body).value();
  } else {
    rec["body"] = Printable(std::string_view(r->body).substr(0, kMaxBody));
    if (size > kMaxBody) rec["body_truncated_from"] = size;
  }
  if (!ok) rec["error"] = fmt::format("HTTP {} {}", r->status, r->reason);
  return rec;
}

}  // namespace npuprof::profiling
