// A full disk under the data dir, end to end (store/disk_space.h): the data
// dir on a small tmpfs of its own, filled by a run's evidence. The run whose
// evidence does not fit fails naming the space (its waiting client gets that
// answer), new work is refused while space is short and taken again once it
// is back, the server never aborts, and after a restart everything committed
// is there and `verify` passes. A server started on a full disk says so and
// exits 2. Needs root (mount); skips with the reason otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "tests/support/npuprof_harness.h"
#include "tests/support/tmpfs_mount.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
constexpr uint64_t kMiB = uint64_t{1} << 20;

#define SKIP_WITHOUT_MOUNT(m) \
  if (!(m).ok()) GTEST_SKIP() << "cannot mount a tmpfs for this test: " << (m).error

// Makes the target's npu-smi print its table followed by `pad` bytes of
// random text (read from a file the test rewrites between runs): the probe
// keeps the whole output as its evidence.
class PaddedNpuSmi {
 public:
  explicit PaddedNpuSmi(const std::string& sim_root) : bin_(sim_root + "/bin/npu-smi"), pad_(sim_root + "/pad.txt") {
    const std::string real = std::filesystem::read_symlink(bin_).string();
    std::filesystem::remove(bin_);
    std::ofstream(bin_) << "#!/bin/sh\n'" << real << "' \"$@\"\nrc=$?\ncat '" << pad_ << "'\nexit $rc\n";
    ::chmod(bin_.c_str(), 0755);
    Pad(0);
  }
  void Pad(uint64_t bytes) const {
    std::mt19937_64 rng(bytes);
    std::ofstream f(pad_, std::ios::trunc);
    std::string line(79, 'x');
    for (uint64_t done = 0; done < bytes; done += 80) {
      for (auto& c : line) c = static_cast<char>('!' + rng() % 90);  // printable, hardly compressible
      f << line << '\n';
    }
  }

 private:
  std::string bin_, pad_;
};

// Copies a stopped server's data dir: directories, files and links (its
// socket is left out: the server makes a new one).
void CopyDataDir(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  ::chmod(to.c_str(), 0700);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path dest = fs::path(to) / fs::relative(e.path(), from);
    if (e.is_symlink()) fs::copy_symlink(e.path(), dest);
    else if (e.is_directory()) fs::create_directories(dest);
    else if (e.is_regular_file()) fs::copy_file(e.path(), dest);
  }
}

// The harness's data dir moved onto a tmpfs of `size_mib` (the server is
// restarted on it).
void MoveDataDirOnto(NpuprofHarness& h, std::unique_ptr<TmpfsMount>& m, int size_mib) {
  h.KillServer(SIGTERM);
  const std::string data = h.DataDir(), saved = h.Dir() + "/data.saved";
  std::filesystem::rename(data, saved);
  std::filesystem::create_directory(data);
  ::chmod(data.c_str(), 0700);
  m = std::make_unique<TmpfsMount>(size_mib, data);
  if (!m->ok()) return;
  CopyDataDir(saved, data);
  Status restarted = h.RestartServer();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
}

TEST(FullDiskE2E, EvidenceThatDoesNotFitFailsItsRunNamingTheSpaceAndNothingCommittedIsLost) {
  EnterPrivateMountNamespace();  // a mount that dies with this test
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  std::unique_ptr<TmpfsMount> m;  // after h: unmounted before the harness removes its dir
  MoveDataDirOnto(h, m, 200);
  SKIP_WITHOUT_MOUNT(*m);
  ASSERT_FALSE(HasFatalFailure());
  PaddedNpuSmi npu_smi(h.SimRoot());

  auto probe = [&](int timeout_s = 180) { return h.Cli({"submit", "probe", "--machine", "sim1", "--wait"}, timeout_s); };
  CliResult a = probe();
  ASSERT_EQ(a.exit_code, 0) << a.err << a.out;
  const std::string run_a = a.json()["run_id"];

  // 80 MB free: 2 MB of evidence fits (64 MB are kept free, the write
  // counts twice, plus what the memtables hold) ...
  m->Fill("filler", 80 * kMiB);
  npu_smi.Pad(2 * kMiB);
  CliResult b = probe();
  ASSERT_EQ(b.exit_code, 0) << b.err << b.out;
  const std::string run_b = b.json()["run_id"];

  // ... 12 MB more does not: the run fails saying why, and the waiting client is answered.
  npu_smi.Pad(12 * kMiB);
  CliResult c = probe();
  ASSERT_FALSE(c.timed_out) << "the waiting client must get an answer";
  EXPECT_EQ(c.exit_code, 1) << c.err << c.out;
  const json cj = c.json();
  ASSERT_TRUE(cj.is_object()) << c.out;
  const std::string run_c = cj["run_id"];
  EXPECT_EQ(cj.value("status", ""), "failed");
  const std::string why = cj.value("error", "");
  EXPECT_NE(why.find("no space left on device under " + h.DataDir() + " ("), std::string::npos) << cj.dump(2);
  EXPECT_NE(why.find(" MB free)"), std::string::npos) << why;
  EXPECT_NE(why.find("npu_smi_info.txt"), std::string::npos) << why;

  // Below the reserve: new work is refused with the same words, reads go on.
  m->Fill("filler2", 40 * kMiB);
  CliResult refused = h.Cli({"submit", "probe", "--machine", "sim1"});
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.err.find("no space left on device under " + h.DataDir() + " ("), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("no new work is taken"), std::string::npos) << refused.err;
  EXPECT_EQ(h.Cli({"runs"}).exit_code, 0);
  EXPECT_EQ(h.Cli({"show", run_b}).exit_code, 0);

  // Space back: work is taken again.
  std::filesystem::remove(m->dir() + "/filler");
  std::filesystem::remove(m->dir() + "/filler2");
  npu_smi.Pad(2 * kMiB);
  CliResult d = probe();
  ASSERT_EQ(d.exit_code, 0) << d.err << d.out;
  const std::string run_d = d.json()["run_id"];

  // No abort at any point; after a restart everything committed is there.
  ASSERT_EQ(::kill(h.server_pid(), 0), 0) << "the server died: " << h.Log("server");
  EXPECT_EQ(h.Log("server").find("Assertion"), std::string::npos) << h.Log("server");
  h.KillServer(SIGTERM);
  ASSERT_TRUE(h.RestartServer().ok());
  CliResult verify = h.Cli({"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const std::map<std::string, std::string> want = {{run_a, "ok"}, {run_b, "ok"}, {run_c, "failed"}, {run_d, "ok"}};
  for (const auto& [run, status] : want) {
    CliResult show = h.Cli({"show", run});
    EXPECT_EQ(show.json().value("status", ""), status) << run << ": " << show.out;
  }
  const json events = h.Cli({"events", run_c, "--json"}).json();
  int no_space = 0;
  for (const auto& e : events.value("events", json::array()))
    if (e.value("type", "") == "TaskFailed") no_space += e["payload"].value("error_kind", "") == "no_space";
  EXPECT_GE(no_space, 1) << events.dump(2);
}

// Below half the reserve even a run's progress cannot be recorded: the run
// under way waits (the log says why), and once space is back it resumes
// from its recorded events, as after a restart, and ends ok.
TEST(FullDiskE2E, ARunWhoseProgressCannotBeRecordedWaitsAndResumesWhenSpaceIsBack) {
  EnterPrivateMountNamespace();
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  std::unique_ptr<TmpfsMount> m;
  MoveDataDirOnto(h, m, 200);
  SKIP_WITHOUT_MOUNT(*m);
  ASSERT_FALSE(HasFatalFailure());
  // npu-smi waits for the test's word the first time, then runs at once.
  const std::string bin = h.SimRoot() + "/bin/npu-smi", go = h.Dir() + "/go", started = h.Dir() + "/started";
  const std::string real = std::filesystem::read_symlink(bin).string();
  std::filesystem::remove(bin);
  std::ofstream(bin) << "#!/bin/sh\nif [ ! -e '" << go << "' ]; then : > '" << started << "'\n"
                     << "  while [ ! -e '" << go << "' ]; do sleep 0.05; done\nfi\nexec '" << real << "' \"$@\"\n";
  ::chmod(bin.c_str(), 0755);

  CliResult submitted = h.Cli({"submit", "probe", "--machine", "sim1"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string run = submitted.json()["run_id"];
  auto wait_for = [](const std::function<bool()>& seen, int timeout_s) {
    auto delay = std::chrono::milliseconds(20);
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
         std::chrono::steady_clock::now() < until; delay = std::min(delay * 2, std::chrono::milliseconds(500))) {
      if (seen()) return true;
      std::this_thread::sleep_for(delay);
    }
    return seen();
  };
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(started); }, 60)) << "npu-smi never ran";
  m->Fill("filler", 16 * kMiB);  // under half the 64 MB reserve
  std::ofstream(go) << "";
  const std::string why = "its progress could not be recorded";
  ASSERT_TRUE(wait_for([&] { return h.Log("server").find("run " + run + ": " + why) != std::string::npos; }, 60))
      << h.Log("server");
  EXPECT_NE(h.Log("server").find("no space left on device under " + h.DataDir()), std::string::npos);
  EXPECT_EQ(h.Cli({"show", run}).json().value("status", ""), "running") << "it waits";

  std::filesystem::remove(m->dir() + "/filler");
  CliResult waited = h.Cli({"watch", run}, 120);
  CliResult shown = h.Cli({"show", run});
  EXPECT_EQ(shown.json().value("status", ""), "ok") << shown.out << waited.err;
  const json events = h.Cli({"events", run, "--json"}).json();
  int recovered = 0;
  for (const auto& e : events.value("events", json::array())) recovered += e.value("type", "") == "RunRecovered";
  EXPECT_EQ(recovered, 1) << events.dump(2);
  EXPECT_EQ(h.Cli({"verify", run}).exit_code, 0);
  ASSERT_EQ(::kill(h.server_pid(), 0), 0) << "the server died: " << h.Log("server");
}

TEST(FullDiskE2E, AServerStartedOnAFullDiskSaysSoAndExits2) {
  EnterPrivateMountNamespace();  // a mount that dies with this test
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  h.KillServer(SIGTERM);
  TmpfsMount m(64);
  SKIP_WITHOUT_MOUNT(m);
  // A store that exists (a restart) and a new one, both on the full disk.
  const std::string existing = m.dir() + "/data";
  CopyDataDir(h.DataDir(), existing);
  m.Fill("filler", 0);
  for (const std::string& dir : {existing, m.dir() + "/new"}) {
    CliResult r = h.CliRaw({"server", "--data-dir", dir, "--local-workers", "0"}, 60);
    ASSERT_FALSE(r.timed_out) << dir;
    EXPECT_EQ(r.exit_code, 2) << dir << ": " << r.err;
    EXPECT_NE(r.err.find("no space left on device under " + dir + " (0 MB free)"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Assertion"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace npuprof::testing
