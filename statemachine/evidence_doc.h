// A cursor over one JSON document of a run's evidence, for the typed
// decoders (memory_evidence.h, memory_report_input.h). Pure, never throws.
//
// Contract: a key that is absent or null reads as absent (the output is left
// as it was); a key that is there with another shape is a Status::Corruption
// naming the document path and both shapes ("vllm_log.summary.weights_gib
// must be a number, not a string"). Nothing is defaulted silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_shape.h"
#include "common/status.h"

namespace npuprof::sm {

class EvidenceDoc {
 public:
  EvidenceDoc(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool Has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_[key].is_null(); }
  bool Has(const std::string& key) const { return Has(key.c_str()); }
  const nlohmann::json& At(const char* key) const { return j_[key]; }
  std::string PathOf(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  EvidenceDoc Sub(const char* key) const { return EvidenceDoc(Has(key) ? j_[key] : Null(), PathOf(key)); }
  const nlohmann::json& raw() const { return j_; }
  const std::string& path() const { return path_; }
  bool present() const { return !j_.is_null(); }

  Status Wrong(const std::string& key, const char* want) const {
    return Status::Corruption(fmt::format("{} must be {}, not {}", PathOf(key), want,
                                          JsonTypeWords(j_.is_object() && j_.contains(key) ? j_[key] : Null())));
  }
  Status WrongItem(const std::string& key, size_t i, const nlohmann::json& item, const char* want) const {
    return Status::Corruption(fmt::format("{}[{}] must be {}, not {}", PathOf(key), i, want, JsonTypeWords(item)));
  }
  // The document itself must be an object (absent is fine: check present()).
  Status IsObject() const {
    if (present() && !j_.is_object())
      return Status::Corruption(fmt::format("{} must be an object, not {}", path_, JsonTypeWords(j_)));
    return Status::Ok();
  }
  Status Num(const char* key, std::optional<double>& out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_number()) return Wrong(key, "a number");
    out = At(key).get<double>();
    return Status::Ok();
  }
  Status Int(const char* key, std::optional<int64_t>& out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_number_integer()) return Wrong(key, "a whole number");
    out = At(key).get<int64_t>();
    return Status::Ok();
  }
  Status Str(const char* key, std::string& out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_string()) return Wrong(key, "a string");
    out = At(key).get<std::string>();
    return Status::Ok();
  }
  Status Str(const char* key, std::optional<std::string>& out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_string()) return Wrong(key, "a string");
    out = At(key).get<std::string>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool& out) const {
    if (!Has(key)) return Status::Ok();
    if (!At(key).is_boolean()) return Wrong(key, "true or false");
    out = At(key).get<bool>();
    return Status::Ok();
  }
  Status Object(const char* key) const {
    if (Has(key) && !At(key).is_object()) return Wrong(key, "an object");
    return Status::Ok();
  }
  Status Array(const char* key) const {
    if (Has(key) && !At(key).is_array()) return Wrong(key, "an array");
    return Status::Ok();
  }
  // An array of whole numbers (absent leaves out unchanged).
  Status Ints(const char* key, std::vector<int64_t>& out) const {
    if (Status st = Array(key); !st.ok() || !Has(key)) return st;
    std::vector<int64_t> v;
    for (const auto& x : At(key)) {
      if (!x.is_number_integer()) return WrongItem(key, v.size(), x, "a whole number");
      v.push_back(x.get<int64_t>());
    }
    out = std::move(v);
    return Status::Ok();
  }
  // An array of strings (absent leaves out unchanged).
  Status Strs(const char* key, std::vector<std::string>& out) const {
    if (Status st = Array(key); !st.ok() || !Has(key)) return st;
    std::vector<std::string> v;
    for (const auto& x : At(key)) {
      if (!x.is_string()) return WrongItem(key, v.size(), x, "a string");
      v.push_back(x.get<std::string>());
    }
    out = std::move(v);
    return Status::Ok();
  }

  static const nlohmann::json& Null() {
    static const nlohmann::json n;
    return n;
  }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

#define NP_EVIDENCE_TRY(expr)                         \
  do {                                                \
    if (::npuprof::Status st_ = (expr); !st_.ok()) return st_; \
  } while (0)

}  // namespace npuprof::sm
