// Pure tests of torch-profile's capture controls and budget preflight
// (statemachine/torch_profile_capture.h): the spec's capture fields, the
// --profiler-config they build, the estimate's rule, the reading of the
// check's output (garbage, oversized, non-UTF-8 -> a Status naming the
// field), the verdict, and a run driven through the engine: the check
// before the launch, a refusal that launches nothing.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/message_json.h"
#include "statemachine/torch_profile_analyse_limit.h"
#include "statemachine/torch_profile_capture.h"
#include "statemachine/torch_profile_machine.h"
#include "statemachine/torch_profile_spec.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {
namespace {

json Spec(json changes = json::object()) {
  json s = {{"machine", "m1"},
            {"machine_record", {{"name", "m1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"},
                                {"runtime_base", "/rt"}}},
            {"model", "/models/qwen"},
            {"served_model_name", "qwen"},
            {"tp", 2},
            {"tag", "case-1"},
            {"mode", "enforce_eager"},
            {"request_kind", "text"},
            {"benchmark_output_tokens", 8}};
  s.update(changes);
  return s;
}

std::string Validate(json spec) {
  Status s = ValidateTorchProfileSpec(spec);
  return s.ok() ? "" : s.message();
}

run_specs::TorchProfileSpec Typed(json spec) {
  EXPECT_TRUE(ValidateTorchProfileSpec(spec).ok());
  auto decoded = DecodeRunSpec("torch-profile", spec);
  EXPECT_TRUE(decoded.ok()) << decoded.status().message();
  run_specs::TorchProfileSpec out;
  if (decoded.ok() && *decoded) out.CopyFrom(**decoded);
  return out;
}

json ProfilerConfigOf(const run_specs::TorchProfileSpec& spec) {
  const auto a = TorchProfileServeArgs(spec);
  auto it = std::find(a.begin(), a.end(), "--profiler-config");
  return it == a.end() || it + 1 == a.end() ? json(nullptr) : json::parse(*(it + 1));
}

TEST(CaptureSpec, AbsentFieldsStayAbsentAndNullsAreRemoved) {
  json spec = Spec({{"profile_max_iterations", nullptr}});
  ASSERT_TRUE(ValidateTorchProfileSpec(spec).ok());
  for (const char* f : {"profile_delay_iterations", "profile_max_iterations", "torch_profiler_record_shapes",
                        "torch_profiler_with_memory", "data_simplification", "analyse_export_type", "budget_check"})
    EXPECT_FALSE(spec.contains(f)) << f;
  EXPECT_FALSE(CaptureCheckWanted(Typed(Spec())));
}

TEST(CaptureSpec, RefusalsNameTheFlag) {
  EXPECT_NE(Validate(Spec({{"profile_delay_iterations", -1}})).find("--profile-delay-iterations"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"profile_max_iterations", 0}})).find("--profile-max-iterations"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"profile_max_iterations", "5"}})).find("profile_max_iterations"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"torch_profiler_record_shapes", "yes"}})).find("--record-shapes"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"torch_profiler_with_memory", 1}})).find("--profile-memory"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"data_simplification", "no"}})).find("--data-simplification"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"analyse_export_type", "csv"}})).find("text or db"), std::string::npos);
  EXPECT_NE(Validate(Spec({{"budget_check", 2}})).find("--budget-check"), std::string::npos);
  EXPECT_EQ(Validate(Spec({{"profile_delay_iterations", 0}, {"profile_max_iterations", 10000000}})), "");
  EXPECT_EQ(Validate(Spec({{"analyse_export_type", "db"}})), "");
}

TEST(CaptureSpec, ProfilerConfigUnchangedWithoutFlagsAndCarriesThemWhenGiven) {
  EXPECT_EQ(ProfilerConfigOf(Typed(Spec())).dump(),
            R"({"profiler":"torch","torch_profiler_dir":"./vllm_profile","torch_profiler_with_stack":false})");
  const auto spec = Typed(Spec({{"profile_delay_iterations", 3},
                                {"profile_max_iterations", 7},
                                {"torch_profiler_record_shapes", true},
                                {"torch_profiler_with_memory", false},
                                {"data_simplification", true},
                                {"analyse_export_type", "db"},
                                {"torch_profiler_with_stack", true}}));
  const json cfg = ProfilerConfigOf(spec);
  EXPECT_EQ(cfg["delay_iterations"], 3);
  EXPECT_EQ(cfg["max_iterations"], 7);
  EXPECT_EQ(cfg["torch_profiler_record_shapes"], true);
  EXPECT_EQ(cfg["torch_profiler_with_memory"], false);
  EXPECT_EQ(cfg["torch_profiler_data_simplification"], true);
  EXPECT_EQ(cfg["torch_profiler_with_stack"], true);
  EXPECT_FALSE(cfg.contains("analyse_export_type")) << "export_type is analyse()'s, not the profiler's";
  EXPECT_TRUE(CaptureCheckWanted(spec));
  const auto needed = RequiredProfilerFields(spec);
  EXPECT_EQ(needed, (std::vector<std::string>{"torch_profiler_with_stack", "delay_iterations", "max_iterations",
                                              "torch_profiler_record_shapes", "torch_profiler_with_memory",
                                              "torch_profiler_data_simplification"}));
  const json rec = CaptureFlagsRecord(spec);
  EXPECT_EQ(rec["analyse_export_type"], "db");
  EXPECT_EQ(rec["profile_max_iterations"], 7);
  EXPECT_TRUE(rec["budget_check"].is_null());
}

TEST(CaptureSpec, BudgetCheckAloneAsksNoFieldsAndMultiNodeIsRefused) {
  const auto spec = Typed(Spec({{"budget_check", true}}));
  EXPECT_TRUE(CaptureCheckWanted(spec));
  EXPECT_TRUE(RequiredProfilerFields(spec).empty());
  EXPECT_FALSE(CaptureCheckWanted(Typed(Spec({{"budget_check", false}}))));
  json multi = Spec({{"torch_profiler_record_shapes", true}});
  multi["nodes"] = json::array({{{"machine", "a"}}, {{"machine", "b"}}});
  json copy = multi;
  Status st = CheckCaptureFields(copy);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("one-machine"), std::string::npos) << st.message();
}

TEST(CaptureEstimate, TheRuleAsDocumented) {
  // defaults: 10 requests, prompt 2000 over 1024-token batches (2 chunks),
  // batch min(5, 2) = 2 -> 5 rounds x 8 tokens, follow-up 5:
  // (10 + 1) x 2 + 5 x 8 + 5 = 67 steps.
  const auto spec = Typed(Spec());
  const CaptureEstimate e = EstimateCapture(spec, 10);
  EXPECT_EQ(e.steps, 67);
  EXPECT_EQ(e.layers, 10);
  EXPECT_FALSE(e.layers_assumed);
  EXPECT_EQ(e.ranks, 2);
  EXPECT_EQ(e.raw_bytes_per_rank, 67 * 10 * kCaptureBytesPerLayerStep);
  EXPECT_EQ(e.raw_bytes, 2 * e.raw_bytes_per_rank);
  EXPECT_EQ(e.disk_bytes, 20 * e.raw_bytes);
  EXPECT_EQ(e.memory_bytes, 20 * e.raw_bytes_per_rank);
  EXPECT_NE(e.rule.find("67 steps"), std::string::npos) << e.rule;

  const CaptureEstimate assumed = EstimateCapture(spec, std::nullopt);
  EXPECT_TRUE(assumed.layers_assumed);
  EXPECT_EQ(assumed.layers, kAssumedLayers);
  EXPECT_NE(assumed.rule.find("assumed"), std::string::npos);

  // The window: 67 - 60 = 7 steps, at most 5; the factors multiply.
  const auto narrow = Typed(Spec({{"profile_delay_iterations", 60}, {"profile_max_iterations", 5},
                                  {"torch_profiler_with_stack", true}, {"torch_profiler_record_shapes", true},
                                  {"torch_profiler_with_memory", true}, {"data_simplification", false}}));
  const CaptureEstimate n = EstimateCapture(narrow, 10);
  EXPECT_EQ(n.steps, 5);
  EXPECT_EQ(n.raw_bytes_per_rank, static_cast<int64_t>(5 * 10 * kCaptureBytesPerLayerStep * 3 * 1.5 * 2));
  EXPECT_EQ(n.disk_bytes, static_cast<int64_t>(n.raw_bytes * 20 * 1.5));
  EXPECT_NE(n.rule.find("of 67 in the workload"), std::string::npos) << n.rule;
  EXPECT_EQ(EstimateCapture(Typed(Spec({{"profile_delay_iterations", 1000}})), 10).steps, 0);
}

TEST(CaptureProbe, ReadsEveryLine) {
  auto p = ParseCaptureProbe(
      "probe_dir /data/rt\nmem_available_kb 2048\ndisk_free_kb 1024\nINFO noise from vllm\nlayers 36\n"
      "profiler_fields [\"profiler\",\"max_iterations\"]\n",
      true);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->probe_dir, "/data/rt");
  EXPECT_EQ(p->mem_available_bytes, 2048 * 1024);
  EXPECT_EQ(p->disk_free_bytes, 1024 * 1024);
  EXPECT_EQ(p->layers, 36);
  EXPECT_TRUE(p->fields_read);
  EXPECT_EQ(p->profiler_fields, (std::vector<std::string>{"profiler", "max_iterations"}));
}

TEST(CaptureProbe, UnreadValuesAndErrorsAreKeptNotGuessed) {
  auto p = ParseCaptureProbe("probe_dir /\nmem_available_kb \ndisk_free_kb x\nlayers -3\n"
                             "profiler_fields_error ModuleNotFoundError: No module named 'vllm.config'\n",
                             true);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->mem_available_bytes);
  EXPECT_FALSE(p->disk_free_bytes);
  EXPECT_FALSE(p->layers);
  EXPECT_FALSE(p->fields_read);
  EXPECT_NE(p->fields_error.find("vllm.config"), std::string::npos);
  auto none = ParseCaptureProbe("", true);
  ASSERT_TRUE(none.ok());
  EXPECT_NE(none->fields_error.find("no profiler_fields"), std::string::npos);
  auto unasked = ParseCaptureProbe("profiler_fields garbage\n", false);
  ASSERT_TRUE(unasked.ok()) << "a line not asked for is passed over";
  EXPECT_FALSE(unasked->fields_read);
}

TEST(CaptureProbe, GarbageOversizedAndNonUtf8AreRefusedNamingTheField) {
  auto garbage = ParseCaptureProbe("profiler_fields {not json\n", true);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("profiler_fields"), std::string::npos);
  auto bad_name = ParseCaptureProbe("profiler_fields [\"ok\", \"rm -rf /\"]\n", true);
  ASSERT_FALSE(bad_name.ok());
  EXPECT_NE(bad_name.status().message().find("profiler_fields"), std::string::npos);
  auto not_strings = ParseCaptureProbe("profiler_fields [1, 2]\n", true);
  EXPECT_FALSE(not_strings.ok());
  auto big = ParseCaptureProbe(std::string(kMaxCaptureProbeBytes + 1, 'a'), true);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over the"), std::string::npos);
  auto binary = ParseCaptureProbe("layers 3\n\xff\xfe\x80\n", true);
  ASSERT_FALSE(binary.ok());
  EXPECT_NE(binary.status().message().find("UTF-8"), std::string::npos);
  auto cut = ParseCaptureProbe("probe_dir /x\xe2\x82", true);
  EXPECT_FALSE(cut.ok()) << "a sequence cut at the end is not UTF-8";
  EXPECT_TRUE(ParseCaptureProbe("probe_dir /d\xc3\xa9j\xc3\xa0\n", false).ok());
}

results::TorchProfileCaptureCheckResult Checked(std::vector<std::string> fields, std::optional<int64_t> disk,
                                                std::optional<int64_t> mem, bool read = true) {
  results::TorchProfileCaptureCheckResult r;
  r.set_probe_dir("/rt");
  r.set_fields_read(read);
  for (const auto& f : fields) r.add_profiler_fields(f);
  if (!read) r.set_fields_error("ModuleNotFoundError: No module named 'vllm.config'");
  if (disk) r.set_disk_free_bytes(*disk);
  if (mem) r.set_mem_available_bytes(*mem);
  r.set_layers(10);
  return r;
}

TEST(CaptureVerdict, MissingFieldNamesTheFlagAndTheField) {
  const auto spec = Typed(Spec({{"profile_max_iterations", 5}, {"torch_profiler_record_shapes", true}}));
  const auto v = JudgeCapture(spec, Checked({"profiler", "torch_profiler_dir", "torch_profiler_record_shapes"},
                                            int64_t{1} << 40, int64_t{1} << 40));
  EXPECT_EQ(v.error_kind, "capture_unsupported");
  EXPECT_NE(v.error.find("--profile-max-iterations"), std::string::npos) << v.error;
  EXPECT_NE(v.error.find("max_iterations"), std::string::npos) << v.error;
  EXPECT_EQ(v.error.find("--record-shapes"), std::string::npos) << "that one is supported: " << v.error;
  EXPECT_NE(v.error.find("nothing was launched"), std::string::npos);
  EXPECT_EQ(v.record["profiler_fields_missing"], json::array({"max_iterations"}));
  EXPECT_FALSE(v.record["ok"].get<bool>());

  const auto unread = JudgeCapture(spec, Checked({}, int64_t{1} << 40, int64_t{1} << 40, false));
  EXPECT_EQ(unread.error_kind, "capture_unsupported");
  EXPECT_NE(unread.error.find("vllm.config"), std::string::npos) << unread.error;
}

TEST(CaptureVerdict, BudgetNamesBothNumbersDiskFirst) {
  const auto spec = Typed(Spec({{"budget_check", true}}));
  const CaptureEstimate e = EstimateCapture(spec, 10);
  const auto disk = JudgeCapture(spec, Checked({}, e.disk_bytes - 1, int64_t{1} << 40));
  EXPECT_EQ(disk.error_kind, "capture_budget");
  EXPECT_NE(disk.error.find("capture estimate " + BytesText(e.disk_bytes)), std::string::npos) << disk.error;
  EXPECT_NE(disk.error.find("free disk " + BytesText(e.disk_bytes - 1) + " under /rt"), std::string::npos)
      << disk.error;
  const auto mem = JudgeCapture(spec, Checked({}, e.disk_bytes, e.memory_bytes - 1));
  EXPECT_EQ(mem.error_kind, "capture_budget");
  EXPECT_NE(mem.error.find(BytesText(e.memory_bytes)), std::string::npos) << mem.error;
  const auto fits = JudgeCapture(spec, Checked({}, e.disk_bytes, e.memory_bytes));
  EXPECT_EQ(fits.error_kind, "");
  EXPECT_TRUE(fits.record["ok"].get<bool>());
  EXPECT_EQ(fits.record["disk_bytes"], e.disk_bytes);
  const auto unread = JudgeCapture(spec, Checked({}, std::nullopt, std::nullopt));
  EXPECT_EQ(unread.error_kind, "") << "an unread value refuses nothing";
  EXPECT_TRUE(unread.record["disk_free_bytes"].is_null());
}

TEST(CaptureVerdict, OutgrewNote) {
  EXPECT_EQ(CaptureOutgrewEstimate(100, 100), "");
  EXPECT_NE(CaptureOutgrewEstimate(100, 101).find("outgrew its estimate"), std::string::npos);
}

// A run driven through the engine up to and past the capture check.
class CaptureRun {
 public:
  std::string Submit(json spec) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = "torch-profile";
    in.spec = std::move(spec);
    std::string err = Feed(in);
    while (err.empty())
      if (auto lease = npuprof::sm::testing::NextLeaseInput(s_)) err = Feed(*lease);
      else break;
    return err;
  }
  const TaskInfo* Pending(const std::string& kind) const {
    for (const auto& [id, t] : s_.tasks)
      if (t.kind == kind && t.in_flight()) return &t;
    return nullptr;
  }
  std::string Result(const std::string& kind, json result, bool ok = true) {
    const TaskInfo* t = Pending(kind);
    if (!t) return "no pending " + kind;
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = ok;
    in.result = std::move(result);
    in.error_kind = ok ? "" : "unreachable";
    in.error = ok ? "" : "ssh: unreachable";
    return Feed(in);
  }
  int Count(const std::string& kind) const {
    int n = 0;
    for (const auto& [id, t] : s_.tasks) n += t.kind == kind;
    return n;
  }
  const RunState& state() const { return s_; }

 private:
  std::string Feed(Input in) {
    in.now_ms = now_ += 1000;
    auto evs = Decide(DefaultKinds(), s_, in);
    if (!evs.ok()) return evs.status().message();
    for (const auto& e : *evs) Apply(DefaultKinds(), s_, e.type, e.payload, s_.last_seq + 1, in.now_ms);
    return "";
  }
  RunState s_ = [] {
    RunState s;
    s.run_id = "r1";
    return s;
  }();
  int64_t now_ = 1700000000000;
};

json CheckResult(json fields, int64_t disk) {
  return {{"probe_dir", "/rt"}, {"fields_read", true}, {"profiler_fields", std::move(fields)},
          {"disk_free_bytes", disk}, {"mem_available_bytes", int64_t{1} << 40}, {"layers", 10}};
}

TEST(CaptureFlow, NoFlagNoCheck) {
  CaptureRun r;
  ASSERT_EQ(r.Submit(Spec()), "");
  EXPECT_EQ(r.state().state, "launching");
  EXPECT_EQ(r.Count(kTpCaptureCheckTask), 0);
}

TEST(CaptureFlow, CheckedThenLaunchedWithTheFlags) {
  CaptureRun r;
  ASSERT_EQ(r.Submit(Spec({{"profile_max_iterations", 4}, {"analyse_export_type", "db"}})), "");
  ASSERT_EQ(r.state().state, "capture_check");
  const TaskInfo* check = r.Pending(kTpCaptureCheckTask);
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check->payload["runtime_dir"], "/rt/r1/service-1");
  EXPECT_EQ(check->payload["model"], "/models/qwen");
  EXPECT_EQ(check->payload["profiler_fields"], true);
  EXPECT_EQ(r.Count(kServiceLaunchTask), 0);
  ASSERT_EQ(r.Result(kTpCaptureCheckTask, CheckResult({"max_iterations", "torch_profiler_dir"}, int64_t{1} << 40)), "");
  EXPECT_EQ(r.state().state, "launching");
  EXPECT_TRUE(r.state().data["capture_check"]["ok"].get<bool>());
  const TaskInfo* launch = r.Pending(kServiceLaunchTask);
  ASSERT_NE(launch, nullptr);
  const json args = launch->payload["extra_args"];
  auto it = std::find(args.begin(), args.end(), "--profiler-config");
  ASSERT_NE(it, args.end());
  EXPECT_EQ(json::parse((it + 1)->get<std::string>())["max_iterations"], 4);
  const json m = DefaultKinds().Find("torch-profile")->Manifest(r.state());
  EXPECT_EQ(m["capture_flags"]["profile_max_iterations"], 4);
  EXPECT_EQ(m["capture_flags"]["analyse_export_type"], "db");
  EXPECT_TRUE(m["capture_check"]["ok"].get<bool>());
}

TEST(CaptureFlow, UnsupportedFlagFailsBeforeTheLaunch) {
  CaptureRun r;
  ASSERT_EQ(r.Submit(Spec({{"profile_delay_iterations", 2}})), "");
  ASSERT_EQ(r.Result(kTpCaptureCheckTask, CheckResult({"profiler", "torch_profiler_dir"}, int64_t{1} << 40)), "");
  EXPECT_TRUE(r.state().terminal);
  EXPECT_EQ(r.state().status, RunStatus::kFailed);
  EXPECT_EQ(r.Count(kServiceLaunchTask), 0);
  EXPECT_NE(r.state().error.find("capture_check: capture_unsupported"), std::string::npos) << r.state().error;
  EXPECT_NE(r.state().error.find("--profile-delay-iterations"), std::string::npos) << r.state().error;
}

TEST(CaptureFlow, ShortDiskFailsBeforeTheLaunchNamingBothNumbers) {
  CaptureRun r;
  ASSERT_EQ(r.Submit(Spec({{"budget_check", true}})), "");
  EXPECT_EQ(r.Pending(kTpCaptureCheckTask)->payload["profiler_fields"], false);
  ASSERT_EQ(r.Result(kTpCaptureCheckTask, CheckResult(json::array(), 1 << 20)), "");
  EXPECT_EQ(r.state().status, RunStatus::kFailed);
  EXPECT_EQ(r.Count(kServiceLaunchTask), 0);
  EXPECT_NE(r.state().error.find("exceeds free disk 1.0 MiB under /rt"), std::string::npos) << r.state().error;
  const json summary = DefaultKinds().Find("torch-profile")->Summary(r.state());
  EXPECT_EQ(summary["capture_check"]["error_kind"], "capture_budget");
}

TEST(CaptureFlow, AFailedCheckLaunchesNothing) {
  CaptureRun r;
  ASSERT_EQ(r.Submit(Spec({{"budget_check", true}})), "");
  for (int i = 0; i < 5 && r.Pending(kTpCaptureCheckTask); ++i)
    ASSERT_EQ(r.Result(kTpCaptureCheckTask, json::object(), false), "");
  EXPECT_TRUE(r.state().terminal);
  EXPECT_EQ(r.state().status, RunStatus::kFailed);
  EXPECT_EQ(r.Count(kServiceLaunchTask), 0);
  EXPECT_NE(r.state().error.find("nothing was launched"), std::string::npos) << r.state().error;
}

}  // namespace
}  // namespace npuprof::sm
