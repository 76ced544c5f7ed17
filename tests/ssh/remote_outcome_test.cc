// How SSH failures become task outcomes (retry or not, with the fix named),
// and how remote bytes become text for people (TailLines, the result JSON):
// pure, no SSH involved.
#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"
#include "workers/remote.h"
#include "workers/shown_text.h"

namespace npuprof::workers {
namespace {

ssh::SshTarget Target() {
  ssh::SshTarget t;
  t.host = "10.0.0.5";
  t.user = "root";
  return t;
}

TaskOutcome From(ssh::SshErrorKind k, const std::string& msg = "details") {
  return OutcomeFromSsh(Status(Code::kUnavailable, std::string(ssh::SshErrorKindName(k)) + ": " + msg), Target());
}

TEST(RemoteOutcome, TransientKindsAreRetriedPermanentOnesAreNot) {
  for (auto k : {ssh::SshErrorKind::kUnreachable, ssh::SshErrorKind::kTimeout, ssh::SshErrorKind::kConnectionLost,
                 ssh::SshErrorKind::kChannelFailed}) {
    EXPECT_TRUE(From(k).retryable) << ssh::SshErrorKindName(k);
    EXPECT_FALSE(ssh::IsPermanent(k));
  }
  for (auto k : {ssh::SshErrorKind::kAuthFailed, ssh::SshErrorKind::kHostKeyUnknown,
                 ssh::SshErrorKind::kHostKeyMismatch, ssh::SshErrorKind::kSubsystemRefused,
                 ssh::SshErrorKind::kToolMissing, ssh::SshErrorKind::kInvalidInput}) {
    const TaskOutcome o = From(k);
    EXPECT_FALSE(o.retryable) << ssh::SshErrorKindName(k);
    EXPECT_TRUE(ssh::IsPermanent(k));
    EXPECT_EQ(o.error_kind, ssh::SshErrorKindName(k));
    EXPECT_EQ(o.error.find(std::string(ssh::SshErrorKindName(k)) + ":"), std::string::npos) << o.error;
  }
  EXPECT_FALSE(From(ssh::SshErrorKind::kRemoteError).retryable);
  EXPECT_NE(From(ssh::SshErrorKind::kToolMissing).error.find("PATH"), std::string::npos);
  EXPECT_NE(From(ssh::SshErrorKind::kSubsystemRefused).error.find("Subsystem sftp"), std::string::npos);
  EXPECT_NE(From(ssh::SshErrorKind::kAuthFailed, "key rejected").error.find("key rejected (root@10.0.0.5:22)"),
            std::string::npos);
}

TEST(RemoteOutcome, NpuSmiTimeoutIsTheMachinesOwnElseFortyFiveSeconds) {
  tasks::Machine m;
  EXPECT_EQ(NpuSmiTimeout(m), std::chrono::seconds(45));
  m.set_npu_smi_timeout_s(7);
  EXPECT_EQ(NpuSmiTimeout(m), std::chrono::seconds(7));
  m.set_npu_smi_timeout_s(500);  // never beyond the task's lease, whatever a payload says
  EXPECT_EQ(NpuSmiTimeout(m), std::chrono::seconds(45));
}

TEST(RemoteOutcome, ErrorKindsRoundTripThroughTheirPrefix) {
  for (auto k : {ssh::SshErrorKind::kSubsystemRefused, ssh::SshErrorKind::kToolMissing,
                 ssh::SshErrorKind::kRemoteError, ssh::SshErrorKind::kInvalidInput}) {
    EXPECT_EQ(ssh::ErrorKindOf(Status(Code::kIoError, std::string(ssh::SshErrorKindName(k)) + ": x")), k);
  }
}

TEST(ShownText, TailLinesIsValidUtf8AndCapped) {
  const std::string err = "ok line\ndcmi error \377\376\n";
  const std::string t = TailLines(err, 1);
  EXPECT_TRUE(IsValidUtf8(t));
  EXPECT_EQ(t, "dcmi error \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(TailLines("a\nb\nc\n", 2), "b\nc");
  // One huge line: the end is kept, cut at a character boundary.
  std::string huge;
  while (huge.size() < 3 * kShownTailMaxBytes) huge += "\xe4\xb8\xad";  // U+4E2D, 3 bytes
  const std::string cut = TailLines(huge, 5);
  EXPECT_TRUE(IsValidUtf8(cut));
  EXPECT_LE(cut.size(), kShownTailMaxBytes + 3);
  EXPECT_EQ(cut.rfind("…", 0), 0u);
  EXPECT_EQ(cut.find("\xEF\xBF\xBD"), std::string::npos) << "no replacement char for the cut";
}

TEST(ShownText, ResultJsonNeverThrowsAndKeepsValidTextAsIs) {
  nlohmann::json r = {{"name", "python3\xb2\xe2"}, {"list", {"ok", "\377"}}, {"n", 3},
                      {std::string("key\xff"), {{"deep", "x\xc0"}}}};
  EXPECT_THROW((void)r.dump(), nlohmann::json::type_error);
  const std::string text = ResultJsonText(r);
  EXPECT_TRUE(IsValidUtf8(text));
  const auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back["name"], "python3\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(back["list"][1], "\xEF\xBF\xBD");
  EXPECT_EQ(back["n"], 3);
  EXPECT_EQ(back["key\xEF\xBF\xBD"]["deep"], "x\xEF\xBF\xBD");
  const nlohmann::json fine = {{"a", "中文"}, {"b", {1, 2}}};
  EXPECT_EQ(ResultJsonText(fine), fine.dump());
}

}  // namespace
}  // namespace npuprof::workers
