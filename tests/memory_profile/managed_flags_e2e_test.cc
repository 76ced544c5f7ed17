// What the run records is what ran, end to end from the `npuprof` command
// (`npuprof server` + local workers, loopback sshd, the simulated target):
// a flag npuprof manages given again after `--` is refused with exit 2,
// naming the flag and the option to use, and nothing is submitted; a run
// records the argv that ran as read back from the target's launch record
// and `npuprof verify` passes; a launch record edited so that it disagrees
// with the spec is run as it says, recorded as it ran, and reported by
// `npuprof verify`.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class ManagedFlagsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start({"--export-delay", "0.2"});
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  std::vector<std::string> Submit(const std::vector<std::string>& extra, const std::string& run_id = "") {
    std::vector<std::string> args = {"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "1",
                                     "--gpu-memory-utilization", "0.85", "--wait"};
    if (!run_id.empty()) args.insert(args.end(), {"--run-id", run_id});
    if (!extra.empty()) {
      args.push_back("--");
      args.insert(args.end(), extra.begin(), extra.end());
    }
    return args;
  }
  json Runs() { return h_.Cli({"runs", "--json"}).json().value("runs", json::array()); }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

TEST_F(ManagedFlagsE2E, AManagedFlagAfterTheDoubleDashIsRefusedAndNothingIsSubmitted) {
  struct Case {
    std::vector<std::string> extra;
    std::string flag, use;
  };
  for (const Case& c : std::vector<Case>{
           {{"--gpu-memory-utilization", "0.5"}, "--gpu-memory-utilization", "--gpu-memory-utilization"},
           {{"--gpu-memory-utilization=0.5"}, "--gpu-memory-utilization", "--gpu-memory-utilization"},
           {{"--max-model-len", "1024"}, "--max-model-len", "--max-model-len"},
           {{"--data-parallel-size-local", "1"}, "--data-parallel-size-local", "--dp-local"},
           {{"-tp", "2"}, "--tensor-parallel-size", "--tp"},
           {{"--enforce-eager", "-O3"}, "--enforce-eager", "--enforce-eager"}}) {
    CliResult r = h_.Cli(Submit(c.extra), 60);
    SCOPED_TRACE(c.extra[0]);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("extra_args: " + c.extra[0] + " sets vLLM's " + c.flag), std::string::npos) << r.err;
    if (!c.use.empty())
      EXPECT_NE(r.err.find("use `npuprof submit memory-profile " + c.use + "` instead"), std::string::npos) << r.err;
    else
      EXPECT_NE(r.err.find("npuprof sets it itself"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << "no run id was printed: " << r.out;
  }
  // A serve run and a sweep go through the same rule.
  CliResult serve = h_.Cli({"submit", "serve", "--machine", "sim1", "--model", model_, "--", "--host", "0.0.0.0"}, 60);
  EXPECT_EQ(serve.exit_code, 2) << serve.err;
  EXPECT_NE(serve.err.find("use `npuprof submit serve --host` instead"), std::string::npos) << serve.err;
  CliResult sweep = h_.Cli({"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model_,
                            "--grid", "gpu-memory-utilization=0.8,0.9", "--", "--max-model-len", "1024"},
                           60);
  EXPECT_EQ(sweep.exit_code, 2) << sweep.err;
  EXPECT_NE(sweep.err.find("extra_args: --max-model-len sets vLLM's --max-model-len"), std::string::npos) << sweep.err;
  CliResult grid = h_.Cli({"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model_,
                           "--grid", "tensor-parallel-size=1,2"},
                          60);
  EXPECT_EQ(grid.exit_code, 2) << grid.err;
  EXPECT_NE(grid.err.find("sweep that instead (--grid tp=V1,V2)"), std::string::npos) << grid.err;
  // Malformed device ids are refused at submit by the one device-id parser.
  CliResult devices = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2",
                              "--devices", "0,x"},
                             60);
  EXPECT_EQ(devices.exit_code, 2) << devices.err;
  EXPECT_NE(devices.err.find("devices '0,x' is not a list of device indices: 'x'"), std::string::npos) << devices.err;
  EXPECT_EQ(Runs(), json::array()) << "nothing was submitted";
}

TEST_F(ManagedFlagsE2E, TheArgvThatRanIsRecordedAndAnEditedLaunchRecordIsReportedByVerify) {
  // A run without extra args: its manifest records the argv that ran, as the
  // target's launch record holds it, and verify passes.
  CliResult a = h_.Cli(Submit({}, "argv-a"), 200);
  runs_.push_back("argv-a");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const json ma = a.json();
  ASSERT_TRUE(ma.is_object()) << a.out;
  EXPECT_EQ(ma["status"], "ok");
  const std::string record_a = ma.value("launch_record", "");
  ASSERT_FALSE(record_a.empty()) << ma.dump();
  const json launch_a = json::parse(ReadAll(record_a), nullptr, false);
  ASSERT_TRUE(launch_a.is_object()) << record_a;
  EXPECT_EQ(ma["serve_argv"], launch_a["argv"]) << "the manifest's argv is the launch record's";
  const std::vector<std::string> argv = ma["serve_argv"];
  const auto gmu = std::find(argv.begin(), argv.end(), "--gpu-memory-utilization");
  ASSERT_NE(gmu, argv.end());
  EXPECT_EQ(*(gmu + 1), "0.85");
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--gpu-memory-utilization"), 1);
  // _serve.sh runs exactly that argv.
  const std::string rt_a = fs::path(record_a).parent_path().string();
  EXPECT_NE(ReadAll(rt_a + "/_serve.sh").find("vllm serve"), std::string::npos);
  CliResult va = h_.Cli({"verify", "argv-a"});
  EXPECT_EQ(va.exit_code, 0) << va.out << va.err;

  // The next run's launch record, edited before its launch reads it: the
  // same record as a's, but running at 0.5.
  const std::string base = fs::path(rt_a).parent_path().parent_path().string();
  const std::string rt_b = base + "/argv-b/service-1";
  fs::create_directories(rt_b);
  fs::permissions(base + "/argv-b", fs::perms::owner_all);
  fs::permissions(rt_b, fs::perms::owner_all);
  json edited = launch_a;
  edited["run_id"] = "argv-b";
  edited["runtime_dir"] = rt_b;
  edited["service_marker"] = "NPUPROF_SERVICE=argv-b/service-1";
  edited["served_model_name"] = "npuprof-mem-argv-b";
  if (edited.contains("wrap_script")) edited["wrap_script"] = base + "/argv-b/msprof_wrap.sh";
  for (auto& t : edited["argv"]) {
    if (t == "npuprof-mem-argv-a") t = "npuprof-mem-argv-b";
  }
  for (size_t i = 0; i + 1 < edited["argv"].size(); ++i)
    if (edited["argv"][i] == "--gpu-memory-utilization") edited["argv"][i + 1] = "0.5";
  {
    std::ofstream out(rt_b + "/launch.json");
    out << edited.dump(2) << "\n";
  }
  fs::permissions(rt_b + "/launch.json", fs::perms::owner_read | fs::perms::owner_write);

  CliResult b = h_.Cli(Submit({}, "argv-b"), 200);
  runs_.push_back("argv-b");
  const json mb = h_.Cli({"manifest", "argv-b"}).json();
  ASSERT_TRUE(mb.is_object()) << b.out << b.err;
  // Recorded as it ran: the manifest's argv is the edited record's.
  EXPECT_EQ(mb["serve_argv"], edited["argv"]) << mb["serve_argv"].dump();
  EXPECT_EQ(mb["gpu_memory_utilization"], 0.85) << "the spec's value";
  CliResult vb = h_.Cli({"verify", "argv-b"});
  EXPECT_EQ(vb.exit_code, 1) << vb.out << vb.err;
  EXPECT_NE(vb.err.find("the service that ran disagrees with the run's spec"), std::string::npos) << vb.err;
  EXPECT_NE(vb.err.find(rt_b + "/launch.json): --gpu-memory-utilization: ran 0.5, the spec gives 0.85"),
            std::string::npos)
      << vb.err;
  // verify of every run names b and passes a.
  const json all = h_.Cli({"verify"}).json();
  ASSERT_TRUE(all.is_object());
  EXPECT_FALSE(all.value("ok", true));
  for (const auto& row : all["runs"]) {
    if (row["run_id"] == "argv-a") {
      EXPECT_TRUE(row.value("ok", false)) << row.dump();
    } else if (row["run_id"] == "argv-b") {
      EXPECT_FALSE(row.value("ok", true)) << row.dump();
    }
  }
  EXPECT_TRUE(all["lease_audit"].value("ok", false)) << all.dump();
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

}  // namespace
}  // namespace npuprof::testing
