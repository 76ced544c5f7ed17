#include "workers/handlers/log_tails.h"

#include <fmt/format.h>

#include "common/base64.h"

namespace npuprof::workers {

namespace {

// $1 = max bytes, then the paths. tail -c reads only the end of a large
// file; base64 -w 0 prints it on one line (a target without it fails the
// command, and the caller reads the files one by one).
constexpr const char* kTails = R"SH(m=$1; shift
printf '' | base64 -w 0 >/dev/null 2>&1 || { echo "no base64 -w here" >&2; exit 3; }
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

}  // namespace

std::vector<std::string> LogTailsArgv(uint64_t max_bytes, const std::vector<std::string>& paths) {
  std::vector<std::string> argv = {"sh", "-c", kTails, "npuprof-tails", std::to_string(max_bytes)};
  argv.insert(argv.end(), paths.begin(), paths.end());
  return argv;
}

size_t LogTailsOutputCap(uint64_t max_bytes, size_t files) {
  return 64 + files * (static_cast<size_t>((max_bytes + 2) / 3 * 4) + 32);
}

Result<std::vector<std::string>> ParseLogTails(const std::string& out, size_t files, uint64_t max_bytes) {
  std::vector<std::string> tails;
  size_t pos = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= out.size()) return false;
    const size_t nl = out.find('\n', pos);
    const size_t end = nl == std::string::npos ? out.size() : nl;
    line = std::string_view(out).substr(pos, end - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    return true;
  };
  std::string_view line;
  if (!next_line(line) || line != "npuprof-tails")
    return Status::Corruption("the log tails command did not print its 'npuprof-tails' header");
  for (size_t i = 0; i < files; ++i) {
    if (!next_line(line)) return Status::Corruption(fmt::format("the log tails command printed {} of {} files", i, files));
    const std::string prefix = std::to_string(i) + " ";
    if (line.substr(0, prefix.size()) != prefix)
      return Status::Corruption(fmt::format("the log tails command's line {} does not start with its index {}", i + 1, i));
    const std::string_view rest = line.substr(prefix.size());
    if (rest == "missing" || rest == "unreadable") {
      tails.emplace_back();
      continue;
    }
    if (rest.substr(0, 3) != "ok ") return Status::Corruption(fmt::format("the log tails command's file {} is neither ok, missing nor unreadable", i));
    auto bytes = DecodeBase64(rest.substr(3));
    if (!bytes.ok()) return Status::Corruption(fmt::format("the log tails command's file {}: {}", i, bytes.status().message()));
    if (bytes->size() > max_bytes)
      return Status::Corruption(fmt::format("the log tails command's file {} is {} bytes, over the {} asked for", i,
                                            bytes->size(), max_bytes));
    tails.push_back(std::move(*bytes));
  }
  if (next_line(line)) return Status::Corruption("the log tails command printed more lines than files");
  return tails;
}

}  // namespace npuprof::workers
