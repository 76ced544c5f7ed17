#include "workers/memory/model_headers.h"

#include <fmt/format.h>

#include "common/base64.h"

namespace npuprof::workers {

namespace {

// $1 = dir, $2 = config cap, $3 = header cap. od reads the 8-byte length
// in the host's byte order (safetensors is little-endian, as are the hosts
// NPUs sit in); the handler checks it against the first 8 bytes anyway.
constexpr const char* kModel = R"SH(d=$1
printf '' | base64 -w 0 >/dev/null 2>&1 || { echo "no base64 -w here" >&2; exit 3; }
echo "npuprof-model 1"
if [ -f "$d/config.json" ] && [ -r "$d/config.json" ]; then
  echo "config ok $(head -c "$2" -- "$d/config.json" | base64 -w 0)"
else echo "config missing"; fi
if [ ! -d "$d" ]; then echo "dir missing"; echo end; exit 0; fi
echo "dir ok"
for f in "$d"/*.safetensors "$d"/.*.safetensors; do
  [ -f "$f" ] || continue
  if [ ! -r "$f" ]; then echo "file $(printf '%s' "${f##*/}" | base64 -w 0) 0 - -"; continue; fi
  s=$(wc -c <"$f") && s=$((s + 0)) || continue
  n=$(od -An -tu8 -N8 -- "$f" 2>/dev/null | tr -d ' \n')
  case $n in ''|*[!0-9]*) h=-;; *) if [ "${#n}" -le 12 ] && [ "$n" -le "$3" ] && [ "$n" -gt 0 ]; then
      h=$(tail -c +9 -- "$f" | head -c "$n" | base64 -w 0); [ -n "$h" ] || h=-; else h=-; fi;; esac
  echo "file $(printf '%s' "${f##*/}" | base64 -w 0) $s $(head -c 8 -- "$f" | base64 -w 0) $h"
done
echo end)SH";

Result<std::string> Decode(std::string_view b64, const std::string& what) {
  auto r = DecodeBase64(b64);
  if (!r.ok()) return Status::Corruption(fmt::format("the model read's {}: {}", what, r.status().message()));
  return std::move(*r);
}

}  // namespace

std::vector<std::string> ModelHeadersArgv(const std::string& dir) {
  return {"sh", "-c", kModel, "npuprof-model", dir, std::to_string(kMaxConfigBytes),
          std::to_string(kMaxInlineHeaderBytes)};
}

size_t ModelHeadersOutputCap() { return (kMaxConfigBytes + kMaxInlineHeaderBytes * 4) / 3 * 4 + kMaxModelFiles * 512; }

Result<ModelHeaders> ParseModelHeaders(const std::string& out) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    if (lines.size() > kMaxModelFiles + 4) return Status::Corruption("the model read printed more files than it may");
    const size_t nl = out.find('\n', pos);
    const size_t end = nl == std::string::npos ? out.size() : nl;
    lines.push_back(std::string_view(out).substr(pos, end - pos));
    pos = nl == std::string::npos ? out.size() : nl + 1;
  }
  if (lines.size() < 4 || lines[0] != "npuprof-model 1")
    return Status::Corruption("the model read did not print its 'npuprof-model 1' header");
  if (lines.back() != "end") return Status::Corruption("the model read did not end with its 'end' line");
  ModelHeaders m;
  if (lines[1].substr(0, 10) == "config ok ") {
    auto c = Decode(lines[1].substr(10), "config.json");
    if (!c.ok()) return c.status();
    if (c->size() > kMaxConfigBytes) return Status::Corruption("the model read's config.json is over its cap");
    m.config = std::move(*c);
  } else if (lines[1] != "config missing") {
    return Status::Corruption("the model read's config line is neither 'config ok <base64>' nor 'config missing'");
  }
  if (lines[2] == "dir missing") {
    if (lines.size() != 4) return Status::Corruption("the model read printed files of a missing dir");
    return m;
  }
  if (lines[2] != "dir ok") return Status::Corruption("the model read's dir line is neither 'dir ok' nor 'dir missing'");
  m.dir_exists = true;
  for (size_t i = 3; i + 1 < lines.size(); ++i) {
    std::vector<std::string_view> f;
    std::string_view rest = lines[i];
    while (f.size() < 6) {
      const size_t sp = rest.find(' ');
      f.push_back(rest.substr(0, sp));
      if (sp == std::string_view::npos) break;
      rest = rest.substr(sp + 1);
    }
    if (f.size() != 5 || f[0] != "file")
      return Status::Corruption(fmt::format("the model read's line {} is not 'file <name> <size> <first 8> <header>'", i + 1));
    ModelFile mf;
    auto name = Decode(f[1], "file name");
    if (!name.ok()) return name.status();
    if (name->empty() || name->find('/') != std::string::npos || name->size() > 4096)
      return Status::Corruption(fmt::format("the model read's line {} names no file", i + 1));
    mf.name = std::move(*name);
    if (f[2].empty() || f[2].size() > 19 || f[2].find_first_not_of("0123456789") != std::string_view::npos)
      return Status::Corruption(fmt::format("the model read's file {} has no size", mf.name));
    mf.size = std::stoull(std::string(f[2]));
    if (f[3] != "-") {  // "-": unreadable, left to a file operation (which names why)
      auto first8 = Decode(f[3], "first 8 bytes of " + mf.name);
      if (!first8.ok()) return first8.status();
      if (first8->size() > 8)
        return Status::Corruption(fmt::format("the model read's file {} sent more than 8 bytes", mf.name));
      mf.first8 = std::move(*first8);
    }
    if (f[4] != "-") {
      auto h = Decode(f[4], "header of " + mf.name);
      if (!h.ok()) return h.status();
      if (h->size() > kMaxInlineHeaderBytes) return Status::Corruption(fmt::format("the model read's header of {} is over its cap", mf.name));
      mf.header = std::move(*h);
    }
    m.files.push_back(std::move(mf));
  }
  return m;
}

}  // namespace npuprof::workers
