#include "workers/handlers/auto_export_check.h"

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

namespace npuprof::workers {

namespace {

// "no-dir" alone when the output dir does not exist; else "started=0|1",
// then per PROF dir with device data:
// "prof <done_line> <npu_mem> <module_mem> <name>".
// With $3 (a script), when no export was started and every PROF dir counts
// as exported (and there is one), "npuprof-then" and that script's output
// follow, its exit status the command's.
// A fixed number of processes whatever the PROF dirs (issue 38): one grep
// takes the console log's done lines (of at most 4096 lines, each from its
// first "Export all data in " to its last " done": every such phrase of the
// line is in it; a bounded repeat such as .{1,1024} costs grep half a second
// to compile), one find the memory CSVs over 100 bytes of every output dir;
// the shell matches them to each PROF dir (a done line not taken counts as
// missing: the run then exports, as it would without it).
constexpr const char* kCheck = R"SH(d=$1 log=$2 then=$3
if [ ! -e "$d" ]; then echo no-dir; exit 0; fi
s=0; [ -e "$d.export.pid" ] && s=1
echo "started=$s"
nl='
'
dl=
[ -n "$log" ] && [ -f "$log" ] && dl=$(LC_ALL=C grep -oE -m 4096 'Export all data in .* done' "$log" 2>/dev/null)
fl=
set -- "$d"/PROF_*/mindstudio_profiler_output
[ -d "$1" ] && fl=$(find "$@" -maxdepth 1 -type f -size +100c \( -name 'npu_mem_*.csv' -o -name 'npu_module_mem_*.csv' \) 2>/dev/null)
all=1 np=0
for p in "$d"/PROF_*; do
  [ -d "$p" ] || continue
  v=0
  for dv in "$p"/device_*; do [ -d "$dv" ] && v=1; done
  [ "$v" = 1 ] || continue
  n=${p##*/}
  l=0
  case "$nl$dl$nl" in *"Export all data in $n done"*) l=1 ;; esac
  o=$p/mindstudio_profiler_output
  m=0; k=0
  if [ -d "$o" ]; then
    r=$fl
    while [ -n "$r" ]; do
      x=${r%%"$nl"*}
      case $r in *"$nl"*) r=${r#*"$nl"} ;; *) r= ;; esac
      case $x in
        "$o/npu_mem_"*) m=$((m+1)) ;;
        "$o/npu_module_mem_"*) k=$((k+1)) ;;
      esac
    done
  fi
  printf 'prof %s %s %s %s\n' "$l" "$m" "$k" "$n"
  np=$((np+1))
  [ "$l" = 1 ] && [ $m -gt 0 ] && [ $k -gt 0 ] || all=0
done
[ -n "$then" ] && [ "$s" = 0 ] && [ "$all" = 1 ] && [ "$np" -gt 0 ] || exit 0
echo npuprof-then
exec sh -c "$then" sh "$d"
)SH";

bool ParseCount(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::atoi(s.c_str());
  return true;
}

}  // namespace

std::vector<std::string> AutoExportCheckArgv(const std::string& msprof_dir, const std::string& console_log,
                                             const std::string& then_script) {
  return {"sh", "-c", kCheck, "sh", msprof_dir, console_log, then_script};
}

std::pair<std::string_view, std::optional<std::string_view>> SplitAtThen(std::string_view out) {
  constexpr std::string_view kThen = "npuprof-then\n";
  size_t at = out.rfind(kThen, 0) == 0 ? 0 : out.find("\n" + std::string(kThen));
  if (at == std::string_view::npos) return {out, std::nullopt};
  if (at > 0) ++at;  // keep the check's last newline
  return {out.substr(0, at), out.substr(at + kThen.size())};
}

AutoExportCheck ParseAutoExportCheck(const std::string& out) {
  AutoExportCheck c;
  std::istringstream in(out);
  std::string line;
  bool saw_started = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line == "no-dir" && !saw_started && !c.dir_missing && c.profs.empty() && c.unparsed == 0) {
      c.dir_missing = true;
      continue;
    }
    if (line == "started=0" || line == "started=1") {
      c.export_started = line.back() == '1';
      saw_started = true;
      continue;
    }
    if (line.rfind("prof ", 0) == 0) {
      // prof <l> <m> <k> <name>: the name is the rest of the line (it may hold spaces).
      std::istringstream f(line.substr(5));
      std::string l, m, k;
      AutoExportProf p;
      if (f >> l >> m >> k && (l == "0" || l == "1") && ParseCount(m, &p.npu_mem) && ParseCount(k, &p.module_mem)) {
        std::string rest;
        std::getline(f, rest);
        if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
        if (!rest.empty()) {
          p.done_line = l == "1";
          p.name = rest;
          c.profs.push_back(std::move(p));
          continue;
        }
      }
    }
    ++c.unparsed;
  }
  if (c.dir_missing && (saw_started || !c.profs.empty() || c.unparsed > 0)) {  // "no-dir" is said alone
    c.dir_missing = false;
    ++c.unparsed;
  }
  if (!saw_started && !c.dir_missing) ++c.unparsed;
  return c;
}

bool AutoExportCheck::AllExported() const {
  if (unparsed > 0 || profs.empty()) return false;
  for (const auto& p : profs)
    if (!p.exported()) return false;
  return true;
}

std::string AutoExportCheck::Describe() const {
  if (AllExported())
    return fmt::format("{} PROF dir(s) exported by msprof at the application's exit (its 'Export all data in "
                       "<PROF> done' line and the npu_mem / npu_module_mem CSVs): not exported again",
                       profs.size());
  if (unparsed > 0) return fmt::format("{} line(s) of the check were not understood", unparsed);
  if (profs.empty()) return "no PROF dir with device data";
  std::string out;
  for (const auto& p : profs) {
    if (p.exported()) continue;
    const std::string name = p.name.substr(0, 200);  // made valid UTF-8 with the outcome
    std::string why;
    if (!p.done_line) why = fmt::format("no 'Export all data in {} done' line", name);
    if (p.npu_mem == 0) why += std::string(why.empty() ? "" : ", ") + "no npu_mem CSV";
    if (p.module_mem == 0) why += std::string(why.empty() ? "" : ", ") + "no npu_module_mem CSV";
    out += (out.empty() ? "" : "; ") + name + ": " + why;
  }
  return out;
}

}  // namespace npuprof::workers
