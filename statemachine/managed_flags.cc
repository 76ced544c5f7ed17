#include "statemachine/managed_flags.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace npuprof::sm {

namespace {

// One kind's view of a flag. kind "" = every service kind.
struct Use {
  std::string_view kind;
  std::string_view option;
  std::string_view field;
  std::string_view how;
};

struct Row {
  std::string_view flag;
  std::vector<std::string_view> aliases;  // vLLM's short spellings ("-tp"); a one-letter one takes an attached value
  bool boolean = false;
  bool many = false;  // takes one or more values (nargs="+")
  std::vector<Use> uses;
};

constexpr std::string_view kServe = "serve", kTorch = "torch-profile", kMemory = "memory-profile";

constexpr std::string_view kPerNode =
    "set for each node of a multi-node deployment from the order of --node MACHINE[:DEVICES] (the first is the "
    "head); multi-node serving cannot be set up through extra arguments";
constexpr std::string_view kAlwaysTrusted = "always given by npuprof for this kind";

const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
      // The service itself (statemachine/serve_argv.h), every service kind.
      {"--model", {}, false, false, {{"", "--model", "model", ""}}},
      {"--served-model-name", {}, false, true, {{"", "--served-model-name", "served_model_name", ""}}},
      {"--host", {}, false, false, {{"", "--host", "host", ""}}},
      {"--port", {}, false, false, {{"", "--port", "port", ""}}},
      {"--tensor-parallel-size", {"-tp"}, false, false, {{"", "--tp", "tp", ""}}},
      {"--data-parallel-size", {"-dp"}, false, false, {{"", "--dp", "dp", ""}}},
      {"--data-parallel-size-local",
       {"-dpl"},
       false,
       false,
       {{"", "--dp-local", "dp_local", ""}}},
      {"--data-parallel-address",
       {"-dpa"},
       false,
       false,
       {{"", "--dp-address", "dp_address", ""}}},
      {"--data-parallel-rpc-port",
       {"-dpp"},
       false,
       false,
       {{"", "--dp-rpc-port", "dp_rpc_port", ""}}},
      {"--data-parallel-start-rank", {"-dpr"}, false, false, {{"", "", "", kPerNode}}},
      {"--data-parallel-rank", {"-dpn"}, false, false, {{"", "", "", kPerNode}}},
      {"--headless", {}, true, false, {{"", "", "", kPerNode}}},
      {"--nnodes", {"-n"}, false, false, {{"", "", "", kPerNode}}},
      {"--node-rank", {"-r"}, false, false, {{"", "", "", kPerNode}}},
      {"--config",
       {},
       false,
       false,
       {{"", "", "",
         "a config file may set any flag, the managed ones included, where the run's record cannot see it; give "
         "its other settings as extra arguments"}}},
      // What torch-profile (TorchProfileServeArgs) and memory-profile (MemoryServeArgs) add.
      {"--gpu-memory-utilization",
       {},
       false,
       false,
       {{kTorch, "--gpu-memory-utilization", "gpu_memory_utilization", ""},
        {kMemory, "--gpu-memory-utilization", "gpu_memory_utilization", ""}}},
      {"--max-model-len",
       {},
       false,
       false,
       {{kTorch, "--max-model-len", "max_model_len", ""}, {kMemory, "--max-model-len", "max_model_len", ""}}},
      {"--trust-remote-code", {}, true, false, {{kTorch, "", "", kAlwaysTrusted}, {kMemory, "", "", kAlwaysTrusted}}},
      {"--enable-expert-parallel",
       {"-ep"},
       true,
       false,
       {{kTorch, "--enable-expert-parallel", "enable_expert_parallel", ""},
        {kMemory, "--enable-expert-parallel", "enable_expert_parallel", ""}}},
      {"--enforce-eager",
       {},
       true,
       false,
       {{kTorch, "--mode", "mode", ""}, {kMemory, "--enforce-eager", "enforce_eager", ""}}},
      {"--compilation-config",
       {"-O"},
       false,
       false,
       {{kTorch, "--mode", "mode", ""}, {kMemory, "--compilation-config", "compilation_config", ""}}},
      {"--optimization-level",
       {},
       false,
       false,
       {{kTorch, "--mode", "mode", ""}, {kMemory, "--compilation-config", "compilation_config", ""}}},
      {"--speculative-config",
       {},
       false,
       false,
       {{kTorch, "--speculative-tokens", "speculative_tokens", ""},
        {kMemory, "--speculative-config", "speculative_config", ""}}},
      {"--additional-config", {}, false, false, {{kMemory, "--additional-config", "additional_config", ""}}},
      {"--quantization", {"-q"}, false, false, {{kMemory, "--quantization", "quantization", ""}}},
      // vLLM's kv_cache_memory_bytes; its own log suggests the prefix `--kv-cache-memory=N`.
      {"--kv-cache-memory-bytes", {}, false, false, {{kMemory, "--kv-cache-memory", "kv_cache_memory", ""}}},
      {"--profiler-config", {}, false, false, {{kTorch, "--torch-profiler-dir", "torch_profiler_dir", ""}}},
      {"--max-num-seqs", {}, false, false, {{kTorch, "--max-num-seqs", "max_num_seqs", ""}}},
      {"--max-num-batched-tokens", {}, false, false, {{kTorch, "--max-num-batched-tokens", "max_num_batched_tokens", ""}}},
      {"--api-server-count", {"-asc"}, false, false, {{kTorch, "--api-server-count", "api_server_count", ""}}},
  };
  return rows;
}

bool IsServiceKind(std::string_view kind) { return kind == kServe || kind == kTorch || kind == kMemory; }

// The row's use for kind, or nullptr when the kind does not manage the flag.
const Use* UseFor(const Row& row, std::string_view kind) {
  if (!IsServiceKind(kind)) return nullptr;
  for (const Use& u : row.uses)
    if (u.kind.empty() || u.kind == kind) return &u;
  return nullptr;
}

ManagedFlag Describe(const Row& row, const Use& use) {
  return {std::string(row.flag), row.boolean, std::string(use.option), std::string(use.field), std::string(use.how)};
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// "-1", "-0.5", "-.5": a value, as argparse reads it.
bool LooksNegativeNumber(std::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

// How one argument spells a flag.
struct Spelled {
  const Row* row = nullptr;
  const Use* use = nullptr;
  bool negated = false;           // --no-FLAG
  std::string json_path;          // ".level" of --compilation-config.level
  std::optional<std::string> value;  // given in the argument itself (=V, or attached to a one-letter alias)
};

// The long name an argument gives: before '=', before the first '.', '_' read as '-'.
void SplitLong(std::string_view arg, std::string& name, std::string& path, std::optional<std::string>& value) {
  const size_t eq = arg.find('=');
  std::string_view key = arg.substr(0, eq);
  if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
  const size_t dot = key.find('.');
  if (dot != std::string_view::npos) {
    path = std::string(key.substr(dot));
    key = key.substr(0, dot);
  }
  name = std::string(key);
  std::replace(name.begin() + 2, name.end(), '_', '-');
}

std::optional<Spelled> Spell(std::string_view kind, std::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--" || LooksNegativeNumber(arg)) return std::nullopt;
  if (StartsWith(arg, "--")) {
    std::string name, path;
    std::optional<std::string> value;
    SplitLong(arg, name, path, value);
    if (name.size() <= 2) return std::nullopt;
    // Exact spellings first: an exact flag is never read as another's prefix.
    for (int exact = 1; exact >= 0; --exact)
      for (const Row& row : Rows()) {
        const Use* use = UseFor(row, kind);
        if (!use) continue;
        std::vector<std::pair<std::string, bool>> spellings = {{std::string(row.flag), false}};
        if (row.boolean) spellings.emplace_back("--no-" + std::string(row.flag.substr(2)), true);
        for (const auto& [spelling, negated] : spellings) {
          const bool hit = exact ? name == spelling : spelling.size() > name.size() && StartsWith(spelling, name);
          if (hit) return Spelled{&row, use, negated, path, value};
        }
      }
    return std::nullopt;
  }
  const size_t eq = arg.find('=');
  const std::string_view name = arg.substr(0, eq);
  std::optional<std::string> value;
  if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
  for (int exact = 1; exact >= 0; --exact)
    for (const Row& row : Rows()) {
      const Use* use = UseFor(row, kind);
      if (!use) continue;
      for (std::string_view alias : row.aliases) {
        if (alias.size() == 2) {  // -O3, -qfp8, -O.level=3: argparse attaches the value to a one-letter alias
          if (!exact || !StartsWith(arg, alias)) continue;
          Spelled s{&row, use, false, "", std::nullopt};
          std::string_view rest = arg.substr(2);
          if (!rest.empty() && rest[0] == '.') {
            const size_t e = rest.find('=');
            s.json_path = std::string(rest.substr(0, e));
            if (e != std::string_view::npos) s.value = std::string(rest.substr(e + 1));
          } else if (!rest.empty()) {
            s.value = std::string(rest[0] == '=' ? rest.substr(1) : rest);
          }
          return s;
        }
        const bool hit = exact ? name == alias : alias.size() > name.size() && name.size() >= 2 && StartsWith(alias, name);
        if (hit) return Spelled{&row, use, false, "", value};
      }
    }
  return std::nullopt;
}

std::string UseInstead(std::string_view kind, const ManagedFlag& f) {
  if (!f.option.empty())
    return fmt::format("use `npuprof submit {} {}` instead (spec field {})", kind, f.option, f.field);
  return fmt::format("npuprof sets it itself ({})", f.how);
}

std::string Join(const std::vector<std::string>& values) {
  if (values.empty()) return "nothing";
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i == 0 ? "" : " then ") + values[i];
  return out;
}

}  // namespace

std::optional<ManagedFlag> FindManagedFlag(std::string_view kind, std::string_view arg) {
  auto s = Spell(kind, arg);
  if (!s) return std::nullopt;
  return Describe(*s->row, *s->use);
}

Status CheckExtraArgs(std::string_view kind, const std::vector<std::string>& extra_args) {
  for (const std::string& arg : extra_args) {
    auto f = FindManagedFlag(kind, arg);
    if (!f) continue;
    return Status::Invalid(fmt::format(
        "extra_args: {} sets vLLM's {}, which npuprof manages and records for a {} run: {}; extra arguments never "
        "override what the run records",
        arg, f->flag, kind, UseInstead(kind, *f)));
  }
  return Status::Ok();
}

std::map<std::string, std::vector<std::string>> ManagedValues(std::string_view kind,
                                                              const std::vector<std::string>& argv) {
  std::map<std::string, std::vector<std::string>> out;
  size_t i = 0;
  if (argv.size() >= 2 && argv[0] == "vllm" && argv[1] == "serve") {
    i = 2;
    if (i < argv.size() && (argv[i].empty() || argv[i][0] != '-')) {
      if (FindManagedFlag(kind, "--model")) out["--model"].push_back(argv[i]);
      ++i;
    }
  }
  for (; i < argv.size(); ++i) {
    auto s = Spell(kind, argv[i]);
    if (!s) continue;
    std::string value;
    if (s->value) {
      value = *s->value;
    } else if (s->row->boolean && s->json_path.empty()) {
      value = s->negated ? "false" : "true";
    } else if (s->row->many) {
      std::vector<std::string> words;
      while (i + 1 < argv.size() && !(argv[i + 1].size() > 1 && argv[i + 1][0] == '-')) words.push_back(argv[++i]);
      for (size_t w = 0; w < words.size(); ++w) value += (w == 0 ? "" : " ") + words[w];
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    }
    if (!s->json_path.empty()) value = s->json_path + "=" + value;
    out[std::string(s->row->flag)].push_back(std::move(value));
  }
  return out;
}

std::vector<ManagedDifference> ManagedArgvDifferences(std::string_view kind, const std::vector<std::string>& expected,
                                                      const std::vector<std::string>& ran) {
  const auto want = ManagedValues(kind, expected);
  const auto got = ManagedValues(kind, ran);
  const std::vector<std::string> none;
  std::vector<ManagedDifference> out;
  for (const Row& row : Rows()) {
    const Use* use = UseFor(row, kind);
    if (!use) continue;
    const std::string flag(row.flag);
    const auto w = want.find(flag);
    const auto g = got.find(flag);
    const auto& wv = w == want.end() ? none : w->second;
    const auto& gv = g == got.end() ? none : g->second;
    if (wv == gv) continue;
    out.push_back({flag, std::string(use->field), fmt::format("{}: ran {}, the spec gives {}", flag, Join(gv), Join(wv))});
  }
  return out;
}

Status CheckGridKey(std::string_view kind, std::string_view key) {
  std::string name = "--" + std::string(key);
  std::replace(name.begin() + 2, name.end(), '_', '-');
  for (const Row& row : Rows()) {
    const Use* use = UseFor(row, kind);
    if (!use) continue;
    const bool spelled = name == row.flag || std::find(row.aliases.begin(), row.aliases.end(), key) != row.aliases.end() ||
                         (row.boolean && name == "--no-" + std::string(row.flag.substr(2)));
    if (!spelled || use->option == name) continue;
    if (use->option.empty())
      return Status::Invalid(fmt::format("--grid {}: vLLM's {} is set by npuprof for a {} run ({}); it cannot be "
                                         "swept",
                                         key, row.flag, kind, use->how));
    return Status::Invalid(fmt::format("--grid {}: vLLM's {} is set by npuprof from {} for a {} run: sweep that "
                                       "instead (--grid {}=V1,V2)",
                                       key, row.flag, use->option, kind, use->option.substr(2)));
  }
  return Status::Ok();
}

std::optional<std::string> ManagedFieldOfOption(std::string_view kind, std::string_view option) {
  for (const Row& row : Rows())
    if (const Use* use = UseFor(row, kind); use && !use->option.empty() && use->option == option)
      return std::string(use->field);
  return std::nullopt;
}

std::vector<std::string> ManagedFlagNames(std::string_view kind) {
  std::vector<std::string> out;
  for (const Row& row : Rows())
    if (UseFor(row, kind)) out.emplace_back(row.flag);
  return out;
}

}  // namespace npuprof::sm
