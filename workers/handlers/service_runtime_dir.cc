#include "workers/handlers/service_runtime_dir.h"

#include <sstream>

#include <fmt/format.h>

namespace npuprof::workers::service {

namespace {

// $1 create|check, $2 base, $3 N, then N components below the base, then the
// entry names to report. Output lines: "uid <uid> <name>", then "missing
// <dir>" (check mode, a dir is missing) or "dir ok" followed by one
// "entry <type> <uid> <name>" / "entry absent - <name>" per entry.
//
// Few processes (each costs a target's fork and exec, about 5-10 ms on a
// busy host; issue 38): one `id` gives the uid and the name, and one `stat`
// (`look`) the owner, mode and type of every path of the walk that exists
// when it starts (the base, each dir below it, each entry), in the walk's
// order. The walk still tests each path itself (`[ -L ]`, `[ -d ]`, ...) as
// it comes to it, and takes the look's line only where the look saw the same
// kind of file; a path made by the walk, or one the look saw otherwise, is
// stat'ed on its own, as before.
constexpr const char* kRuntimeDir = R"SH(mode=$1 d=$2 n=$3
shift 3
export LC_ALL=C
umask 077
nl='
'
who=$(id 2>/dev/null)
uid=${who#uid=}; uid=${uid%%[!0-9]*}
case $who in "uid=$uid("*) un=${who#"uid=$uid("}; un=${un%%)*} ;; *) un= ;; esac
if [ -z "$uid" ]; then uid=$(id -u) || exit 6; un=$(id -un 2>/dev/null); fi
echo "uid $uid $un"
refuse() { printf 'npuprof-refused: %s\n' "$1" >&2; exit 5; }
look() {
  lk_k=$# lk_p=$d lk_i=0 lk_f= lk_s=
  for lk_a in "$d" "$@"; do
    if [ "$lk_i" -eq 0 ]; then lk_x=$d
    elif [ "$lk_i" -le "$n" ]; then lk_p=$lk_p/$lk_a; lk_x=$lk_p
    else lk_x=$lk_p/$lk_a; fi
    lk_i=$((lk_i+1))
    if [ -e "$lk_x" ] || [ -L "$lk_x" ]; then set -- "$@" "$lk_x"; lk_f="${lk_f}1"; else lk_f="${lk_f}0"; fi
  done
  shift "$lk_k"
  [ $# -gt 0 ] || return 0
  lk_s=$(stat -c '%u %a %F' -- "$@" 2>/dev/null) || { lk_s=; lk_f=; return 0; }
  lk_c=0 lk_r=$lk_s
  while [ -n "$lk_r" ]; do
    lk_c=$((lk_c+1))
    case $lk_r in *"$nl"*) lk_r=${lk_r#*"$nl"} ;; *) lk_r= ;; esac
  done
  [ "$lk_c" -eq $# ] || { lk_s=; lk_f=; }
}
take() {
  tk=
  case $lk_f in 1*) tk=${lk_s%%"$nl"*}; case $lk_s in *"$nl"*) lk_s=${lk_s#*"$nl"} ;; *) lk_s= ;; esac ;; esac
  lk_f=${lk_f#?}
}
accept() {
  if [ -L "$1" ]; then refuse "$1 is a symbolic link: npuprof does not follow links in its runtime dirs (remove it, or choose another --runtime-base)"; fi
  if [ ! -d "$1" ]; then refuse "$1 exists but is not a directory (remove it, or choose another --runtime-base)"; fi
  case $2 in
    *" directory") set -- "$1" ${2% directory} ;;
    *) set -- "$1" $(stat -c '%u %a' -- "$1" 2>/dev/null) ;;
  esac
  if [ -z "$3" ]; then refuse "cannot stat $1"; fi
  if [ "$2" != "$uid" ]; then refuse "$1 is owned by uid $2, not by you (uid $uid): another user controls what is in it (choose another --runtime-base)"; fi
  if [ $(( 0$3 & 022 )) -ne 0 ]; then refuse "$1 is writable by group or others (mode $3): they could plant files in it (chmod go-w it, or choose another --runtime-base)"; fi
}
step() {
  take
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then
    if [ "$mode" != create ]; then echo "missing $1"; exit 0; fi
    err=$($2 -- "$1" 2>&1) || [ -d "$1" ] || refuse "cannot create $1: $err"
    tk=
  fi
  accept "$1" "$tk"
}
look "$@"
step "$d" "mkdir -p"
while [ "$n" -gt 0 ]; do
  d=$d/$1
  shift
  n=$((n-1))
  step "$d" "mkdir -m 700"
done
echo "dir ok"
for e in "$@"; do
  take
  f=$d/$e
  if [ -L "$f" ]; then t=symlink
  elif [ ! -e "$f" ]; then echo "entry absent - $e"; continue
  elif [ -f "$f" ]; then t=file
  elif [ -d "$f" ]; then t=dir
  else t=other; fi
  u=
  case "$t:$tk" in
    "symlink:"[0-9]*" symbolic link"|"dir:"[0-9]*" directory"|"file:"[0-9]*" regular file"|"file:"[0-9]*" regular empty file") u=${tk%% *} ;;
  esac
  [ -n "$u" ] || u=$(stat -c %u -- "$f" 2>/dev/null || echo -1)
  echo "entry $t $u $e"
done
)SH";

std::string OwnerText(const RuntimeDirReport& r) {
  return r.user.empty() ? fmt::format("uid {}", r.uid) : fmt::format("{} (uid {})", r.user, r.uid);
}

}  // namespace

std::vector<std::string> RuntimeDirArgv(bool create, const std::string& base, const std::vector<std::string>& below,
                                        const std::vector<std::string>& entries) {
  std::vector<std::string> argv = {"sh", "-c", kRuntimeDir, "npuprof-runtime-dir", create ? "create" : "check", base,
                                   std::to_string(below.size())};
  argv.insert(argv.end(), below.begin(), below.end());
  argv.insert(argv.end(), entries.begin(), entries.end());
  return argv;
}

Result<std::vector<std::string>> ComponentsBelow(const std::string& base, const std::string& dir) {
  std::string b = base;
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  if (b.empty() || b[0] != '/') return Status::Invalid("runtime base '" + base + "' is not an absolute path");
  std::vector<std::string> parts;
  if (dir == b) return parts;
  const std::string prefix = b == "/" ? "/" : b + "/";
  if (dir.rfind(prefix, 0) != 0)
    return Status::Invalid(fmt::format("runtime dir '{}' is not below the runtime base '{}'", dir, base));
  std::stringstream rest(dir.substr(prefix.size()));
  for (std::string part; std::getline(rest, part, '/');) {
    if (part.empty() || part == "." || part == "..")
      return Status::Invalid(fmt::format("runtime dir '{}' has an empty, '.' or '..' component", dir));
    parts.push_back(part);
  }
  if (parts.empty()) return Status::Invalid(fmt::format("runtime dir '{}' is not below '{}'", dir, base));
  return parts;
}

const RuntimeEntry& RuntimeDirReport::Entry(const std::string& name) const {
  static const RuntimeEntry kAbsent;
  auto it = entries.find(name);
  return it == entries.end() ? kAbsent : it->second;
}

Result<RuntimeDirReport> ParseRuntimeDirReport(const std::string& out) {
  RuntimeDirReport r;
  bool have_uid = false, done = false;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string tag;
    w >> tag;
    if (tag == "uid") {
      w >> r.uid;
      w >> r.user;
      have_uid = !w.bad() && r.uid >= 0;
    } else if (tag == "missing") {
      r.missing = line.substr(8);
      done = true;
    } else if (tag == "dir") {
      r.exists = true;
      done = true;
    } else if (tag == "entry") {
      std::string type, uid;
      w >> type >> uid;
      std::string name;
      std::getline(w >> std::ws, name);
      if (type.empty() || name.empty()) return Status::Corruption("unexpected runtime dir report line: " + line);
      RuntimeEntry e;
      e.type = type;
      e.uid = uid == "-" ? -1 : std::atoll(uid.c_str());
      r.entries[name] = e;
    }
  }
  if (!have_uid || !done)
    return Status::Corruption("unexpected runtime dir report: " + out.substr(0, 300));
  return r;
}

std::optional<std::string> RuntimeDirRefusal(const std::string& stderr_text) {
  const std::string tag = "npuprof-refused: ";
  const auto at = stderr_text.find(tag);
  if (at == std::string::npos) return std::nullopt;
  const auto end = stderr_text.find('\n', at);
  return stderr_text.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
}

std::optional<std::string> UntrustedFile(const RuntimeDirReport& report, const std::string& dir,
                                         const std::string& name, const std::string& what) {
  const RuntimeEntry& e = report.Entry(name);
  const std::string path = dir + "/" + name;
  if (e.type == "absent") return std::nullopt;
  if (e.type == "symlink")
    return fmt::format("{} is a symbolic link: npuprof does not follow it as {} (remove it and submit again)", path,
                       what);
  if (e.type != "file")
    return fmt::format("{} is not a regular file ({}): not trusted as {} (remove it and submit again)", path, e.type,
                       what);
  if (e.uid != report.uid)
    return fmt::format("{} is owned by uid {}, not by {}: npuprof does not trust {} it did not write (remove it and "
                       "submit again, or choose another --runtime-base)",
                       path, e.uid, OwnerText(report), what);
  return std::nullopt;
}

}  // namespace npuprof::workers::service
