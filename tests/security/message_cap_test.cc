// The message cap end to end (NPUPROF_MAX_MESSAGE_BYTES lowers it for a
// test): a worker result over it becomes a clear failure instead of a frame
// the broker drops; an answer over it is replaced by the broker with an
// error giving its size; a request over it is refused by the client before it is sent.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

TEST(MessageCap, OversizedMessagesAreReportedNotLost) {
  NpuprofHarness h;
  // The server and its local workers: under the probe's result (its
  // npu-smi text rides along as evidence, about 7 KiB in all) and over the
  // answers of `show` (with its per-task table, about 4 KiB).
  h.SetServerEnv({{"NPUPROF_MAX_MESSAGE_BYTES", "6144"}});
  ASSERT_TRUE(h.Start().ok());
  CliResult submit = h.Cli({"submit", "probe", "--machine", "sim1"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string run_id = submit.json().value("run_id", "");
  ASSERT_FALSE(run_id.empty()) << submit.out;

  // The probe's result carries npu-smi's whole output: over 6144 bytes.
  nlohmann::json shown;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    shown = h.Cli({"show", run_id}, 20).json();
    if (shown.is_object() && shown.value("status", "") != "" && shown.value("status", "") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(shown.is_object()) << h.Log("server");
  EXPECT_EQ(shown.value("status", ""), "failed") << shown.dump();
  const std::string error = shown.value("error", "");
  EXPECT_NE(error.find("result_too_large"), std::string::npos) << shown.dump();
  EXPECT_NE(error.find("over the 6144 bytes message cap"), std::string::npos) << shown.dump();
  EXPECT_NE(error.find("npu_smi_info.txt"), std::string::npos) << shown.dump();

  // An answer over the cap: two machines whose env script paths take most
  // of it, listed together. The broker says so instead of sending it.
  for (const std::string name : {"big1", "big2"}) {
    CliResult add = h.Cli({"machine", "add", name, "--host", "127.0.0.1", "--user", h.sshd().user(), "--identity",
                           h.sshd().identity_file(), "--known-hosts", h.sshd().known_hosts_file(), "--env-script",
                           "/" + std::string(3000, 'e')});
    ASSERT_EQ(add.exit_code, 0) << add.err;
  }
  CliResult list = h.Cli({"machine", "list"}, 30);
  EXPECT_EQ(list.exit_code, 2) << list.out.size();
  EXPECT_NE(list.err.find("over the 6144 bytes message cap"), std::string::npos) << list.err;
  EXPECT_FALSE(list.timed_out);

  // A client with a small cap refuses to send a larger request.
  setenv("NPUPROF_MAX_MESSAGE_BYTES", "4096", 1);
  CliResult big = h.Cli({"show", std::string(5000, 'r')}, 30);
  unsetenv("NPUPROF_MAX_MESSAGE_BYTES");
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_NE(big.err.find("the show request is"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("over the 4096 bytes message cap"), std::string::npos) << big.err;
  // And the server goes on serving.
  EXPECT_EQ(h.Cli({"runs"}).exit_code, 0);
}

}  // namespace
}  // namespace npuprof::testing
