#include "workers/log_tails.h"

#include <fmt/format.h>

#include "common/base64.h"

namespace npuprof::workers {

namespace {

// $1 = max bytes, then the paths. tail -c reads only the end of a large
// file; base64 -w 0 prints it on one line (a target without it fails the
// command, and the caller reads the files one by one).
constexpr const char* kTails = R"SH(m=$1; shift
base64 -w 0 </dev/null >/dev/null 2>&1 || { echo "no base64 -w here" >&2; exit 3; }
echo npuprof-tails
i=0
for f in "$@"; do
  if [ ! -f "$f" ]; then echo "$i missing"
  elif [ ! -r "$f" ]; then echo "$i unreadable"
  elif t=$(tail -c "$m" -- "$f" | base64 -w 0) && [ -n "$t" -o ! -s "$f" ]; then echo "$i ok $t"
  else echo "$i unreadable"
  fi
  i=$((i+1))
done)SH";

// $1 = cap, then the paths. A file of at most cap bytes is read whole
// (head -c cap: a file that grew since its size was taken is cut at cap).
constexpr const char* kHeadTails = R"SH(c=$1; shift
base64 -w 0 </dev/null >/dev/null 2>&1 || { echo "no base64 -w here" >&2; exit 3; }
hb=$((c / 2)); tb=$((c - c / 2))
echo npuprof-headtails
i=0
for f in "$@"; do
  if [ ! -f "$f" ]; then echo "$i missing"
  elif [ ! -r "$f" ]; then echo "$i unreadable"
  else
    s=$(wc -c <"$f") && s=$((s + 0)) || s=-1
    if [ "$s" -lt 0 ]; then echo "$i unreadable"
    elif [ "$s" -le "$c" ]; then echo "$i ok $s $(head -c "$c" -- "$f" | base64 -w 0) "
    else echo "$i ok $s $(head -c "$hb" -- "$f" | base64 -w 0) $(tail -c "$tb" -- "$f" | base64 -w 0)"
    fi
  fi
  i=$((i+1))
done)SH";

// Splits out into lines; the first must be `header`.
Result<std::vector<std::string_view>> Lines(const std::string& out, const char* header, size_t files) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < out.size() && lines.size() <= files + 1) {
    const size_t nl = out.find('\n', pos);
    const size_t end = nl == std::string::npos ? out.size() : nl;
    lines.push_back(std::string_view(out).substr(pos, end - pos));
    pos = nl == std::string::npos ? out.size() : nl + 1;
  }
  if (lines.empty() || lines[0] != header)
    return Status::Corruption(fmt::format("the file read command did not print its '{}' header", header));
  if (lines.size() != files + 1)
    return Status::Corruption(fmt::format("the file read command printed {} of {} files{}",
                                          std::min(lines.size() - 1, files), files,
                                          lines.size() > files + 1 ? " and more lines" : ""));
  return lines;
}

// The rest of line i after its "<i> " prefix.
Result<std::string_view> AfterIndex(std::string_view line, size_t i) {
  const std::string prefix = std::to_string(i) + " ";
  if (line.substr(0, prefix.size()) != prefix)
    return Status::Corruption(fmt::format("the file read command's line {} does not start with its index {}", i + 1, i));
  return line.substr(prefix.size());
}

}  // namespace

std::vector<std::string> HeadTailsArgv(uint64_t cap, const std::vector<std::string>& paths) {
  std::vector<std::string> argv = {"sh", "-c", kHeadTails, "npuprof-headtails", std::to_string(cap)};
  argv.insert(argv.end(), paths.begin(), paths.end());
  return argv;
}

size_t HeadTailsOutputCap(uint64_t cap, size_t files) {
  return 64 + files * (static_cast<size_t>((cap + 2) / 3 * 4) + 8 + 64);
}

Result<std::vector<HeadTail>> ParseHeadTails(const std::string& out, size_t files, uint64_t cap) {
  auto lines = Lines(out, "npuprof-headtails", files);
  if (!lines.ok()) return lines.status();
  std::vector<HeadTail> got;
  for (size_t i = 0; i < files; ++i) {
    auto after = AfterIndex((*lines)[i + 1], i);
    if (!after.ok()) return after.status();
    const std::string_view rest = *after;
    if (rest == "missing" || rest == "unreadable") {
      got.emplace_back();
      continue;
    }
    // ok <size> <head> <tail>
    std::vector<std::string_view> f;
    size_t p = 0;
    while (f.size() < 5) {
      const size_t sp = rest.find(' ', p);
      f.push_back(rest.substr(p, sp == std::string_view::npos ? std::string_view::npos : sp - p));
      if (sp == std::string_view::npos) break;
      p = sp + 1;
    }
    if (f.size() != 4 || f[0] != "ok")
      return Status::Corruption(fmt::format("the file read command's file {} is not 'ok <size> <head> <tail>'", i));
    if (f[1].empty() || f[1].size() > 19 || f[1].find_first_not_of("0123456789") != std::string_view::npos)
      return Status::Corruption(fmt::format("the file read command's file {} has no size", i));
    HeadTail h;
    h.found = true;
    h.size = std::stoull(std::string(f[1]));
    auto head = DecodeBase64(f[2]);
    auto tail = DecodeBase64(f[3]);
    if (!head.ok() || !tail.ok())
      return Status::Corruption(fmt::format("the file read command's file {}: {}", i,
                                            (!head.ok() ? head : tail).status().message()));
    if (head->size() + tail->size() > cap || (h.size <= cap && !tail->empty()))
      return Status::Corruption(fmt::format("the file read command's file {} came back larger than its cap {}", i, cap));
    h.head = std::move(*head);
    h.tail = std::move(*tail);
    got.push_back(std::move(h));
  }
  return got;
}

std::vector<std::string> LogTailsArgv(uint64_t max_bytes, const std::vector<std::string>& paths) {
  std::vector<std::string> argv = {"sh", "-c", kTails, "npuprof-tails", std::to_string(max_bytes)};
  argv.insert(argv.end(), paths.begin(), paths.end());
  return argv;
}

size_t LogTailsOutputCap(uint64_t max_bytes, size_t files) {
  return 64 + files * (static_cast<size_t>((max_bytes + 2) / 3 * 4) + 32);
}

Result<std::vector<std::string>> ParseLogTails(const std::string& out, size_t files, uint64_t max_bytes) {
  auto lines = Lines(out, "npuprof-tails", files);
  if (!lines.ok()) return lines.status();
  std::vector<std::string> tails;
  for (size_t i = 0; i < files; ++i) {
    auto rest = AfterIndex((*lines)[i + 1], i);
    if (!rest.ok()) return rest.status();
    if (*rest == "missing" || *rest == "unreadable") {
      tails.emplace_back();
      continue;
    }
    if (rest->substr(0, 3) != "ok ")
      return Status::Corruption(fmt::format("the file read command's file {} is neither ok, missing nor unreadable", i));
    auto bytes = DecodeBase64(rest->substr(3));
    if (!bytes.ok()) return Status::Corruption(fmt::format("the file read command's file {}: {}", i, bytes.status().message()));
    if (bytes->size() > max_bytes)
      return Status::Corruption(fmt::format("the file read command's file {} is {} bytes, over the {} asked for", i,
                                            bytes->size(), max_bytes));
    tails.push_back(std::move(*bytes));
  }
  return tails;
}

}  // namespace npuprof::workers
