// memory-profile --operator-memory, the pure side: the digest decoder
// (statemachine/operator_memory_digest.h) refuses malformed digests with an
// error naming the field and never throws; the report
// (operator_memory_report.h) puts each rank's peak operators, peak allocated /
// reserved and fragmentation on its device, says what is wrong for a broken
// rank and keeps the rest; the spec refuses the option where it cannot run,
// naming the field; the launch gets the profiler config.
#include <gtest/gtest.h>

#include <algorithm>

#include "statemachine/memory_profile_spec.h"
#include "statemachine/memory_report.h"
#include "statemachine/memory_report_text.h"
#include "statemachine/operator_memory_digest.h"
#include "statemachine/operator_memory_report.h"
#include "statemachine/kind_schemas.h"

namespace npuprof::sm {
namespace {

json GoodRank(int device) {
  return {{"dir", "/rt/npuprof_operator_memory/r" + std::to_string(device) + "_ascend_pt"},
          {"device_id", device},
          {"analyse_exit", 0},
          {"memory_record", {{"status", "ok"}, {"bytes", 1000}, {"rows", 20}, {"bad_rows", 0}}},
          {"operator_memory", {{"status", "ok"}, {"bytes", 900}, {"rows", 10}, {"bad_rows", 0}}},
          {"peak", {{"timestamp_us", 1.5e15}, {"allocated_mb", 30000.25}, {"reserved_mb", 30040.75}, {"row", 12}}},
          {"window", {{"first_us", 1.4e15}, {"last_us", 1.6e15}, {"max_reserved_mb", 30040.75}, {"pta_rows", 18}}},
          {"operators",
           {{{"name", "npu::attn"}, {"size_kb", 61440.0}, {"allocated_us", 1.5e15 - 2}, {"released_us", 1.5e15 + 1},
             {"row", 2}},
            {{"name", "aten::zeros"}, {"size_kb", 3072.0}, {"allocated_us", 1.4e15}, {"released_us", nullptr},
             {"row", 1}}}}};
}

std::string Digest(json ranks) { return json{{"v", 1}, {"ranks", std::move(ranks)}}.dump(); }

TEST(OperatorMemoryDigest, DecodesRanksAndAPendingAnswer) {
  auto o = ParseOperatorMemoryOutput(Digest(json::array({GoodRank(0)})));
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_EQ(o->ranks.size(), 1u);
  EXPECT_EQ(o->ranks[0].device_id, 0);
  ASSERT_EQ(o->ranks[0].operators.size(), 2u);
  EXPECT_FALSE(o->ranks[0].operators[1].released_us);
  EXPECT_DOUBLE_EQ(o->ranks[0].peak->reserved_mb, 30040.75);
  // What the worker answers decodes to the same.
  auto again = DecodeOperatorMemoryRanks(json::array({OperatorMemoryRankJson(o->ranks[0])}));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(OperatorMemoryRankJson((*again)[0]), OperatorMemoryRankJson(o->ranks[0]));

  auto p = ParseOperatorMemoryOutput(R"({"v":1,"pending":["/a_ascend_pt"]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->pending, std::vector<std::string>{"/a_ascend_pt"});
}

TEST(OperatorMemoryDigest, RefusesMalformedDigestsNamingTheField) {
  const auto refused = [](const std::string& text, const std::string& words) {
    auto o = ParseOperatorMemoryOutput(text);
    ASSERT_FALSE(o.ok()) << text;
    EXPECT_NE(o.status().message().find(words), std::string::npos) << o.status().message();
  };
  refused("", "not valid JSON");
  refused("garbage", "not valid JSON");
  refused("[1]", "not a JSON object");
  refused(R"({"v":2,"ranks":[]})", "version 1");
  refused(R"({"v":1})", "ranks: is missing");
  refused(R"({"v":1,"ranks":{}})", "ranks: is not a list");
  refused("{\"v\":1,\"ranks\":[\"\xff\"]}", "UTF-8");
  refused(std::string(kMaxOperatorDigestBytes + 1, ' '), "more than");
  refused(R"({"v":1,"pending":[3]})", "pending");
  const auto bad = [&](auto mutate, const std::string& words) {
    json r = GoodRank(0);
    mutate(r);
    refused(Digest(json::array({r})), words);
  };
  bad([](json& r) { r.erase("dir"); }, "ranks[0].dir: is missing");
  bad([](json& r) { r["dir"] = 5; }, "ranks[0].dir: is not a string");
  bad([](json& r) { r["device_id"] = -1; }, "ranks[0].device_id");
  bad([](json& r) { r["device_id"] = 1.5; }, "ranks[0].device_id: is not a whole number");
  bad([](json& r) { r["memory_record"]["status"] = "fine"; }, "ranks[0].memory_record.status");
  bad([](json& r) { r["operator_memory"]["rows"] = -3; }, "ranks[0].operator_memory.rows");
  bad([](json& r) { r.erase("operator_memory"); }, "ranks[0].operator_memory: is missing");
  bad([](json& r) { r["peak"]["allocated_mb"] = "x"; }, "ranks[0].peak.allocated_mb: is not a number");
  bad([](json& r) { r["peak"]["reserved_mb"] = -1; }, "ranks[0].peak.reserved_mb");
  bad([](json& r) { r["peak"]["row"] = 1e300; }, "ranks[0].peak.row");
  bad([](json& r) { r["window"] = 3; }, "ranks[0].window");
  bad([](json& r) { r["operators"] = "many"; }, "ranks[0].operators: is not a list");
  bad([](json& r) { r["operators"][0]["size_kb"] = 1e30; }, "ranks[0].operators[0].size_kb");
  bad([](json& r) { r["operators"][1]["name"] = std::string(5000, 'n'); }, "ranks[0].operators[1].name");
  bad([](json& r) { r["operators"][0]["released_us"] = "soon"; }, "ranks[0].operators[0].released_us");
  bad([](json& r) {
        for (int i = 0; i < 101; ++i) r["operators"].push_back(r["operators"][0]);
      },
      "more than 100");
  json deep = json::array();
  for (int i = 0; i < 20; ++i) deep = json::array({deep});
  refused(json{{"v", 1}, {"ranks", deep}}.dump(), "nested deeper");
}

json ReportWith(const json& record) {
  json ev = {{"mode", "standalone"}, {"tp", 2}, {"dp", 1}, {"devices", {0, 1}}};
  if (!record.is_null()) ev["operator_memory"] = record;
  return BuildMemoryReport(ev);
}

TEST(OperatorMemoryReport, PutsEachRanksPeakOnItsDevice) {
  json broken = GoodRank(1);
  broken["operator_memory"] = {{"status", "not_utf8"},
                               {"problem", "operator_memory.csv line 9 is not UTF-8 (byte 3)"},
                               {"bytes", 10},
                               {"rows", 7},
                               {"bad_rows", 0}};
  broken["operators"] = json::array();
  const json r = ReportWith({{"profile_root", "/rt/npuprof_operator_memory"},
                             {"ranks", {GoodRank(0), broken}},
                             {"blob", "abc"},
                             {"file", "operator_memory_digest.json"}});
  const json& d0 = r["devices"][0]["operator_memory"];
  EXPECT_EQ(d0["status"], "ok");
  EXPECT_EQ(d0["peak_allocated_mb"], 30000.25);
  EXPECT_EQ(d0["peak_reserved_mb"], 30040.75);
  EXPECT_EQ(d0["fragmentation_mb"], 40.5);
  ASSERT_EQ(d0["peak_operators"].size(), 2u);
  EXPECT_EQ(d0["peak_operators"][0]["name"], "npu::attn");
  EXPECT_EQ(d0["peak_operators"][0]["size_mb"], 60.0);
  EXPECT_EQ(d0["peak_operators"][0]["evidence"]["row"], 2);
  EXPECT_EQ(d0["peak_operators"][0]["evidence"]["file"], "operator_memory.csv");
  EXPECT_TRUE(d0["peak_operators"][1]["released_at_us"].is_null());
  EXPECT_EQ(d0["peak_evidence"]["row"], 12);
  const json& d1 = r["devices"][1]["operator_memory"];
  EXPECT_EQ(d1["status"], "partial");
  EXPECT_EQ(d1["fragmentation_mb"], 40.5) << "memory_record.csv still gives the peak";
  EXPECT_TRUE(d1["peak_operators"].empty());
  ASSERT_EQ(d1["problems"].size(), 1u);
  EXPECT_NE(d1["problems"][0].get<std::string>().find("not UTF-8"), std::string::npos);
  // The rest of the report stands.
  EXPECT_EQ(r["devices"].size(), 2u);
  EXPECT_FALSE(r["devices"][1]["components"].empty());
  for (const char* lang : {"en", "zh"}) {
    const std::string text = RenderMemoryReportText(r, lang);
    EXPECT_NE(text.find("npu::attn"), std::string::npos) << lang;
    EXPECT_NE(text.find("40.500 MB"), std::string::npos) << lang;
    EXPECT_NE(text.find("not UTF-8"), std::string::npos) << lang;
  }
}

TEST(OperatorMemoryReport, AnUnreadableRecordLeavesEveryDeviceUnavailableAndTheReportStands) {
  json bad = GoodRank(0);
  bad["peak"]["row"] = "twelve";
  const json r = ReportWith({{"ranks", {bad}}});
  for (const auto& d : r["devices"]) EXPECT_EQ(d["operator_memory"]["status"], "unavailable");
  bool noted = false;
  for (const auto& n : r["notes"]) noted = noted || n.get<std::string>().find("cannot be read") != std::string::npos;
  EXPECT_TRUE(noted);
  // A device without its rank: no_data. Without the option: nothing added.
  const json one = ReportWith({{"ranks", {GoodRank(0)}}});
  EXPECT_EQ(one["devices"][1]["operator_memory"]["status"], "no_data");
  EXPECT_FALSE(ReportWith(nullptr)["devices"][0].contains("operator_memory"));
}

json StandaloneSpec() {
  return {{"machine", "m1"},
          {"machine_record",
           {{"name", "m1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}, {"runtime_base", "/tmp/rt"},
            {"env_script", ""}}},
          {"model", "/models/x"},
          {"operator_memory", true}};
}

TEST(OperatorMemorySpec, IsStandaloneOneNodeAndAddsTheProfilerConfig) {
  json spec = StandaloneSpec();
  ASSERT_TRUE(ValidateMemorySpec(spec).ok()) << ValidateMemorySpec(spec).message();
  EXPECT_EQ(spec["operator_memory_top"], 10);
  auto typed = DecodeRunSpec("memory-profile", spec);
  ASSERT_TRUE(typed.ok() && *typed) << typed.status().message();
  const auto args = MemoryServeArgs(dynamic_cast<const run_specs::MemoryProfileSpec&>(**typed));
  const auto it = std::find(args.begin(), args.end(), "--profiler-config");
  ASSERT_NE(it, args.end());
  const json cfg = json::parse(*(it + 1));
  EXPECT_EQ(cfg["torch_profiler_with_memory"], true);
  EXPECT_EQ(cfg["torch_profiler_dir"], "./npuprof_operator_memory");

  json plain = StandaloneSpec();
  plain.erase("operator_memory");
  ASSERT_TRUE(ValidateMemorySpec(plain).ok());
  auto plain_typed = DecodeRunSpec("memory-profile", plain);
  ASSERT_TRUE(plain_typed.ok() && *plain_typed) << plain_typed.status().message();
  const auto none = MemoryServeArgs(dynamic_cast<const run_specs::MemoryProfileSpec&>(**plain_typed));
  EXPECT_EQ(std::find(none.begin(), none.end(), "--profiler-config"), none.end());

  json extra = StandaloneSpec();
  extra["extra_args"] = {"--profiler-config", "{}"};
  EXPECT_NE(ValidateMemorySpec(extra).message().find("operator_memory"), std::string::npos);
  json top = StandaloneSpec();
  top["operator_memory_top"] = 0;
  EXPECT_NE(ValidateMemorySpec(top).message().find("operator_memory_top"), std::string::npos);
  json wrapper = StandaloneSpec();
  wrapper["mode"] = "install_wrapper";
  EXPECT_NE(ValidateMemorySpec(wrapper).message().find("operator_memory: only a standalone"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::sm
