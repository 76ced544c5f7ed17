// `npuprof verify` replays runs from their events and detects a corrupted
// event; `npuprof import` rebuilds a run elsewhere from `events --json`.
#include <fstream>
#include <functional>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "store/event_store.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

std::string ProbeRun(NpuprofHarness& h) {
  CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.json().value("run_id", "");
}

TEST(VerifyCli, CleanStoreVerifiesAndEditedEventIsDetected) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string run = ProbeRun(h);
  ASSERT_FALSE(run.empty());
  CliResult ok = h.Cli({"verify"});
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_TRUE(ok.json()["ok"].get<bool>());

  // Edit one stored event behind the server's back.
  h.KillServer(SIGTERM);
  {
    auto store = store::EventStore::Open(h.DataDir() + "/store");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto evs = (*store)->ReadRun(run);
    ASSERT_TRUE(evs.ok());
    ASSERT_GE(evs->size(), 5u);
    proto::Event e = (*evs)[4];
    std::string payload = e.payload_json();
    auto pos = payload.find("2862");  // an HBM figure in the probe record
    ASSERT_NE(pos, std::string::npos) << payload;
    payload.replace(pos, 4, "1234");
    e.set_payload_json(payload);
    ASSERT_TRUE((*store)->RawOverwriteEventForTest(e).ok());
  }
  ASSERT_TRUE(h.RestartServer().ok());
  CliResult bad = h.Cli({"verify", run});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  const auto j = bad.json();
  ASSERT_TRUE(j.is_object()) << bad.out;
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_NE(j["runs"][0]["error"].get<std::string>().find("event #5"), std::string::npos) << j.dump();
}

// Stored events that do not match their message in proto/events.proto, each
// with a valid hash as a buggy writer or an edited store would leave them: a
// string where the attempt number belongs (the fold cannot read it) and a key
// the message does not declare (the fold tolerates it). The server still
// starts and serves, and `verify` reports Corruption naming the event and the
// key.
TEST(VerifyCli, AStoredEventThatDoesNotDecodeIsCorruptionAndTheServerGoesOn) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string wrong_type = ProbeRun(h), unknown_key = ProbeRun(h);
  ASSERT_FALSE(wrong_type.empty());
  ASSERT_FALSE(unknown_key.empty());
  h.KillServer(SIGTERM);
  // Edits the run's first TaskScheduled; returns its 0-based index.
  auto edit = [&](const std::string& run, const std::function<void(nlohmann::json&)>& change) -> size_t {
    auto store = store::EventStore::Open(h.DataDir() + "/store");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return 0;
    auto evs = (*store)->ReadRun(run);
    EXPECT_TRUE(evs.ok());
    size_t index = 0;
    for (; index < evs->size() && (*evs)[index].type() != "TaskScheduled"; ++index) {
    }
    EXPECT_LT(index, evs->size());
    if (index >= evs->size()) return 0;
    proto::Event e = (*evs)[index];
    auto p = nlohmann::json::parse(e.payload_json());
    change(p);
    e.set_payload_json(p.dump());
    e.set_hash(store::EventHash(e));
    EXPECT_TRUE((*store)->RawOverwriteEventForTest(e).ok());
    return index;
  };
  const size_t a = edit(wrong_type, [](nlohmann::json& p) { p["attempt"] = "one"; });
  const size_t b = edit(unknown_key, [](nlohmann::json& p) { p["atempt"] = 2; });
  ASSERT_TRUE(h.RestartServer().ok());
  for (const auto& [run, index, key] : {std::tuple{wrong_type, a, std::string("attempt")},
                                        std::tuple{unknown_key, b, std::string("atempt")}}) {
    CliResult bad = h.Cli({"verify", run});
    EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
    const auto j = bad.json();
    ASSERT_TRUE(j.is_object()) << bad.out;
    const std::string err = j["runs"][0].value("error", "");
    EXPECT_NE(err.find(fmt::format("event #{} (TaskScheduled)", index + 1)), std::string::npos) << err;
    EXPECT_NE(err.find("corruption: TaskScheduled payload does not match proto/events.proto"), std::string::npos)
        << err;
    EXPECT_NE(err.find(key), std::string::npos) << err;
  }
  // The run with the extra key is still served (the fold tolerates it).
  CliResult manifest = h.Cli({"manifest", unknown_key});
  EXPECT_EQ(manifest.exit_code, 0) << manifest.err;
  // The server is alive and serves other runs.
  const std::string other = ProbeRun(h);
  EXPECT_FALSE(other.empty());
  EXPECT_EQ(h.Cli({"verify", other}).exit_code, 0);
}

TEST(ImportCli, EventsExportRebuildsTheRunElsewhere) {
  NpuprofHarness a;
  ASSERT_TRUE(a.Start().ok());
  const std::string run = ProbeRun(a);
  CliResult events = a.Cli({"events", run, "--json"});
  ASSERT_EQ(events.exit_code, 0);
  const std::string file = a.Dir() + "/events.json";
  std::ofstream(file) << events.out;
  CliResult manifest_a = a.Cli({"manifest", run});

  NpuprofHarness b;
  ASSERT_TRUE(b.Start({}, 0).ok());
  CliResult imp = b.Cli({"import", file});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  CliResult verify = b.Cli({"verify", run});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
  CliResult manifest_b = b.Cli({"manifest", run});
  EXPECT_EQ(manifest_a.out, manifest_b.out);
  // Importing twice is refused.
  EXPECT_EQ(b.Cli({"import", file}).exit_code, 2);
}

// The events of a run as `events RUN --json` prints them, edited by change
// and then chained again as run `name` (seq, prev_hash, hash recomputed as
// the server computes them: anyone can, the chain is plain SHA-256),
// written to <name>.json.
std::string ForgedEventsFile(NpuprofHarness& h, const std::string& run, const std::string& name,
                             const std::function<void(nlohmann::json& events)>& change) {
  CliResult events = h.Cli({"events", run, "--json"});
  EXPECT_EQ(events.exit_code, 0) << events.err;
  nlohmann::json doc = events.json();
  doc["run_id"] = name;
  change(doc["events"]);
  std::string prev;
  for (size_t i = 0; i < doc["events"].size(); ++i) {
    nlohmann::json& e = doc["events"][i];
    proto::Event ev;
    ev.set_run_id(name);
    ev.set_seq(i + 1);
    ev.set_type(e.value("type", ""));
    ev.set_time_ms(e.value("time_ms", int64_t{0}));
    ev.set_payload_json(e.contains("payload") ? e["payload"].dump() : "{}");
    ev.set_cause(e.value("cause", ""));
    ev.set_prev_hash(prev);
    e["seq"] = i + 1;
    e["prev_hash"] = prev;
    e["hash"] = prev = store::EventHash(ev);
  }
  const std::string file = h.Dir() + "/" + name + ".json";
  std::ofstream(file) << doc.dump();
  return file;
}

size_t IndexOf(const nlohmann::json& events, const std::string& type) {
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].value("type", "") == type) return i;
  ADD_FAILURE() << "no " << type;
  return 0;
}

// Imports are judged like submissions. Each forged log below has a valid
// hash chain and replays without an illegal transition; each imported
// (and verified ok) before: an event type that is no event type (show then
// said completed with the task still pending), a 1 MB tag (submit allows
// 1-64 characters; every `runs` then moved it), and a log with the task's
// result left out (a task pending in a completed run).
TEST(ImportCli, ForgedLogsAreRefusedAsSubmissionsAre) {
  NpuprofHarness a;
  ASSERT_TRUE(a.Start().ok());
  const std::string run = ProbeRun(a);
  ASSERT_FALSE(run.empty());
  // The untouched log, chained again, still imports (the forger's tool is right).
  const std::string honest = ForgedEventsFile(a, run, "honest", [](nlohmann::json&) {});
  const std::string unknown_type = ForgedEventsFile(a, run, "unknown-type", [](nlohmann::json& evs) {
    evs[IndexOf(evs, "TaskSucceeded")]["type"] = "NoSuchEvent";
  });
  const std::string big_tag = ForgedEventsFile(a, run, "big-tag", [](nlohmann::json& evs) {
    const std::string tag(1 << 20, 't');
    evs[0]["payload"]["spec"]["tag"] = tag;
    evs[0]["payload"]["tag"] = tag;
  });
  const std::string pending = ForgedEventsFile(a, run, "pending", [](nlohmann::json& evs) {
    evs.erase(IndexOf(evs, "TaskSucceeded"));
  });

  NpuprofHarness b;
  ASSERT_TRUE(b.Start({}, 0).ok());
  for (const auto& [id, file, why] :
       {std::tuple{"unknown-type", unknown_type,
                   std::string("(NoSuchEvent): corruption: an event type npuprof does not know")},
        std::tuple{"big-tag", big_tag,
                   std::string("event #1 (RunSubmitted): its probe spec is not one `submit` accepts: tag '")},
        std::tuple{"pending", pending,
                   std::string("(RunFinished): the run finished while its task " + run +
                               ".t1 (probe.npu_smi) is still pending")}}) {
    SCOPED_TRACE(id);
    CliResult imp = b.Cli({"import", file});
    EXPECT_EQ(imp.exit_code, 2) << imp.out << imp.err.substr(0, 1000);
    EXPECT_NE(imp.err.find("refusing to import"), std::string::npos) << imp.err.substr(0, 1000);
    EXPECT_NE(imp.err.find(why), std::string::npos) << imp.err.substr(0, 1000);
    EXPECT_LT(imp.err.size(), 2000u) << "the refusal does not echo the megabyte";
    EXPECT_EQ(b.Cli({"show", id}).exit_code, 2) << "nothing was imported";
  }
  CliResult imp = b.Cli({"import", honest});
  EXPECT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_EQ(b.Cli({"verify", "honest"}).exit_code, 0);
}

// The import CLI read the file and sent it: sending dumps it, and nlohmann's
// dump recursed once per level (exit 139, no message, at 100,000 levels).
TEST(ImportCli, ADeeplyNestedFileIsRefusedNamingTheLimit) {
  NpuprofHarness b;
  ASSERT_TRUE(b.Start({}, 0).ok());
  const size_t depth = 100000;
  const std::string file = b.Dir() + "/deep.json";
  std::ofstream(file) << R"({"run_id":"r1","events":[{"seq":1,"type":"RunSubmitted","payload":{"x":)"
                      << std::string(depth, '[') << std::string(depth, ']') << "}}]}";
  CliResult imp = b.Cli({"import", file});
  EXPECT_EQ(imp.exit_code, 2) << imp.err.substr(0, 500);
  EXPECT_NE(imp.err.find("deep.json: nested deeper than 128 levels"), std::string::npos) << imp.err.substr(0, 500);
  EXPECT_EQ(b.Cli({"ping"}).exit_code, 0);
}

}  // namespace
}  // namespace npuprof::testing
