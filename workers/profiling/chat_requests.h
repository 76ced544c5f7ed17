// The workload's chat-completion requests (docs/BEHAVIOUR.md#tp-workload):
// prompt text, request body, and the per-request record kept in the manifest.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "workers/ssh/http_over_ssh.h"

namespace npuprof::profiling {

// About `prompt_tokens` whitespace-separated words: a fixed prefix, the
// request number, then filler words. Deterministic.
std::string BuildPrompt(int64_t index, int64_t prompt_tokens);

// OpenAI chat body: model, one user message (text, or text + image_url part
// when image_data_url is not empty), max_tokens, temperature 0, top_p 1.
nlohmann::json ChatBody(const std::string& model, const std::string& prompt, int64_t max_tokens,
                        const std::string& image_data_url);

// What a record keeps of an answer's body.
inline constexpr size_t kRecordBodyMax = 64 * 1024;

// {index, ok (2xx), status, latency_ms, body (JSON when parseable, else text,
// cut at 64 KiB)} or {index, ok:false, status:null, latency_ms, error}.
// body_size: the body's whole size when r's body holds only its start (the
// answer was read on the target, workers/profiling/target_http.h); 0: r's
// body is whole.
nlohmann::json RequestRecord(int64_t index, const Result<ssh::HttpResponse>& r, int64_t elapsed_ms,
                             uint64_t body_size = 0);

}  // namespace npuprof::profiling
