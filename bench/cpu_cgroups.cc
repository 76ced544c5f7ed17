#include "bench/cpu_cgroups.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace npuprof::bench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "npuprof-bench-";

Result<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return Status::Invalid(fmt::format("not an integer: '{}'", s));
  return v;
}

// Reads at most 1 MiB of a small kernel file.
Result<std::string> ReadSmall(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Io(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::string out(1 << 20, '\0');
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

Status WriteValue(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  if (!f) return Status::Io(fmt::format("cannot open {} for writing: {}", path, std::strerror(errno)));
  f << value;
  f.flush();
  if (!f) return Status::Io(fmt::format("writing '{}' to {} failed: {}", value, path, std::strerror(errno)));
  return Status::Ok();
}

std::vector<pid_t> Pids(const std::string& procs_file) {
  std::vector<pid_t> out;
  auto text = ReadSmall(procs_file);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line))
    if (auto v = ParseInt(line); v.ok() && *v > 0) out.push_back(static_cast<pid_t>(*v));
  return out;
}

// Moves every process of `dir` to the hierarchy's root group, then removes
// `dir` (its children first).
void Remove(const std::string& dir, const std::string& hierarchy_root) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec)) Remove(e.path().string(), hierarchy_root);
  for (pid_t p : Pids(dir + "/cgroup.procs")) (void)WriteValue(hierarchy_root + "/cgroup.procs", std::to_string(p));
  ::rmdir(dir.c_str());
}

// Parent groups "npuprof-bench-<pid>" whose bench process is gone.
void RemoveStale(const std::string& hierarchy_root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(hierarchy_root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    auto pid = ParseInt(std::string_view(name).substr(std::strlen(kPrefix)));
    if (!pid.ok() || *pid <= 0) continue;
    if (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM) continue;  // still running
    Remove(e.path().string(), hierarchy_root);
  }
}

Status Usable(const std::string& hierarchy, const std::string& file) {
  const std::string path = hierarchy + "/" + file;
  if (::access(path.c_str(), F_OK) != 0)
    return Status::Precondition(fmt::format(
        "{} not found: the CPU model needs cgroup v1's cpu and cpuacct controllers mounted at {} "
        "(this machine may have cgroup v2 only); run without it",
        path, hierarchy));
  if (::access(hierarchy.c_str(), W_OK) != 0)
    return Status::Denied(fmt::format("{} is not writable ({}): the CPU model needs root and a writable cgroup v1 "
                                      "mount; run without it",
                                      hierarchy, std::strerror(errno)));
  return Status::Ok();
}

}  // namespace

Result<CpuStat> ParseCpuStat(std::string_view text) {
  CpuStat st;
  bool periods = false, throttled = false, time = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, sp);
    int64_t* into = key == "nr_periods" ? &st.nr_periods
                    : key == "nr_throttled" ? &st.nr_throttled
                    : key == "throttled_time" ? &st.throttled_ns
                                              : nullptr;
    if (!into) continue;
    auto v = ParseInt(line.substr(sp + 1));
    if (!v.ok()) return Status::Corruption(fmt::format("cpu.stat: {}: {}", key, v.status().message()));
    *into = *v;
    (key == "nr_periods" ? periods : key == "nr_throttled" ? throttled : time) = true;
  }
  if (!periods || !throttled || !time)
    return Status::Corruption("cpu.stat: nr_periods, nr_throttled or throttled_time missing");
  return st;
}

Result<double> ParseCpus(std::string_view text, std::string_view field) {
  double v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v) || v <= 0 || v > 64)
    return Status::Invalid(fmt::format("{}: '{}' is not a CPU amount; give a number of cores above 0, e.g. 0.75",
                                       field, text));
  return v;
}

std::vector<pid_t> ProcessTree(pid_t pid) {
  std::vector<pid_t> out;
  std::set<pid_t> seen;
  std::vector<pid_t> todo = {pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    out.push_back(p);
    std::error_code ec;
    for (const auto& t : fs::directory_iterator(fmt::format("/proc/{}/task", p), ec)) {
      auto text = ReadSmall(t.path().string() + "/children");
      if (!text.ok()) continue;
      std::istringstream in(*text);
      std::string c;
      while (in >> c)
        if (auto v = ParseInt(c); v.ok() && *v > 0) todo.push_back(static_cast<pid_t>(*v));
    }
  }
  return out;
}

Result<std::unique_ptr<CpuCgroups>> CpuCgroups::Create(bool caps, int64_t period_us, const std::string& root) {
  const std::string cpu = root + "/cpu", acct = root + "/cpuacct";
  if (caps)
    if (Status s = Usable(cpu, "cpu.cfs_quota_us"); !s.ok()) return s;
  if (Status s = Usable(acct, "cpuacct.usage"); !s.ok()) return s;
  if (::access((cpu + "/cgroup.procs").c_str(), F_OK) == 0) RemoveStale(cpu);
  RemoveStale(acct);
  const std::string name = fmt::format("{}{}", kPrefix, ::getpid());
  std::unique_ptr<CpuCgroups> g(new CpuCgroups(caps ? cpu + "/" + name : "", acct + "/" + name, period_us));
  for (const std::string& dir : g->Dirs(""))
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::Denied(fmt::format("mkdir {}: {} (the CPU model needs a writable cgroup v1 mount; run without it)",
                                        dir, std::strerror(errno)));
  return g;
}

CpuCgroups::~CpuCgroups() {
  if (!cpu_parent_.empty()) Remove(cpu_parent_, fs::path(cpu_parent_).parent_path().string());
  Remove(acct_parent_, fs::path(acct_parent_).parent_path().string());
}

std::vector<std::string> CpuCgroups::Dirs(const std::string& name) const {
  const std::string tail = name.empty() ? "" : "/" + name;
  std::vector<std::string> out = {acct_parent_ + tail};
  if (!cpu_parent_.empty()) out.push_back(cpu_parent_ + tail);
  return out;
}

std::string CpuCgroups::CpuDir(const std::string& name) const {
  return (cpu_parent_.empty() ? acct_parent_ : cpu_parent_) + "/" + name;
}

Status CpuCgroups::AddGroup(const std::string& name, double cpus) {
  for (const std::string& dir : Dirs(name))
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::Io(fmt::format("mkdir {}: {}", dir, std::strerror(errno)));
  groups_.push_back(name);
  if (cpu_parent_.empty()) return Status::Ok();  // accounting only
  const std::string dir = CpuDir(name);
  if (Status s = WriteValue(dir + "/cpu.cfs_period_us", std::to_string(period_us_)); !s.ok()) return s;
  const int64_t quota = cpus > 0 ? std::llround(cpus * static_cast<double>(period_us_)) : -1;
  return WriteValue(dir + "/cpu.cfs_quota_us", std::to_string(quota));
}

Status CpuCgroups::Prioritise(int64_t shares) {
  if (cpu_parent_.empty()) return Status::Precondition("no cpu hierarchy groups: created without caps");
  return WriteValue(cpu_parent_ + "/cpu.shares", std::to_string(shares));
}

Status CpuCgroups::Move(const std::string& name, pid_t pid) {
  for (pid_t p : ProcessTree(pid))
    for (const std::string& dir : Dirs(name)) {
      Status s = WriteValue(dir + "/cgroup.procs", std::to_string(p));
      if (!s.ok() && ::kill(p, 0) == 0) return s;  // one that exited meanwhile is no error
    }
  return Status::Ok();
}

Result<CpuUsage> CpuCgroups::Usage(const std::string& name) const {
  CpuUsage u;
  auto usage = ReadSmall(acct_parent_ + "/" + name + "/cpuacct.usage");
  if (!usage.ok()) return usage.status();
  std::string_view t = *usage;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
  auto ns = ParseInt(t);
  if (!ns.ok()) return Status::Corruption(fmt::format("cpuacct.usage of {}: {}", name, ns.status().message()));
  u.cpu_ns = *ns;
  if (cpu_parent_.empty()) return u;  // no caps: never throttled
  auto stat_text = ReadSmall(CpuDir(name) + "/cpu.stat");
  if (!stat_text.ok()) return stat_text.status();
  auto st = ParseCpuStat(*stat_text);
  if (!st.ok()) return st.status();
  u.throttled_ns = st->throttled_ns;
  u.nr_throttled = st->nr_throttled;
  return u;
}

}  // namespace npuprof::bench
