#include "workers/handlers/flush_signals.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "workers/handlers/service_scripts.h"

namespace npuprof::workers {

namespace {

// $1 = profile root. One line per *_ascend_pt: "dir <info> <files> <bytes> <name>".
// A poll costs a fixed number of processes whatever the ranks: the shell
// counts each dir's profiler_info*.json itself, one find (one stat per batch
// of files) lists the regular files under every dir, and one awk adds them
// up per dir (a file is its dir's by the path's first component after the
// root) and prints the dirs in the shell's order. Files whose path holds a
// line end are not counted; a dir whose name holds one gives lines the
// parser does not take (no signal), as before.
constexpr const char* kTorchPoll = R"SH(r=$1
if [ ! -d "$r" ]; then echo root=absent; exit 0; fi
echo root=present
nl='
'
set --
{ for d in "$r"/*_ascend_pt; do
    [ -d "$d" ] || continue
    i=0
    for f in "$d"/profiler_info*.json; do [ -f "$f" ] && i=$((i+1)); done
    printf 'D %d %s\n' "$i" "${d##*/}"
    set -- "$@" "$d"
  done
  echo E
  [ $# -gt 0 ] && find "$@" -type f ! -path "*$nl*" -exec stat -c '%s %n' {} + 2>/dev/null
} | P="$r/" awk '
  !e && $0 == "E" { e = 1; next }
  !e { if (substr($0, 1, 2) != "D ") { print; next }
       k++; info[k] = $2; name[k] = substr($0, length($2) + 4); next }
  { p = substr($0, length($1) + 2); pre = ENVIRON["P"]
    if (substr(p, 1, length(pre)) != pre) next
    p = substr(p, length(pre) + 1); c = index(p, "/"); if (c) p = substr(p, 1, c - 1)
    n[p]++; b[p] += $1 }
  END { for (j = 1; j <= k; j++) printf "dir %d %d %.0f %s\n", info[j], n[name[j]], b[name[j]], name[j] }'
)SH";

// $1 = msprof output dir, $2 = msprof's console log, $3 = pgid (0 = none),
// $4 = service marker, $5 = runtime dir. "prof <host_end> <devs> <dev_ends> <name>"
// per PROF dir, "complete_lines=N", then the group status line.
constexpr const char* kMsprofPoll = R"SH(d=$1 log=$2 pg=$3 mk=$4 rt=$5
if [ -d "$d" ]; then
  for p in "$d"/PROF_*; do
    [ -d "$p" ] || continue
    h=0; [ -f "$p/host/end_info" ] && h=1
    v=0; e=0
    for dv in "$p"/device_*; do
      [ -d "$dv" ] || continue
      v=$((v+1)); i=${dv##*/device_}
      [ -f "$dv/end_info.$i" ] && e=$((e+1))
    done
    printf 'prof %d %d %d %s\n' "$h" "$v" "$e" "${p##*/}"
  done
fi
c=0
[ -f "$log" ] && c=$(grep -c 'Process profiling data complete' "$log" 2>/dev/null)
echo "complete_lines=${c:-0}"
[ "$pg" -gt 0 ] 2>/dev/null || exit 0
set -- status "$pg" "$mk" "$rt"
)SH";

std::vector<std::string> Lines(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(line);
  return v;
}

// Reads n non-negative integers separated by single spaces from the start of
// rest, then the remainder (a name) after one more space.
bool Numbers(const std::string& rest, int n, std::vector<int64_t>& nums, std::string& name) {
  size_t pos = 0;
  for (int i = 0; i < n; ++i) {
    const size_t sp = rest.find(' ', pos);
    if (sp == std::string::npos || sp == pos) return false;
    const std::string tok = rest.substr(pos, sp - pos);
    if (tok.size() > 18 || tok.find_first_not_of("0123456789") != std::string::npos) return false;
    nums.push_back(std::stoll(tok));
    pos = sp + 1;
  }
  name = rest.substr(pos);
  return !name.empty();
}

}  // namespace

std::vector<std::string> TorchFlushPollArgv(const std::string& profile_root) {
  return {"sh", "-c", kTorchPoll, "npuprof-flush", profile_root};
}

TorchFlushPoll ParseTorchFlushPoll(const std::string& out) {
  TorchFlushPoll p;
  for (const auto& line : Lines(out)) {
    if (line == "root=present") {
      p.root_exists = true;
    } else if (line == "root=absent") {
      p.root_exists = false;
    } else if (line.rfind("dir ", 0) == 0) {
      std::vector<int64_t> n;
      RankDirPoll d;
      if (!Numbers(line.substr(4), 3, n, d.name)) {
        ++p.unparsed;
        continue;
      }
      d.profiler_info = static_cast<int>(std::min<int64_t>(n[0], 1 << 20));
      d.files = n[1];
      d.bytes = n[2];
      p.dirs.push_back(std::move(d));
    } else {
      ++p.unparsed;
    }
  }
  return p;
}

std::optional<std::string> TorchFlushSignal(const TorchFlushPoll& prev, const TorchFlushPoll& cur, bool have_prev) {
  if (!have_prev || cur.unparsed > 0 || prev.unparsed > 0) return std::nullopt;
  if (cur.dirs.empty()) {
    if (prev.dirs.empty()) return std::string("no_profile_dirs");
    return std::nullopt;
  }
  for (const auto& d : cur.dirs)
    if (d.profiler_info == 0) return std::nullopt;
  if (cur.dirs != prev.dirs) return std::nullopt;  // still growing (or a dir appeared)
  return std::string("profiler_info");
}

json TorchFlushDirsJson(const TorchFlushPoll& p) {
  json a = json::array();
  for (const auto& d : p.dirs)
    a.push_back(json{{"name", d.name}, {"profiler_info", d.profiler_info > 0}, {"files", d.files}, {"size", d.bytes}});
  return a;
}

Result<std::vector<std::string>> MsprofFlushPollArgv(const std::string& msprof_dir, const std::string& stdout_log,
                                                     int64_t pgid, const std::string& runtime_dir) {
  std::string marker;
  if (pgid > 0) {
    auto m = service::ServiceMarker(runtime_dir);
    if (!m.ok()) return m.status();
    marker = *m;
  }
  return std::vector<std::string>{"sh", "-c", std::string(kMsprofPoll) + service::GroupStatusScript(),
                                  "npuprof-flush", msprof_dir, stdout_log, std::to_string(std::max<int64_t>(pgid, 0)),
                                  marker, runtime_dir};
}

MsprofFlushPoll ParseMsprofFlushPoll(const std::string& out, bool group_checked) {
  MsprofFlushPoll p;
  for (const auto& line : Lines(out)) {
    if (line.rfind("prof ", 0) == 0) {
      std::vector<int64_t> n;
      ProfDirPoll d;
      if (!Numbers(line.substr(5), 3, n, d.name)) {
        ++p.unparsed;
        continue;
      }
      d.host_end_info = n[0] > 0;
      d.devices = static_cast<int>(std::min<int64_t>(n[1], 1 << 20));
      d.device_end_info = static_cast<int>(std::min<int64_t>(n[2], 1 << 20));
      p.profs.push_back(std::move(d));
    } else if (line.rfind("complete_lines=", 0) == 0) {
      p.complete_lines = std::atoi(line.c_str() + 15);
    } else if (line.rfind("leader=", 0) == 0) {
      auto g = service::ParseGroupStatus(line);
      if (!g.ok()) {
        ++p.unparsed;
        continue;
      }
      p.group_known = true;
      p.group_alive = g->any_alive();
    } else {
      ++p.unparsed;
    }
  }
  if (!group_checked) p.group_known = true;  // no group to check: only the markers count
  return p;
}

std::optional<std::string> MsprofFlushSignal(const MsprofFlushPoll& p) {
  if (!p.group_known || p.group_alive || p.unparsed > 0) return std::nullopt;
  if (p.profs.empty()) return std::string("no_msprof_data");
  bool all = true;
  int with_devices = 0;
  for (const auto& d : p.profs) {
    all = all && d.complete();
    if (d.devices > 0) ++with_devices;
  }
  if (all) return std::string("end_info");
  if (with_devices > 0 && p.complete_lines >= with_devices) return std::string("completion_line");
  return std::string("msprof_exited_incomplete");
}

json MsprofFlushJson(const MsprofFlushPoll& p) {
  json a = json::array();
  for (const auto& d : p.profs)
    a.push_back(json{{"name", d.name}, {"host_end_info", d.host_end_info}, {"devices", d.devices},
                     {"device_end_info", d.device_end_info}, {"complete", d.complete()}});
  return json{{"prof_dirs", a}, {"complete_lines", p.complete_lines}, {"msprof_alive", p.group_alive}};
}

}  // namespace npuprof::workers
