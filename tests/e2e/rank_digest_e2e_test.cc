// A rank's analysis next to its data (issue 38 item 3, issue 42 part 2),
// from the `npuprof` command against the simulated target behind the test
// kit's relay: analyse-root on a large rank the test lays out (400,000
// kernels: the simulator's analyse() writes a kernel_details.csv of about
// 100 MB and a trace_view.json of about 80 MB). Only the digest crosses the
// link: the analyse_rank task's recorded bytes in (`npuprof show`) stay
// under 1 MiB, and so do the relay's bytes towards npuprof over the whole
// run; its summary equals the C++ reference's of the same file; its round
// trips are a handful. No timing bounds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "parsers/kernel_summary.h"
#include "tests/support/npuprof_harness.h"
#include "tests/support/temp_dir.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

constexpr int kKernels = 400000;
constexpr int kOps = 20000;
constexpr uint64_t kMaxBytesPerRank = uint64_t{1} << 20;

// The raw data of one simulated rank: its device's tasks (what the
// simulator's analyse() turns into kernel_details.csv and the trace's device
// events) and its framework ops (the trace's host events).
void LayOutLargeRank(const std::string& dir) {
  std::string tasks = "[";
  tasks.reserve(size_t{kKernels} * 200);
  for (int i = 0; i < kKernels; ++i) {
    const bool hccl = i % 50 == 0;
    tasks += fmt::format(
        "{}{{\"step\":{},\"device\":0,\"task_id\":{},\"stream\":2,\"name\":\"{}\",\"type\":\"{}\",\"core\":\"{}\","
        "\"start_us\":{:.3f},\"dur_us\":{},\"wait_us\":0,\"block\":{}}}",
        i ? "," : "", 1 + i / 40000, i,
        hccl ? fmt::format("hcom_allReduce__{}_0", i % 97) : fmt::format("aclnnKernel{}_{}", i % 1500, i % 7),
        hccl ? "hcom_allReduce_" : fmt::format("Type{}", i % 40), hccl ? "HCCL" : (i % 3 ? "AI_CORE" : "AI_VECTOR_CORE"),
        1736413971558972.0 + i * 12.5, 1.25 + (i % 211) * 0.5, 8 + i % 24);
  }
  tasks += "]";
  WriteTree(dir + "/PROF_000001_20261206_large/device_0/data/sim_tasks.json.slice_0", tasks);
  std::string ops;
  for (int i = 0; i < kOps; ++i)
    ops += fmt::format("{{\"name\":\"aten::op{}\",\"pid\":4242,\"tid\":4243,\"ts\":{:.3f},\"dur\":{}}}\n", i % 300,
                       1736413971558000.0 + i * 250.0, 3 + i % 17);
  WriteTree(dir + "/FRAMEWORK/torch.op_range", ops);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RankDigestE2E, ALargeRanksAnalysisSendsOnlyItsDigest) {
  NpuprofHarness h;
  h.SetLink({500, 0});  // 0.5 ms each way: the relay counts the bytes
  ASSERT_TRUE(h.Start({}, 1).ok());
  const std::string root = h.Dir() + "/large-root";
  const std::string rank = root + "/node0_4242_20261206_ascend_pt";
  LayOutLargeRank(rank);
  ASSERT_NE(h.Relay(), nullptr);

  const RelayStats before = h.Relay()->Stats();
  CliResult r = h.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root", root, "--expected-ranks", "1",
                       "--tag", "large", "--wait"},
                      400);
  const RelayStats after = h.Relay()->Stats();
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  ASSERT_EQ(m["remote_profile_dirs"].size(), 1u) << m.dump(2);
  const json& d = m["remote_profile_dirs"][0];
  EXPECT_EQ(d["analysis_status"], "ok") << d.dump(2);
  const json& kd = d["outputs"]["kernel_details_csv"];
  const json& tv = d["outputs"]["trace_view_json"];
  EXPECT_EQ(kd["data_rows_checked"], kKernels);
  EXPECT_GT(kd["size"].get<uint64_t>(), uint64_t{50} << 20) << kd.dump();
  EXPECT_EQ(tv["valid"], true) << tv.dump();
  EXPECT_GT(tv["event_count"].get<uint64_t>(), static_cast<uint64_t>(kKernels + kOps)) << tv.dump();
  EXPECT_EQ(d["device_id"], 0);

  // The summary computed on the target is the reference's of the same file.
  const std::string csv = ReadAll(rank + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv");
  KernelSummaryBuilder b;
  ASSERT_TRUE(b.Feed(csv).ok());
  auto want = b.Finish();
  ASSERT_TRUE(want.ok());
  json got = d["kernel_summary"];
  EXPECT_EQ(got["bytes_read"], csv.size());
  for (const char* k : {"path", "bytes_read", "truncated"}) got.erase(k);
  EXPECT_EQ(got, KernelSummaryJson(*want));

  CliResult show = h.Cli({"show", m.value("run_id", "")});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  int analyses = 0;
  const json shown = show.json();
  for (const auto& t : shown["tasks"]) {
    if (t.value("kind", "") != "torch_profile.analyse_rank") continue;
    ++analyses;
    ASSERT_TRUE(t["link"].is_object()) << t.dump();
    const uint64_t in = t["link"]["bytes_in"].get<uint64_t>();
    const int64_t rts = t["round_trips"].get<int64_t>();
    std::cerr << fmt::format("[large rank] kernel_details.csv {} bytes, trace_view.json {} bytes; analyse_rank: "
                             "{} bytes in, {} bytes out, {} round trips, {} commands, {} sftp ops, {} ms in SSH",
                             kd["size"].get<uint64_t>(), tv["size"].get<uint64_t>(), in,
                             t["link"]["bytes_out"].get<uint64_t>(), rts, t["link"]["commands"].get<int64_t>(),
                             t["link"]["sftp_ops"].get<int64_t>(), t["link"]["link_ms"].get<int64_t>())
              << std::endl;
    EXPECT_LE(in, kMaxBytesPerRank) << t.dump();
    EXPECT_LE(rts, 30) << t.dump();
    EXPECT_EQ(t["link"]["sftp_ops"], 0) << t.dump();
  }
  EXPECT_EQ(analyses, 1) << show.out;
  // Counted by the test too: everything the target sent npuprof over the run
  // (the listing task and the analysis, handshakes included).
  const uint64_t relay_in = after.bytes_to_client - before.bytes_to_client;
  std::cerr << "[large rank] relay: " << relay_in << " bytes to npuprof, " << after.turns - before.turns << " turns"
            << std::endl;
  EXPECT_LE(relay_in, kMaxBytesPerRank);
}

// The target's python3 (the simulator's bin/python3, first on its PATH)
// becomes a script that answers the digest call with `body` (sh text) and
// runs the real interpreter otherwise (asked which interpreter it is, it
// names itself); the run's failure names the digest
// and what is wrong with it.
TEST(RankDigestE2E, AGarbageOrOversizedDigestFailsTheRankNamingWhatIsWrong) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({}, 1).ok());
  const std::string root = h.Dir() + "/hostile-root";
  std::filesystem::create_directories(root + "/r0_ascend_pt/PROF_000001_x/device_0");
  const std::string python = h.SimRoot() + "/bin/python3";
  std::error_code ec;
  const std::string real = std::filesystem::canonical(python, ec).string();
  ASSERT_FALSE(ec) << python;
  struct Case {
    const char* body;
    const char* tag;
    std::vector<std::string> wanted;
  };
  const std::vector<Case> cases = {
      {"printf 'Traceback (most recent call last):\\n  garbage \\377\\n'", "garbage",
       {"rank_digest_invalid", "the rank digest for", "not valid UTF-8"}},
      {"printf '{\"v\":1,\"finished\":\"soon\",\"alive\":true}\\n'", "wrongtype",
       {"rank_digest_invalid", "digest.finished must be true or false"}},
      {"head -c 300000 /dev/zero | tr '\\000' x", "toomuch", {"rank_digest_invalid", "more than 262144 bytes"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tag);
    std::filesystem::remove(python, ec);
    // Asked which interpreter it is (workers/profiling/interpreter_command.h),
    // it names itself, so the digest runs through it as the resolved path.
    WriteTree(python, std::string("#!/bin/sh\ncase \"$2\" in *X_OK*) printf '%s' \"$0\"; exit 0 ;; esac\n") +
                          "if [ \"$3\" = digest ]; then " + c.body + "; exit 0; fi\nexec '" + real + "' \"$@\"\n");
    std::filesystem::permissions(python, std::filesystem::perms::owner_all);
    CliResult r = h.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root", root, "--expected-ranks",
                         "1", "--tag", c.tag, "--wait"},
                        120);
    EXPECT_NE(r.exit_code, 0) << r.out;
    const std::string run = r.json().value("run_id", "");
    ASSERT_FALSE(run.empty()) << r.out << r.err;
    const std::string events = h.Cli({"events", run, "--json"}).out;
    for (const auto& w : c.wanted) EXPECT_NE(events.find(w), std::string::npos) << w << "\n" << events.substr(0, 4000);
  }
  std::filesystem::remove(python, ec);
  std::filesystem::create_symlink(real, python, ec);
}

}  // namespace
}  // namespace npuprof::testing
