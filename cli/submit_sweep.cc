// `npuprof submit sweep --kind memory-profile|torch-profile --machine M
//  [the child kind's flags] --grid KEY=V1,V2[,...] [--grid ...] [--wait]
//  [-- extra vLLM args]`: one child run per point of the grid
// (statemachine/sweep_machine.h). Each point's child spec is built by the
// child kind's own `submit` parser (the same flags, defaults and checks as
// `npuprof submit KIND`) with the point's values added, so a bad key or
// value is refused here, naming it, before anything is submitted; the
// server then validates every point again before it submits any child.
#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "cli/env_option.h"
#include "cli/submit_kinds.h"
#include "cli/sweep_args.h"
#include "common/json_depth.h"
#include "statemachine/managed_flags.h"

namespace npuprof::cli {

namespace {

struct SweepOpts {
  std::string kind;
  std::string advice;  // --advice JSON: the advice this sweep verifies (npuprof advise --verify)
  std::vector<std::string> grid;
};

// Sweep-level options found after the first child flag (CLI11 hands the
// rest over raw): moved out of `raw` into c / o. Stops at "--".
Status TakeSweepOptions(std::vector<std::string>& raw, SubmitCommon& c, SweepOpts& o) {
  const std::map<std::string, std::string*> valued = {
      {"--grid", nullptr},           {"--kind", &o.kind},           {"--tag", &c.tag},  {"--advice", &o.advice},
      {"--run-id", &c.run_id},       {"--machine", &c.machine},     {"--data-dir", &c.addr.data_dir},
      {"--broker", &c.addr.broker},  {"--key-file", &c.addr.key_file}, {"--server-key", &c.addr.server_key}};
  std::vector<std::string> child;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "--") {
      child.insert(child.end(), raw.begin() + static_cast<std::ptrdiff_t>(i), raw.end());
      break;
    }
    if (a == "--wait") {
      c.wait = true;
      continue;
    }
    if (a == "-q" || a == "--quiet") {
      c.quiet = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = eq == std::string::npos ? a : a.substr(0, eq);
    auto it = valued.find(name);
    if (it == valued.end()) {
      child.push_back(a);
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < raw.size()) {
      value = raw[++i];
    } else {
      return Status::Invalid(fmt::format("{} needs a value", name));
    }
    if (it->second) *it->second = value;
    else o.grid.push_back(value);
  }
  raw = std::move(child);
  return Status::Ok();
}

// The child spec `npuprof submit <kind> ARGS` would submit (nothing is sent).
Result<json> ChildSpec(const std::string& kind, const std::vector<std::string>& args) {
  CLI::App app("npuprof");
  auto* submit = app.add_subcommand("submit");
  if (kind == "memory-profile") AddSubmitMemoryProfile(submit);
  else AddSubmitTorchProfile(submit);
  CapturedSubmit cap;
  CapturedSubmit* const outer = SubmitCapture();  // `npuprof advise --verify` captures the sweep itself
  SubmitCapture() = &cap;
  std::vector<std::string> argv = {"submit", kind};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());
  const int before = ExitCode();
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    SubmitCapture() = outer;
    return Status::Invalid(e.what());
  }
  SubmitCapture() = outer;
  if (!cap.captured) {
    ExitCode() = before;
    return Status::Invalid(fmt::format("`npuprof submit {}` refused these flags (see the message above)", kind));
  }
  return cap.spec;
}

// The child kind's option for a grid key, or an error naming the key.
Result<const CLI::Option*> GridOption(const std::string& kind, const std::string& key) {
  if (IsReservedGridKey(key))
    return Status::Invalid(fmt::format("--grid {}: not a grid key (it names the run, the server or the sweep; "
                                       "each point picks a free port)",
                                       key));
  // env.NAME: one variable of the service's environment (the child's --env NAME=V).
  std::string name = key;
  if (IsEnvGridKey(key)) {
    auto var = EnvGridName(key);
    if (!var.ok()) return var.status();
    name = "env";
  }
  // A vLLM flag npuprof manages through another option: sweep that option.
  if (Status st = sm::CheckGridKey(kind, name); !st.ok()) return st;
  static CLI::App app("npuprof");
  static CLI::App* mem = [] {
    auto* s = app.add_subcommand("submit");
    AddSubmitMemoryProfile(s);
    AddSubmitTorchProfile(s);
    return s;
  }();
  CLI::App* sub = mem->get_subcommand(kind);
  const CLI::Option* opt = sub->get_option_no_throw("--" + name);
  if (!opt) {
    std::vector<std::string> names;
    for (const CLI::Option* o : sub->get_options()) {
      const auto& ln = o->get_lnames();
      if (!ln.empty() && !IsReservedGridKey(ln[0])) names.push_back(ln[0]);
    }
    return Status::Invalid(fmt::format("--grid {}: `npuprof submit {}` has no option --{}; grid keys are its "
                                       "flags: {}{}",
                                       key, kind, name, fmt::join(names, ", "),
                                       sub->get_option_no_throw("--env") ? ", and env.NAME (one --env variable)" : ""));
  }
  return opt;
}

}  // namespace

void AddSubmitSweep(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto o = std::make_shared<SweepOpts>();
  auto* cmd = AddSubmitKind(submit, "sweep",
                            "One memory-profile or torch-profile run per point of a configuration grid "
                            "(--grid KEY=V1,V2, repeatable; keys are the child kind's flags); `npuprof report "
                            "SWEEP` compares the points",
                            c.get(), /*machine_required=*/false);
  cmd->add_option("--kind", o->kind, "Child kind: memory-profile or torch-profile");
  cmd->add_option("--grid", o->grid, "KEY=V1,V2[,...]: a child flag and its values (repeat for more keys)")
      ->allow_extra_args(false);
  cmd->add_option("--advice", o->advice,
                  "JSON: the advice this sweep verifies (what `npuprof advise RUN` prints in a finding's command)");
  cmd->prefix_command();  // the child kind's flags pass through raw
  cmd->callback([c, o, cmd] {
    std::vector<std::string> raw = cmd->remaining();
    if (Status st = TakeSweepOptions(raw, *c, *o); !st.ok()) return Fail(2, st.message());
    if (o->kind != "memory-profile" && o->kind != "torch-profile")
      return Fail(2, fmt::format("--kind '{}': a sweep runs memory-profile or torch-profile points", o->kind));
    if (o->grid.empty()) return Fail(2, "a sweep needs at least one --grid KEY=V1,V2");
    // Base flags: the child's args before "--"; a grid key may not be one of them.
    std::vector<std::string> base(raw.begin(), std::find(raw.begin(), raw.end(), std::string("--")));
    std::vector<std::string> tail(std::find(raw.begin(), raw.end(), std::string("--")), raw.end());
    const bool grid_nodes = std::any_of(o->grid.begin(), o->grid.end(),
                                        [](const std::string& g) { return g.rfind("node=", 0) == 0; });
    const std::vector<std::string> base_nodes = NodeFlagValues(base);
    if (grid_nodes && !c->machine.empty())
      return Fail(2, "--machine together with --grid node: each point's head is its first node; leave out --machine");
    if (c->machine.empty() && !base_nodes.empty()) c->machine = base_nodes[0].substr(0, base_nodes[0].find(':'));
    if (c->machine.empty() && !grid_nodes)
      return Fail(2, "a sweep needs --machine (or --node MACHINE[:DEVICES], repeated, or --grid node=[...])");
    std::vector<GridAxis> axes;
    std::map<std::string, bool> is_flag;
    for (const auto& g : o->grid) {
      auto axis = ParseGridOption(g);
      if (!axis.ok()) return Fail(2, axis.status().message());
      auto opt = GridOption(o->kind, axis->key);
      if (!opt.ok()) return Fail(2, opt.status().message());
      for (size_t b = 0; b < base.size(); ++b) {
        if (base[b] == "--" + axis->key || base[b].rfind("--" + axis->key + "=", 0) == 0)
          return Fail(2, fmt::format("--{} is both a child flag and a --grid key; give it in one place", axis->key));
        // --env NAME=V (or --env=NAME=V) in the base flags and --grid env.NAME.
        const std::string env_value = base[b] == "--env" && b + 1 < base.size() ? base[b + 1]
                                      : base[b].rfind("--env=", 0) == 0         ? base[b].substr(6)
                                                                                : "";
        if (IsEnvGridKey(axis->key) && env_value.rfind(axis->key.substr(4) + "=", 0) == 0)
          return Fail(2, fmt::format("--env {} and --grid {}: the variable is given twice; give it in one place",
                                     env_value, axis->key));
      }
      for (const auto& a : axes)
        if (a.key == axis->key) return Fail(2, fmt::format("--grid {}: the key is given twice", axis->key));
      if (axis->key == "node")
        for (const auto& v : axis->values)
          if (auto list = ParseNodeList(v); !list.ok()) return Fail(2, list.status().message());
      is_flag[axis->key] = (*opt)->get_expected_min() == 0;
      if (is_flag[axis->key])
        for (const auto& v : axis->values)
          if (v != "true" && v != "false")
            return Fail(2, fmt::format("--grid {}={}: --{} is a flag; its values are true and false", axis->key, v,
                                       axis->key));
      axes.push_back(std::move(*axis));
    }
    const auto points = GridPoints(axes);
    if (points.size() > 64) return Fail(2, fmt::format("the grid has {} points; at most 64 per sweep", points.size()));
    json grid = json::array(), specs = json::array();
    for (const auto& a : axes) grid.push_back({{"key", a.key}, {"values", a.values}});
    json sweep_nodes = json::array();  // every machine of a multi-node point, once (the broker adds records)
    std::string head;                  // the sweep's machine with --grid node: the first point's head
    for (size_t i = 0; i < points.size(); ++i) {
      std::vector<std::string> args;
      if (!grid_nodes) args = {"--machine", c->machine};
      if (!c->tag.empty()) args.insert(args.end(), {"--tag", c->tag});  // the sweep's tag is each point's
      args.insert(args.end(), base.begin(), base.end());
      json point = json::object();
      for (const auto& [k, v] : points[i]) {
        point[k] = v;
        if (k == "node") {
          const auto nodes = ParseNodeList(v);  // checked when the axis was read
          if (nodes.ok())
            for (const auto& n : *nodes) args.insert(args.end(), {"--node", n});
        } else if (IsEnvGridKey(k)) {
          args.push_back("--env");
          args.push_back(k.substr(4) + "=" + v);
        } else if (!is_flag[k]) {
          args.push_back("--" + k);
          args.push_back(v);
        } else if (v == "true") {
          args.push_back("--" + k);
        }
      }
      args.insert(args.end(), tail.begin(), tail.end());
      auto spec = ChildSpec(o->kind, args);
      if (!spec.ok()) return Fail(2, fmt::format("grid point {} ({}): {}", i, point.dump(), spec.status().message()));
      if (spec->contains("nodes") && (*spec)["nodes"].is_array()) {
        for (const auto& n : (*spec)["nodes"]) {
          const json machine = n.value("machine", json());
          if (head.empty() && machine.is_string()) head = machine.get<std::string>();
          if (std::none_of(sweep_nodes.begin(), sweep_nodes.end(), [&](const json& s) { return s["machine"] == machine; }))
            sweep_nodes.push_back({{"machine", machine}});
        }
      } else if (head.empty() && spec->value("machine", json()).is_string()) {
        head = (*spec)["machine"].get<std::string>();
      }
      spec->erase("machine");
      spec->erase("tag");
      specs.push_back({{"point", point}, {"spec", *spec}});
    }
    if (c->machine.empty()) c->machine = head;
    json sweep = {{"child_kind", o->kind}, {"grid", grid}, {"points", specs}};
    if (!o->advice.empty()) {
      auto advice = ParseJson(o->advice);
      if (!advice.ok() || !advice->is_object())
        return Fail(2, "--advice must be the JSON object `npuprof advise` prints in a finding's command");
      sweep["advice"] = *advice;
    }
    if (!sweep_nodes.empty()) sweep["nodes"] = std::move(sweep_nodes);
    SubmitAndMaybeWait(*c, "sweep", sweep, false);
  });
}

}  // namespace npuprof::cli
