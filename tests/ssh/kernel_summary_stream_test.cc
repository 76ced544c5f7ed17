// The kernel summary read from a target in chunks (workers/handlers/
// kernel_summary_stream.h) against a real loopback sshd, with and without
// its SFTP subsystem: the same summary as the whole file parsed at once,
// whatever the chunk size; the read cap cuts at the last complete line and
// says so; a missing or malformed file is an error in the summary.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "parsers/kernel_summary.h"
#include "tests/support/sshd_fixture.h"
#include "workers/handlers/kernel_summary_stream.h"

namespace npuprof::workers {
namespace {

std::string Csv(int rows) {
  std::string s = "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Input Shapes\n";
  for (int i = 0; i < rows; ++i)
    s += "1,0,\"k" + std::to_string(i % 7) + ",x\",T" + std::to_string(i % 3) + ",AI_CORE,\"1736413971558972." +
         std::to_string(i % 1000) + "\t\"," + std::to_string(1 + i % 13) + ".25,\"\"\"8,4\"\"\"\n";
  return s;
}

class KernelSummaryStream : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    sshd_.set_sftp_subsystem(GetParam());
    ASSERT_TRUE(sshd_.Start().ok());
    path_ = sshd_.dir() + "/kernel_details.csv";
  }
  npuprof::testing::SshdFixture sshd_;
  std::string path_;
  std::atomic<bool> cancelled_{false};
};

TEST_P(KernelSummaryStream, ChunkedReadsGiveTheWholeFilesSummary) {
  const std::string text = Csv(5000);
  std::ofstream(path_, std::ios::binary) << text;
  KernelSummaryBuilder whole;
  ASSERT_TRUE(whole.Feed(text).ok());
  const nlohmann::json want = KernelSummaryJson(*whole.Finish());
  ssh::SshSession s(sshd_.target());
  int progress = 0;
  for (uint64_t chunk : {uint64_t{1000}, uint64_t{65536}, kKernelSummaryChunkBytes}) {
    nlohmann::json got = StreamKernelSummary(s, path_, [&] { ++progress; }, cancelled_, kMaxKernelSummaryBytes, chunk);
    EXPECT_EQ(got["bytes_read"], text.size());
    EXPECT_EQ(got["truncated"], false);
    for (const char* k : {"path", "bytes_read", "truncated"}) got.erase(k);
    EXPECT_EQ(got, want) << "chunk " << chunk;
  }
  EXPECT_GT(progress, static_cast<int>(text.size() / 1000));
  EXPECT_EQ(want["counted_rows"], 5000);
  EXPECT_EQ(s.files_over_exec(), !GetParam());
}

TEST_P(KernelSummaryStream, TheCapCutsAtTheLastCompleteLine) {
  const std::string text = Csv(400);
  std::ofstream(path_, std::ios::binary) << text;
  ssh::SshSession s(sshd_.target());
  const nlohmann::json got = StreamKernelSummary(s, path_, nullptr, cancelled_, 5000, 777);
  EXPECT_EQ(got["truncated"], true) << got.dump();
  const std::string head = text.substr(0, 5000);
  KernelSummaryBuilder b;
  ASSERT_TRUE(b.Feed(head.substr(0, head.rfind('\n') + 1)).ok());
  EXPECT_EQ(got["counted_rows"], b.Finish()->counted_rows);
}

TEST_P(KernelSummaryStream, MissingMalformedAndCancelledAreErrorsInTheSummary) {
  ssh::SshSession s(sshd_.target());
  EXPECT_TRUE(StreamKernelSummary(s, path_ + ".none", nullptr, cancelled_).contains("error"));
  std::ofstream(path_, std::ios::binary) << "Name,Start Time(us)\nx,1\n";
  const nlohmann::json bad = StreamKernelSummary(s, path_, nullptr, cancelled_);
  EXPECT_NE(bad.value("error", "").find("lacks Type, Duration(us)"), std::string::npos) << bad.dump();
  std::atomic<bool> stop{true};
  EXPECT_EQ(StreamKernelSummary(s, path_, nullptr, stop).value("error", ""), "cancelled while reading");
}

INSTANTIATE_TEST_SUITE_P(Transports, KernelSummaryStream, ::testing::Bool(),
                         [](const auto& i) { return i.param ? "sftp" : "command_channel"; });

}  // namespace
}  // namespace npuprof::workers
