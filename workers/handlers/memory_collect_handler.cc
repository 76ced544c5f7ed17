// memory.collect_csvs: every exported *.csv larger than 100 bytes in ONE
// command (a length-prefixed stream), PROF -> device mapping, the
// component maxima / APP peaks of the newest npu_module_mem / npu_mem export,
// and per device the activation peak of its npu_mem "Device" series inside
// the payload's "inference_window" (statemachine/inference_window.h). The
// script and the reading of its output are shared (workers/memory/
// csv_collection.h): memory.wait_flush runs the same script in its own
// command when msprof exported by itself.
#include <fmt/format.h>

#include "parsers/file_stream.h"
#include "parsers/msprof_csv_parser.h"
#include "parsers/prof_device_map.h"
#include "statemachine/activation_peak.h"
#include "statemachine/inference_window.h"
#include "workers/memory/csv_collection.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

// $1 = msprof output dir. Lists PROF_*/device_<N> dirs, then streams each CSV.
// The sizes of a batch of CSVs come from one stat (one line a file, in
// order; where it does not give one line a file, each file's size is taken
// with wc as before), so a CSV costs one process (its cat), not three.
constexpr const char* kCollect = R"SH(cd "$1" || exit 3
find . -maxdepth 2 -type d -name 'device_*'
find . -type f -name '*.csv' -size +100c -exec sh -c 'nl="
"
z=$(stat -c %s -- "$@" 2>/dev/null) || z=
c=0 r=$z
while [ -n "$r" ]; do c=$((c+1)); case $r in *"$nl"*) r=${r#*"$nl"} ;; *) r= ;; esac; done
[ "$c" -eq $# ] || z=
for f; do
  if [ -n "$z" ]; then s=${z%%"$nl"*}; case $z in *"$nl"*) z=${z#*"$nl"} ;; *) z= ;; esac
  else s=$(wc -c <"$f" | tr -d " "); fi
  printf "@@NPUPROF_FILE %s %s\n" "$s" "$f"; cat "$f"
done' sh {} +)SH";

const char* CsvStreamScript() { return kCollect; }

namespace {

json ComponentRow(const ProfCsvEntry& e, const ModuleMemComponent& m) {
  std::optional<int> dev = m.device_id;
  if (!dev && e.device_ids.size() == 1) dev = e.device_ids[0];
  const bool mapped = dev && std::find(e.device_ids.begin(), e.device_ids.end(), *dev) != e.device_ids.end();
  return {{"file", e.local_name},
          {"prof_dir", e.prof_dir},
          {"component", m.component},
          {"device_id", dev ? json(*dev) : json(nullptr)},
          {"max_mb", m.max_reserved_mb},
          {"row", m.max_data_row},
          {"raw", m.max_raw_value},
          {"timestamp", m.max_timestamp_raw},
          {"rows", m.rows},
          {"scope", mapped ? "device" : "process"}};
}

// One row per device that has a "Device" series: the peak measured on the
// series of the file DeviceSeriesFiles picks for it.
json ActivationPeaks(const json& npu_mem_rows, const std::map<std::string, NpuMemTable>& tables,
                     const std::map<std::string, std::vector<int>>& file_devices,
                     const std::optional<sm::ChosenWindow>& window) {
  json out = json::array();
  for (const auto& [dev, file] : sm::DeviceSeriesFiles(npu_mem_rows)) {
    auto t = tables.find(file);
    if (t == tables.end()) continue;
    auto fd = file_devices.find(file);
    std::vector<sm::SeriesSample> samples;
    for (const auto& sr : t->second.series) {
      std::optional<int> id = sr.device_id;
      if (!id && fd != file_devices.end() && fd->second.size() == 1) id = fd->second[0];
      if (sr.event != "Device" || id != dev) continue;
      for (const auto& p : sr.samples) samples.push_back({p.timestamp_us, p.hbm_mb, p.data_row});
    }
    const sm::ActivationPeak peak = sm::ActivationPeakFromSeries(
        std::move(samples), window ? std::optional<sm::InferenceWindow>(window->window) : std::nullopt,
        window ? sm::PeakOptionsFor(*window) : sm::ActivationPeakOptions{});
    json row = sm::ActivationPeakToJson(peak);
    row["device_id"] = dev;
    row["file"] = file;
    row["event"] = "Device";
    row["clock"] = window ? json(window->clock) : json(nullptr);
    out.push_back(std::move(row));
  }
  return out;
}

// The payload's window, when it has a usable one.
std::optional<sm::ChosenWindow> WindowOf(const tasks::MemoryCollectCsvs& p) {
  if (!p.has_inference_window()) return std::nullopt;
  const tasks::InferenceWindow& w = p.inference_window();
  return sm::UsableWindow(sm::ChosenWindow{{w.start_us(), w.end_us()},
                                           w.clock(),
                                           w.margin_us(),
                                           w.has_ready_us() ? std::optional<double>(w.ready_us()) : std::nullopt});
}

}  // namespace

TaskOutcome MemCollectCsvs(const tasks::MemoryCollectCsvs& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  const std::string& dir = p.msprof_dir();
  if (dir.empty() || dir[0] != '/') return TaskOutcome::Failure("bad_payload", "msprof_dir must be absolute", false);
  auto run = RunRemote(*c->session, {"sh", "-c", kCollect, "sh", dir}, std::chrono::seconds(600));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c->target);
  return CsvsFromStream(p, *run);
}

TaskOutcome CsvsFromStream(const tasks::MemoryCollectCsvs& p, const ssh::ExecResult& ran) {
  const ssh::ExecResult* run = &ran;
  const std::string& dir = p.msprof_dir();
  if (run->stdout_omitted > 0)
    return TaskOutcome::Failure("collect_too_large",
                                fmt::format("the CSVs under {} are larger than the {}-byte output cap of one command",
                                            dir, ssh::kExecOutputCap),
                                false);
  if (run->exit_status == 3)
    return TaskOutcome::Success(json{{"csv_count", 0}, {"csvs", json::array()}, {"module_mem", json::array()},
                                     {"npu_mem", json::array()}, {"__prof_device_map__", json::object()},
                                     {"prof_dirs", json::object()}, {"note", dir + " does not exist"}});
  auto stream = SplitFileStream(run->stdout_data);
  if (!stream.ok()) return TaskOutcome::Failure("collect_truncated", stream.status().message(), true);
  const std::vector<std::string>& listing = stream->listing;
  std::vector<StreamedFile>& files = stream->files;

  const ProfDeviceMap map = BuildProfDeviceMap(RelativePathsFromListing(fmt::format("{}", fmt::join(listing, "\n")), "."));
  std::map<std::string, std::string> by_path;
  for (auto& [p, data] : files) by_path[p.rfind("./", 0) == 0 ? p.substr(2) : p] = std::move(data);

  TaskOutcome out;
  json module_mem = json::array(), npu_mem = json::array(), parse_errors = json::array();
  std::map<std::string, NpuMemTable> npu_mem_tables;  // newest export, by local name
  std::map<std::string, std::vector<int>> file_devices;
  for (const auto& e : map.csvs) {
    auto it = by_path.find(e.path);
    if (it == by_path.end()) continue;
    out.blobs.emplace_back("msprof_csvs/" + e.local_name, it->second);
    if (!e.newest_export) continue;
    const MsprofCsvKind kind = DetectMsprofCsvKind(it->second);
    if (kind == MsprofCsvKind::kNpuModuleMem) {
      auto t = ParseNpuModuleMemCsv(it->second);
      if (!t.ok()) {
        parse_errors.push_back({{"file", e.local_name}, {"error", t.status().message()}});
        continue;
      }
      for (const auto& m : t->components)
        if (m.has_value) module_mem.push_back(ComponentRow(e, m));
    } else if (kind == MsprofCsvKind::kNpuMem) {
      auto t = ParseNpuMemCsv(it->second);
      if (!t.ok()) {
        parse_errors.push_back({{"file", e.local_name}, {"error", t.status().message()}});
        continue;
      }
      for (const auto& sr : t->series) {
        std::optional<int> dev = sr.device_id;
        if (!dev && e.device_ids.size() == 1) dev = e.device_ids[0];
        npu_mem.push_back({{"file", e.local_name}, {"prof_dir", e.prof_dir}, {"event", sr.event},
                           {"device_id", dev ? json(*dev) : json(nullptr)}, {"max_hbm_mb", sr.max_hbm_mb},
                           {"row", sr.max_data_row}, {"raw", sr.max_raw_hbm_kb}, {"samples", sr.samples.size()}});
      }
      file_devices[e.local_name] = e.device_ids;
      npu_mem_tables.emplace(e.local_name, std::move(*t));
    }
  }
  json full = ProfDeviceMapJson(map);
  out.ok = true;
  out.result = {{"csv_count", files.size()},
                {"csvs", full["csvs"]},
                {"__prof_device_map__", full["__prof_device_map__"]},
                {"prof_dirs", full["prof_dirs"]},
                {"module_mem", module_mem},
                {"npu_mem", npu_mem},
                {"activation_peaks", ActivationPeaks(npu_mem, npu_mem_tables, file_devices, WindowOf(p))},
                {"parse_errors", parse_errors}};
  return out;
}

}  // namespace npuprof::workers
