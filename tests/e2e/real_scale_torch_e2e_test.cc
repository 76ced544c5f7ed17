// torch-profile at real scale, end to end (issue 38, "what must be shown"):
// `npuprof submit torch-profile --tp 8` on one simulated host with 8 NPUs
// whose every rank writes 400,000 kernel rows (scale.rows_per_rank: its
// kernel_details.csv is about 80 MB) and whose analyse() costs 0.25 s per MB
// of a rank's raw data (delays.analyse_per_mb; about 4 minutes per GB, a
// real analyse()'s order). The host has 64 cores and 256 GiB available and
// analyse() claims 20x a rank's raw size while it runs
// (analyse.peak_mb_per_mb), so the run chooses all 8 at once.
//
// What is shown, from the `npuprof` command through the test kit's relay
// (tests/sim/README.md "Far targets", 0.5 ms each way), which counts every
// byte the simulated host sent npuprof:
//   * the run is `ok`, all 8 ranks `ok` with 400,000 data rows each, and
//     the 8 analyse() ran at once on the target (its own record of each
//     analyse()'s start and end, state/timeline.jsonl), as the run chose;
//   * every rank's kernel summary, computed on the target by the rank
//     digest, equals the C++ reference (parsers/kernel_summary.h) of the
//     same kernel_details.csv read here from the simulator's files;
//   * each analyse_rank task's recorded bytes in (`npuprof show`) are
//     at most 1 MiB, and so is everything the relay carried towards npuprof
//     over the whole run (all tasks, handshakes included), which also
//     bounds npuprof's own count of the run from above;
//   * npuprof's peak RSS: the VmHWM of the server process and of each local
//     worker process (pids from `npuprof workers`), read from
//     /proc/<pid>/status right after the run, at most 256 MiB each.
// No timing bounds: the test prints its wall time and figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "parsers/kernel_summary.h"
#include "tests/support/npuprof_harness.h"
#include "tests/support/proc_memory.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

constexpr int kRanks = 8;
constexpr uint64_t kRowsPerRank = 400000;
constexpr uint64_t kMaxBytesPerRank = uint64_t{1} << 20;
constexpr int64_t kMaxPeakRssKb = 256 * 1024;

// One host with 8 NPUs (the 910B3 layout's default), real-scale ranks and
// a realistic analyse() cost, and the means to run every rank's analyse()
// at once.
const std::vector<std::string> kHost = {
    "--devices", "8", "--startup-delay", "0.5",
    "--set", "scale.rows_per_rank=400000", "--set", "delays.analyse_per_mb=0.25",
    "--set", "analyse.peak_mb_per_mb=20", "--set", "host.cores=64", "--set", "host.mem_available_mb=262144"};

// The most analyse() of directories under `root` running at one instant,
// from the target's record of each one's start and end.
int MostAnalysesAtOnce(const std::string& timeline, const std::string& root) {
  std::vector<std::pair<double, int>> edges;
  std::ifstream in(timeline);
  for (std::string line; std::getline(in, line);) {
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object() || e.value("what", "") != "analyse" || e.value("path", "").rfind(root, 0) != 0) continue;
    edges.emplace_back(e.value("start", 0.0), 1);
    edges.emplace_back(e.value("end", 0.0), -1);
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
  int most = 0, now = 0;
  for (const auto& [t, d] : edges) most = std::max(most, now += d);
  return most;
}

// The reference summary of a file read in 4 MiB pieces (the builder keeps
// only one entry per distinct kernel).
Result<json> ReferenceSummary(const std::string& path, uint64_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot be opened");
  KernelSummaryBuilder b;
  std::string buf(size_t{4} << 20, '\0');
  *bytes = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    *bytes += n;
    if (Status st = b.Feed(std::string_view(buf.data(), n)); !st.ok()) return st;
  }
  auto s = b.Finish();
  if (!s.ok()) return s.status();
  return KernelSummaryJson(*s);
}

TEST(RealScaleTorchE2E, EightRanksOfFourHundredThousandRowsAnalysedNextToTheirData) {
  NpuprofHarness h;
  h.SetLink({500, 0});  // 0.5 ms each way: the relay counts the bytes
  ASSERT_TRUE(h.Start(kHost, 2).ok());
  ASSERT_NE(h.Relay(), nullptr);
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());

  const RelayStats before = h.Relay()->Stats();
  const auto t0 = std::chrono::steady_clock::now();
  CliResult r = h.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "qwen",
                       "--tp", "8", "--tag", "scale", "--mode", "enforce_eager", "--request-kind", "text",
                       "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                       "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "120",
                       "--profile-control-timeout", "60", "--request-timeout", "60", "--wait"},
                      540);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const RelayStats after = h.Relay()->Stats();

  // Peak RSS right after the run, while every npuprof process still runs.
  std::map<std::string, int64_t> peaks;
  const auto server_peak = PeakRssKb(h.server_pid());
  ASSERT_TRUE(server_peak.ok()) << server_peak.status().message();
  peaks["server " + std::to_string(h.server_pid())] = *server_peak;
  const std::vector<pid_t> workers = h.WorkerPids();
  ASSERT_EQ(workers.size(), 2u);
  for (pid_t pid : workers) {
    const auto peak = PeakRssKb(pid);
    ASSERT_TRUE(peak.ok()) << peak.status().message();
    peaks["worker " + std::to_string(pid)] = *peak;
  }

  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  ASSERT_EQ(m.value("status", ""), "ok") << m.dump(2);
  EXPECT_EQ(m.value("analysis_status", ""), "ok");
  EXPECT_EQ(m.value("rank_count", 0), kRanks);
  const json limits = m.value("analyse_limits", json::array());
  ASSERT_EQ(limits.size(), 1u) << limits.dump(2);
  EXPECT_EQ(limits[0].value("limit", 0), kRanks) << limits.dump(2);
  EXPECT_EQ(MostAnalysesAtOnce(h.SimRoot() + "/state/timeline.jsonl", m.value("remote_profile_root", std::string("?"))),
            kRanks)
      << "analyse() processes at once on a host whose means allow every rank's";

  // Every rank: ok, 400,000 rows, and the target's summary is the reference's.
  const json dirs = m.value("remote_profile_dirs", json::array());
  ASSERT_EQ(dirs.size(), static_cast<size_t>(kRanks)) << m.dump(2);
  uint64_t csv_total = 0;
  for (const json& d : dirs) {
    SCOPED_TRACE(d.value("path", std::string("?")));
    EXPECT_EQ(d.value("analysis_status", ""), "ok") << d.dump(2);
    const json& kd = d["outputs"]["kernel_details_csv"];
    EXPECT_EQ(kd.value("data_rows_checked", uint64_t{0}), kRowsPerRank) << kd.dump();
    const std::string csv = kd.value("path", "");
    uint64_t bytes = 0;
    const auto want = ReferenceSummary(csv, &bytes);
    ASSERT_TRUE(want.ok()) << want.status().message();
    csv_total += bytes;
    json got = d.value("kernel_summary", json::object());
    EXPECT_EQ(got.value("bytes_read", uint64_t{0}), bytes);
    EXPECT_EQ(got.value("truncated", true), false);
    for (const char* k : {"path", "bytes_read", "truncated"}) got.erase(k);
    EXPECT_EQ(got.value("data_rows", uint64_t{0}), kRowsPerRank);
    EXPECT_EQ(got, *want);
  }

  // Bytes: npuprof's own count per analyse_rank attempt, and the relay's.
  CliResult show = h.Cli({"show", m.value("run_id", "")});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const json shown = show.json();
  int analyses = 0;
  uint64_t analyse_in = 0, analyse_max = 0;
  for (const auto& t : shown["tasks"]) {
    if (t.value("kind", "") != "torch_profile.analyse_rank") continue;
    ++analyses;
    ASSERT_TRUE(t["link"].is_object()) << t.dump();
    const uint64_t in = t["link"]["bytes_in"].get<uint64_t>();
    analyse_in += in;
    analyse_max = std::max(analyse_max, in);
    EXPECT_LE(in, kMaxBytesPerRank) << t.dump();
    EXPECT_EQ(t["link"]["sftp_ops"], 0) << t.dump();
  }
  EXPECT_EQ(analyses, kRanks) << show.out;
  ASSERT_TRUE(shown["link_total"].is_object()) << shown.dump(2);
  const uint64_t recorded_in = shown["link_total"]["bytes_in"].get<uint64_t>();
  const uint64_t relay_in = after.bytes_to_client - before.bytes_to_client;
  // The relay carried every byte npuprof received from the host, so it
  // bounds the tasks' recorded figures from above; over the whole run it
  // stays under what one rank may cost.
  EXPECT_LE(analyse_in, recorded_in);
  EXPECT_LE(recorded_in, relay_in);
  EXPECT_LE(relay_in, kMaxBytesPerRank);

  for (const auto& [who, kb] : peaks) EXPECT_LE(kb, kMaxPeakRssKb) << who << " peak RSS " << kb << " kB";

  std::string peak_text;
  for (const auto& [who, kb] : peaks) peak_text += fmt::format(" {} {:.1f} MiB;", who, static_cast<double>(kb) / 1024);
  std::cerr << fmt::format("[real scale] {} ranks x {} rows: wall {:.1f} s; kernel_details.csv {:.1f} MiB in all; "
                           "analyse_rank bytes in {} in all, {} at most per rank; every task's bytes in {}; relay "
                           "{} bytes to npuprof, {} turns over the run; peak RSS (VmHWM):{}",
                           kRanks, kRowsPerRank, wall_s, static_cast<double>(csv_total) / (1 << 20), analyse_in,
                           analyse_max, recorded_in, relay_in, after.turns - before.turns, peak_text)
            << std::endl;
}

}  // namespace
}  // namespace npuprof::testing
