// `npuprof keys` from the command line: show, new, allow, list, remove, the
// files and modes they leave, and --help on each.
#include <gtest/gtest.h>

#include "common/allow_list.h"
#include "common/curve_keys.h"
#include "common/server_keys.h"
#include "tests/security/security_test_util.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

TEST(KeysCli, RoundTrip) {
  TempDir t;
  NpuprofHarness h;  // not started: only runs the binary
  const std::string dd = t.path() + "/data";

  CliResult show = h.CliRaw({"keys", "--data-dir", dd});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const std::string server_pub = show.json().value("server_public_key", "");
  EXPECT_TRUE(ValidateZ85Key(server_pub, "server_public_key").ok()) << show.out;
  EXPECT_EQ(ModeOf(dd), 0700);
  EXPECT_EQ(ModeOf(dd + "/curve"), 0700);
  EXPECT_EQ(ModeOf(dd + "/curve/server.key"), 0600);
  EXPECT_EQ(ModeOf(dd + "/curve/local.key"), 0600);
  auto pub_file = ParseKeyFile(ReadText(dd + "/curve/server.pub"), "server.pub", false);
  ASSERT_TRUE(pub_file.ok());
  EXPECT_EQ(pub_file->public_key, server_pub);
  // The same key every time, also through `keys show`.
  EXPECT_EQ(h.CliRaw({"keys", "show", "--data-dir", dd}).json().value("server_public_key", ""), server_pub);

  const std::string key_file = t.path() + "/w1.key";
  CliResult made = h.CliRaw({"keys", "new", "--out", key_file});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string w1 = made.json().value("public_key", "");
  EXPECT_EQ(ModeOf(key_file), 0600);
  auto pair = ParseKeyFile(ReadText(key_file), key_file, true);
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  EXPECT_EQ(pair->public_key, w1);
  CliResult again = h.CliRaw({"keys", "new", "--out", key_file});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(ParseKeyFile(ReadText(key_file), key_file, true)->public_key, w1);  // untouched

  CliResult allow = h.CliRaw({"keys", "allow", "--data-dir", dd, "w1", "--", w1});
  ASSERT_EQ(allow.exit_code, 0) << allow.err;
  EXPECT_EQ(allow.json()["added"], true);
  EXPECT_EQ(ModeOf(dd + "/curve/allowed"), 0600);
  // Allowing the same again changes nothing; the same key under another name, or the server's own key, is refused.
  EXPECT_EQ(h.CliRaw({"keys", "allow", "--data-dir", dd, "w1", "--", w1}).json()["added"], false);
  CliResult dup = h.CliRaw({"keys", "allow", "--data-dir", dd, "w2", "--", w1});
  EXPECT_EQ(dup.exit_code, 2);
  EXPECT_NE(dup.err.find("already listed as 'w1'"), std::string::npos) << dup.err;
  CliResult own = h.CliRaw({"keys", "allow", "--data-dir", dd, "srv", "--", server_pub});
  EXPECT_EQ(own.exit_code, 2);
  EXPECT_NE(own.err.find("one of the server's own keys"), std::string::npos) << own.err;
  CliResult bad_name = h.CliRaw({"keys", "allow", "--data-dir", dd, "bad name", "--", w1});
  EXPECT_EQ(bad_name.exit_code, 2);
  EXPECT_NE(bad_name.err.find("NAME: "), std::string::npos) << bad_name.err;
  CliResult bad_key = h.CliRaw({"keys", "allow", "w3", "not-a-key", "--data-dir", dd});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.err.find("neither a CURVE public key"), std::string::npos) << bad_key.err;
  // A key file names its key too (its secret is not copied anywhere).
  CliResult made2 = h.CliRaw({"keys", "new", "--out", t.path() + "/w2.key"});
  ASSERT_EQ(made2.exit_code, 0);
  ASSERT_EQ(h.CliRaw({"keys", "allow", "w2", t.path() + "/w2.key", "--data-dir", dd}).exit_code, 0);
  EXPECT_EQ(ReadText(dd + "/curve/allowed").find(pair->secret_key), std::string::npos);

  CliResult list = h.CliRaw({"keys", "list", "--data-dir", dd});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto peers = list.json()["peers"];
  ASSERT_EQ(peers.size(), 2u) << list.out;
  EXPECT_EQ(peers[0]["name"], "w1");
  EXPECT_EQ(peers[0]["public_key"], w1);
  EXPECT_EQ(peers[1]["public_key"], made2.json()["public_key"]);

  CliResult removed = h.CliRaw({"keys", "remove", "w1", "--data-dir", dd});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(removed.json()["removed"]["public_key"], w1);
  EXPECT_EQ(h.CliRaw({"keys", "list", "--data-dir", dd}).json()["peers"].size(), 1u);
  CliResult gone = h.CliRaw({"keys", "remove", "w1", "--data-dir", dd});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_NE(gone.err.find("no peer named 'w1'"), std::string::npos) << gone.err;
}

// The allow command npuprof prints (keys new's "next", the refusals) pasted
// into a shell admits the key, for a key that starts with a dash and holds
// shell characters (Z85: $ & ( ) * ? ! # < > [ ] { }).
TEST(KeysCli, ThePrintedAllowCommandWorksInAShellForAKeyStartingWithADash) {
  TempDir t;
  NpuprofHarness h;
  const std::string dd = t.path() + "/data";
  ASSERT_EQ(h.CliRaw({"keys", "--data-dir", dd}).exit_code, 0);
  const std::string key = "-uu[vl6Una}{:4pL{.O/FEE8D[UkN)ID.jXleg7p";
  ASSERT_TRUE(ValidateZ85Key(key, "key").ok());
  std::string line = AllowCommandFor("dash", key);
  ASSERT_EQ(line.rfind("npuprof ", 0), 0u) << line;
  line = "NPUPROF_DATA_DIR='" + dd + "' '" + NpuprofBinary() + "'" + line.substr(std::string("npuprof").size());
  const auto r = RunCommand({"/bin/sh", "-c", line}, 60);
  ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.err;
  const auto peers = h.CliRaw({"keys", "list", "--data-dir", dd}).json()["peers"];
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0]["public_key"], key);
  // keys new prints the same form.
  CliResult made = h.CliRaw({"keys", "new", "--out", t.path() + "/p.key"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.json().value("next", ""),
            "on the server: " + AllowCommandFor("NAME", made.json().value("public_key", "")));
}

TEST(KeysCli, EveryVerbHasHelp) {
  NpuprofHarness h;
  for (const auto& verb : std::vector<std::vector<std::string>>{
           {"keys", "--help"}, {"keys", "show", "--help"}, {"keys", "new", "--help"},
           {"keys", "allow", "--help"}, {"keys", "list", "--help"}, {"keys", "remove", "--help"}}) {
    CliResult r = h.CliRaw(verb);
    EXPECT_EQ(r.exit_code, 0) << verb[1] << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
  // Client verbs name the key flags.
  CliResult runs = h.CliRaw({"runs", "--help"});
  EXPECT_NE(runs.out.find("--key-file"), std::string::npos);
  EXPECT_NE(runs.out.find("--server-key"), std::string::npos);
}

TEST(KeysCli, AnUnsafeDataDirIsRefused) {
  TempDir t;
  NpuprofHarness h;
  const std::string dd = t.path() + "/shared";
  ASSERT_EQ(::mkdir(dd.c_str(), 0700), 0);
  ::chmod(dd.c_str(), 0777);
  CliResult keys = h.CliRaw({"keys", "--data-dir", dd});
  EXPECT_EQ(keys.exit_code, 2);
  EXPECT_NE(keys.err.find("writable by group or others"), std::string::npos) << keys.err;
  // The server refuses it too, before it binds anything.
  CliResult server = h.CliRaw({"server", "--data-dir", dd, "--local-workers", "0"}, 60);
  EXPECT_FALSE(server.timed_out);
  EXPECT_EQ(server.exit_code, 2);
  EXPECT_NE(server.err.find("writable by group or others"), std::string::npos) << server.err;
  EXPECT_FALSE(std::filesystem::exists(dd + "/npuprof.sock"));
  EXPECT_FALSE(std::filesystem::exists(dd + "/curve"));
}

}  // namespace
}  // namespace npuprof::testing
