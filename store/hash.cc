// Sha256Hex and EventHash (encoding documented in event_store.h).
#include <openssl/evp.h>

#include <string>

#include "store/event_store.h"

namespace npuprof::store {
namespace {

// Appends one netstring: "<decimal byte length>:<bytes>,".
void AppendField(std::string* out, const std::string& field) {
  out->append(std::to_string(field.size()));
  out->push_back(':');
  out->append(field);
  out->push_back(',');
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    return {};  // only on OpenSSL internal failure; callers treat "" as invalid
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[md[i] >> 4]);
    hex.push_back(kHex[md[i] & 0x0f]);
  }
  return hex;
}

std::string EventHash(const proto::Event& ev) {
  std::string buf;
  buf.reserve(64 + ev.run_id().size() + ev.type().size() + ev.payload_json().size() +
              ev.cause().size() + 64);
  AppendField(&buf, ev.prev_hash());
  AppendField(&buf, ev.run_id());
  AppendField(&buf, std::to_string(ev.seq()));
  AppendField(&buf, ev.type());
  AppendField(&buf, std::to_string(ev.time_ms()));
  AppendField(&buf, ev.payload_json());
  AppendField(&buf, ev.cause());
  return Sha256Hex(buf);
}

}  // namespace npuprof::store
