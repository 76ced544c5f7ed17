#include "workers/handlers/flush_then_collect.h"

#include <fmt/format.h>

namespace npuprof::workers {

namespace {

// $1 = N, the next N words the poll's argv, the rest the check's argv. The
// poll's output is counted by the shell in bytes (C locale: ${#} counts
// bytes, not characters), with no process of its own.
constexpr const char* kThen = R"SH(n=$1; shift
cmd= i=1
while [ "$i" -le "$n" ]; do cmd="$cmd \"\${$i}\""; i=$((i+1)); done
po=$(eval "$cmd"); prc=$?
LC_ALL=C; nb=${#po}
printf 'npuprof-flush %d %d\n' "$prc" "$((nb + 0))"
printf '%s\n' "$po"
case "$po" in *leader=alive*|*" members="[1-9]*) echo npuprof-check-skipped; exit 0 ;; esac
shift "$n"
exec "$@"
)SH";

bool Digits(std::string_view t, size_t max) {
  return !t.empty() && t.size() <= max && t.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::vector<std::string> FlushThenCollectArgv(const std::vector<std::string>& poll_argv,
                                              const std::vector<std::string>& check_argv) {
  std::vector<std::string> argv = {"sh", "-c", kThen, "npuprof-flush-then", std::to_string(poll_argv.size())};
  argv.insert(argv.end(), poll_argv.begin(), poll_argv.end());
  argv.insert(argv.end(), check_argv.begin(), check_argv.end());
  return argv;
}

Result<FlushThenCollectOut> SplitFlushThenCollect(std::string_view out) {
  constexpr std::string_view kHead = "npuprof-flush ";
  const size_t eol = out.find('\n');
  if (out.substr(0, kHead.size()) != kHead || eol == std::string_view::npos || eol > 64)
    return Status::Corruption(fmt::format("the flush poll and export check printed {:?}, not \"npuprof-flush <status> "
                                          "<bytes>\" first",
                                          std::string(out.substr(0, 80))));
  const std::string_view head = out.substr(kHead.size(), eol - kHead.size());
  const size_t sp = head.find(' ');
  if (sp == std::string_view::npos || !Digits(head.substr(0, sp), 3) || !Digits(head.substr(sp + 1), 12))
    return Status::Corruption(fmt::format("the flush poll's header {:?} is not \"npuprof-flush <status> <bytes>\"",
                                          std::string(out.substr(0, eol))));
  FlushThenCollectOut r;
  r.poll_exit = std::stoi(std::string(head.substr(0, sp)));
  const uint64_t n = std::stoull(std::string(head.substr(sp + 1)));
  const std::string_view rest = out.substr(eol + 1);
  if (n + 1 > rest.size() || rest[n] != '\n')
    return Status::Corruption(
        fmt::format("the flush poll's output ends before its {} counted bytes (cut short)", n));
  r.poll = std::string(rest.substr(0, n));
  r.check = std::string(rest.substr(n + 1));
  return r;
}

}  // namespace npuprof::workers
