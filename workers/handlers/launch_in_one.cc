#include "workers/handlers/launch_in_one.h"

#include <fmt/format.h>

#include "workers/handlers/service_scripts.h"

namespace npuprof::workers::service {

namespace {

// $1 runtime dir, $2 attempt, $3..$5 the three texts' sizes, $6 how much of
// another record to print, $7 the marker value, $8 the start-or-adopt script
// (StartOrAdoptArgv's, run by a nested sh with its own $1 $2), $9 where the
// texts are: "stdin" (in order) or "env" (the three LaunchInOneEnv
// variables, unset before the start so the service does not inherit them).
constexpr const char* kLaunchInOne = R"SH(rt=$1; f="$rt/launch.json"
t="$rt/launch.json.tmp-$2"; s1="$rt/_serve.sh.tmp-$2"; s2="$rt/_start.sh.tmp-$2"
if [ "$9" = env ]; then
  (umask 077 && printf %s "$NPUPROF_LAUNCH_RECORD" >"$t" && printf %s "$NPUPROF_LAUNCH_SERVE" >"$s1" &&
   printf %s "$NPUPROF_LAUNCH_START" >"$s2")
else
  (umask 077 && head -c "$3" >"$t" && head -c "$4" >"$s1" && head -c "$5" >"$s2")
fi && [ "$(wc -c <"$t")" -eq "$3" ] && [ "$(wc -c <"$s1")" -eq "$4" ] && [ "$(wc -c <"$s2")" -eq "$5" ] ||
  { rm -f "$t" "$s1" "$s2"; echo launch-not-written >&2; exit 5; }
unset NPUPROF_LAUNCH_RECORD NPUPROF_LAUNCH_SERVE NPUPROF_LAUNCH_START
ln "$t" "$f" 2>/dev/null
if ! { [ -f "$f" ] && [ ! -L "$f" ]; }; then rm -f "$t" "$s1" "$s2"; exit 6; fi
if ! cmp -s "$t" "$f"; then
  rm -f "$t" "$s1" "$s2"
  echo other-record; head -c "$6" "$f"; exit 0
fi
rm -f "$t"
if [ ! -e "$rt/.started" ]; then
  { chmod 700 "$s1" "$s2" && mv -f "$s1" "$rt/_serve.sh" && mv -f "$s2" "$rt/_start.sh"; } ||
    { rm -f "$s1" "$s2"; echo scripts-not-written >&2; exit 7; }
fi
rm -f "$s1" "$s2"
echo own-record
exec sh -c "$8" npuprof-start "$rt" "$7")SH";

}  // namespace

std::vector<std::string> LaunchInOneArgv(const std::string& runtime_dir, uint32_t attempt, size_t record_bytes,
                                         size_t serve_bytes, size_t start_bytes, size_t max_record_bytes,
                                         const std::string& marker, LaunchTexts from) {
  const std::vector<std::string> start = StartOrAdoptArgv(runtime_dir, marker);  // sh -c SCRIPT name rt marker
  return {"sh",
          "-c",
          kLaunchInOne,
          "npuprof-launch",
          runtime_dir,
          std::to_string(attempt),
          std::to_string(record_bytes),
          std::to_string(serve_bytes),
          std::to_string(start_bytes),
          std::to_string(max_record_bytes),
          marker,
          start.at(2),
          from == LaunchTexts::kEnv ? "env" : "stdin"};
}

std::vector<std::pair<std::string, std::string>> LaunchInOneEnv(const std::string& record, const std::string& serve,
                                                                 const std::string& start) {
  return {{"NPUPROF_LAUNCH_RECORD", record}, {"NPUPROF_LAUNCH_SERVE", serve}, {"NPUPROF_LAUNCH_START", start}};
}

Result<LaunchInOneOutput> ParseLaunchInOne(std::string_view out) {
  // What the machine's env script printed before the command does not count:
  // the first line that is own-record or other-record starts the output.
  LaunchInOneOutput o;
  for (size_t at = 0; at < out.size();) {
    const size_t eol = out.find('\n', at);
    if (eol == std::string_view::npos) break;
    const std::string_view line = out.substr(at, eol - at);
    if (line == "own-record" || line == "other-record") {
      o.own_record = line == "own-record";
      (o.own_record ? o.start_line : o.record) = std::string(out.substr(eol + 1));
      return o;
    }
    at = eol + 1;
  }
  return Status::Corruption(fmt::format("the one-command launch printed {:?}, not own-record or other-record",
                                        std::string(out.substr(0, 80))));
}

}  // namespace npuprof::workers::service
