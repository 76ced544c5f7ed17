// The managed-flag table (statemachine/managed_flags.h): every spelling vLLM
// reads as a managed flag is refused in extra args, naming the flag and what
// to use instead; every flag the kinds put into the argv is in the table; an
// argv's managed values are read as vLLM reads them; grid keys follow the
// same rule.
#include <gtest/gtest.h>

#include "run_specs.pb.h"
#include "statemachine/managed_flags.h"
#include "statemachine/memory_profile_spec.h"
#include "statemachine/serve_argv.h"
#include "statemachine/torch_profile_spec.h"

namespace npuprof::sm {
namespace {

std::string Refusal(std::string_view kind, std::vector<std::string> args) {
  const Status st = CheckExtraArgs(kind, args);
  return st.ok() ? "" : st.message();
}

TEST(ManagedFlags, EverySpellingOfAManagedFlagIsRefusedNamingTheOptionToUse) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--gpu-memory-utilization", "0.5"},
           {"--gpu-memory-utilization=0.5"},
           {"--gpu_memory_utilization", "0.5"},
           {"--gpu-memory", "0.5"},  // argparse takes an unambiguous prefix
           {"--gpu-memory-util=0.5"}}) {
    const std::string why = Refusal("memory-profile", args);
    EXPECT_NE(why.find("extra_args: " + args[0] + " sets vLLM's --gpu-memory-utilization"), std::string::npos)
        << why;
    EXPECT_NE(why.find("use `npuprof submit memory-profile --gpu-memory-utilization` instead (spec field "
                       "gpu_memory_utilization)"),
              std::string::npos)
        << why;
  }
  EXPECT_NE(Refusal("memory-profile", {"--max-model-len", "1024"}).find("--max-model-len` instead"),
            std::string::npos);
  EXPECT_NE(Refusal("serve", {"-tp", "2"}).find("vLLM's --tensor-parallel-size"), std::string::npos);
  EXPECT_NE(Refusal("serve", {"-tp=2"}).find("submit serve --tp`"), std::string::npos);
  EXPECT_NE(Refusal("serve", {"-t", "2"}).find("--tensor-parallel-size"), std::string::npos) << "prefix of -tp";
  EXPECT_NE(Refusal("serve", {"-dp", "2"}).find("submit serve --dp`"), std::string::npos);
  EXPECT_NE(Refusal("serve", {"--host", "0.0.0.0"}).find("submit serve --host`"), std::string::npos);
  EXPECT_NE(Refusal("serve", {"--model=/m"}).find("submit serve --model`"), std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"-O3"}).find("vLLM's --compilation-config"), std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"-O", "3"}).find("--compilation-config"), std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"-O.level=3"}).find("--compilation-config"), std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"--compilation-config.cudagraph_mode", "FULL"}).find("--compilation-config"),
            std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"-qfp8"}).find("submit memory-profile --quantization`"), std::string::npos);
  EXPECT_NE(Refusal("memory-profile", {"--no-enforce-eager"}).find("--enforce-eager"), std::string::npos);
  EXPECT_NE(Refusal("torch-profile", {"--enforce-eager"}).find("submit torch-profile --mode`"), std::string::npos);
  EXPECT_NE(Refusal("torch-profile", {"--profiler-config", "{}"}).find("--torch-profiler-dir"), std::string::npos);
}

TEST(ManagedFlags, MultiNodeFormsAndConfigFilesAreSetByNpuprof) {
  for (const char* arg : {"--data-parallel-start-rank", "-dpr", "--headless", "--nnodes", "--node-rank"}) {
    const std::string why = Refusal("serve", {arg, "1"});
    EXPECT_NE(why.find("npuprof sets it itself"), std::string::npos) << arg << ": " << why;
    EXPECT_NE(why.find("--node MACHINE[:DEVICES]"), std::string::npos) << why;
  }
  // The deployment's own settings have submit options.
  for (const auto& [arg, option] : std::vector<std::pair<std::string, std::string>>{
           {"--data-parallel-size-local", "--dp-local"}, {"-dpl", "--dp-local"},
           {"--data-parallel-address", "--dp-address"}, {"-dpa", "--dp-address"},
           {"--data-parallel-rpc-port", "--dp-rpc-port"}, {"-dpp", "--dp-rpc-port"}}) {
    const std::string why = Refusal("serve", {arg, "1"});
    EXPECT_NE(why.find(option), std::string::npos) << arg << ": " << why;
  }
  EXPECT_NE(Refusal("memory-profile", {"--data-parallel-size-local", "1"}).find("vLLM's --data-parallel-size-local"),
            std::string::npos);
  // memory-profile spans nodes too: the same submit options.
  EXPECT_NE(Refusal("memory-profile", {"--data-parallel-rpc-port", "1"}).find("--dp-rpc-port"), std::string::npos);
  EXPECT_NE(Refusal("serve", {"--config", "x.yaml"}).find("config file may set any flag"), std::string::npos);
  EXPECT_NE(Refusal("torch-profile", {"--trust-remote-code"}).find("always given by npuprof"), std::string::npos);
}

TEST(ManagedFlags, WhatAKindDoesNotManageIsTheUsers) {
  // serve adds no arguments of its own: utilization and length are the user's.
  EXPECT_EQ(Refusal("serve", {"--gpu-memory-utilization", "0.5", "--max-model-len=4096", "--enforce-eager",
                              "-O3", "--trust-remote-code", "--max-num-seqs", "8"}),
            "");
  EXPECT_EQ(Refusal("memory-profile", {"--max-num-seqs", "8", "--block-size", "128", "--dtype", "bfloat16",
                                       "--kv-cache-dtype=fp8", "--seed", "-1", "--enable-prefix-caching"}),
            "");
  // A negative number is a value, not a flag; "--" and "-" are no flags.
  EXPECT_EQ(Refusal("serve", {"--seed", "-1", "--x", "-0.5", "--", "-"}), "");
  // Kinds that launch no service manage nothing.
  EXPECT_FALSE(FindManagedFlag("probe", "--port").has_value());
  EXPECT_TRUE(ManagedFlagNames("analyse-root").empty());
}

// The table covers everything the kinds put into the argv: every flag of
// the argv BuildServeArgv makes for a kind's fullest spec is managed by it.
TEST(ManagedFlags, EveryFlagTheKindsPutIntoTheArgvIsManaged) {
  run_specs::MemoryProfileSpec mem;
  mem.set_gpu_memory_utilization(0.9);
  mem.set_max_model_len(4096);
  mem.set_enable_expert_parallel(true);
  mem.set_enforce_eager(true);
  mem.set_speculative_config("{\"method\":\"mtp\"}");
  mem.set_compilation_config("{\"level\":3}");
  mem.set_additional_config("{\"a\":1}");
  mem.set_quantization("w8a8");
  run_specs::TorchProfileSpec torch;
  torch.set_mode("piecewise_graph");
  torch.set_api_server_count(2);
  torch.set_speculative_tokens(2);
  torch.set_speculative_method("mtp");
  torch.set_enable_expert_parallel(true);
  torch.set_torch_profiler_dir("vllm_profile");
  run_specs::TorchProfileSpec eager = torch;
  eager.set_mode("enforce_eager");
  const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
      {"serve", {}},
      {"memory-profile", MemoryServeArgs(mem)},
      {"torch-profile", TorchProfileServeArgs(torch)},
      {"torch-profile", TorchProfileServeArgs(eager)}};
  for (const auto& [kind, kind_args] : kinds) {
    ServeArgvFields f;
    f.model = "/models/m";
    f.served_model_name = "m";
    f.host = "0.0.0.0";
    f.port = 8000;
    f.tp = 2;
    f.dp = 2;
    f.extra_args = kind_args;
    const std::vector<std::string> argv = BuildServeArgv(f);
    for (size_t i = 2; i < argv.size(); ++i) {
      if (argv[i].rfind("--", 0) != 0) continue;
      EXPECT_TRUE(FindManagedFlag(kind, argv[i]).has_value()) << kind << " puts " << argv[i] << " into the argv";
    }
    const auto values = ManagedValues(kind, argv);
    EXPECT_EQ(values.at("--model"), std::vector<std::string>{"/models/m"}) << "the positional is the model";
    EXPECT_EQ(values.at("--host"), std::vector<std::string>{"0.0.0.0"});
    EXPECT_EQ(values.at("--data-parallel-size"), std::vector<std::string>{"2"});
  }
}

TEST(ManagedFlags, AnArgvIsReadAsVllmReadsItAndDifferencesNameTheFlag) {
  const std::vector<std::string> spec = {"vllm", "serve", "/m", "--host", "127.0.0.1", "--port", "9000",
                                         "--served-model-name", "a", "--tensor-parallel-size", "1",
                                         "--gpu-memory-utilization", "0.85", "--max-model-len", "2048",
                                         "--trust-remote-code", "--dtype", "auto"};
  EXPECT_TRUE(ManagedArgvDifferences("memory-profile", spec, spec).empty());
  std::vector<std::string> ran = spec;
  ran.insert(ran.end(), {"--gpu-memory-utilization=0.5", "-O3", "--no-trust-remote-code"});
  const auto values = ManagedValues("memory-profile", ran);
  EXPECT_EQ(values.at("--gpu-memory-utilization"), (std::vector<std::string>{"0.85", "0.5"}));
  EXPECT_EQ(values.at("--compilation-config"), std::vector<std::string>{"3"});
  EXPECT_EQ(values.at("--trust-remote-code"), (std::vector<std::string>{"true", "false"}));
  const auto diff = ManagedArgvDifferences("memory-profile", spec, ran);
  ASSERT_EQ(diff.size(), 3u);
  EXPECT_EQ(diff[0].text, "--gpu-memory-utilization: ran 0.85 then 0.5, the spec gives 0.85");
  EXPECT_EQ(diff[0].field, "gpu_memory_utilization");
  EXPECT_EQ(diff[1].text, "--trust-remote-code: ran true then false, the spec gives true");
  EXPECT_EQ(diff[2].text, "--compilation-config: ran 3, the spec gives nothing");
  // What the kind does not manage is not compared.
  EXPECT_TRUE(ManagedArgvDifferences("serve", spec, ran).empty());
}

TEST(ManagedFlags, GridKeysFollowTheSameRule) {
  EXPECT_TRUE(CheckGridKey("memory-profile", "gpu-memory-utilization").ok());
  EXPECT_TRUE(CheckGridKey("memory-profile", "max-tokens").ok()) << "not a vLLM flag";
  EXPECT_TRUE(CheckGridKey("torch-profile", "mode").ok()) << "an option, not an abbreviation of --model";
  const Status tp = CheckGridKey("memory-profile", "tensor-parallel-size");
  EXPECT_NE(tp.message().find("sweep that instead (--grid tp=V1,V2)"), std::string::npos) << tp.message();
  const Status eager = CheckGridKey("torch-profile", "enforce-eager");
  EXPECT_NE(eager.message().find("--grid mode=V1,V2"), std::string::npos) << eager.message();
  const Status local = CheckGridKey("memory-profile", "data-parallel-start-rank");
  EXPECT_NE(local.message().find("it cannot be swept"), std::string::npos) << local.message();
  EXPECT_EQ(ManagedFieldOfOption("memory-profile", "--gpu-memory-utilization"), "gpu_memory_utilization");
  EXPECT_EQ(ManagedFieldOfOption("torch-profile", "--mode"), "mode");
  EXPECT_FALSE(ManagedFieldOfOption("memory-profile", "--max-tokens").has_value());
}

}  // namespace
}  // namespace npuprof::sm
