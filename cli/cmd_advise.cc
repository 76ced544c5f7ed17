// `npuprof advise RUN [--format json|text] [--verify [--wait]]`: the
// findings the server's rules make of a memory-profile run's evidence
// (statemachine/memory_advice.h, served in the run's manifest), each with
// the ready-to-run `npuprof submit sweep ...` that tests its remedy and,
// when that sweep exists, whether it measured what was predicted
// (cli/advice_verify.h). --verify submits each finding's sweep (the same
// spec `npuprof submit sweep` builds from those flags, through the same
// submit call); --wait follows the sweeps to their end first.
// docs/ADVISE.md.
#include <iostream>

#include <fmt/format.h>

#include "cli/advice_lookup.h"
#include "cli/advice_verify.h"
#include "cli/commands.h"
#include "cli/submit_kinds.h"
#include "common/json_depth.h"
#include "common/json_field.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::cli {

namespace {

// The sweep spec `npuprof submit sweep ARGS` would submit (nothing is sent).
Result<CapturedSubmit> SweepSubmission(const std::vector<std::string>& sweep_args) {
  CLI::App app("npuprof");
  AddSubmitCommand(app);
  CapturedSubmit cap;
  SubmitCapture() = &cap;
  std::vector<std::string> reversed(sweep_args.rbegin(), sweep_args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    SubmitCapture() = nullptr;
    return Status::Invalid(fmt::format("the finding's sweep does not parse: {}", e.what()));
  }
  SubmitCapture() = nullptr;
  if (!cap.captured) return Status::Invalid("the finding's sweep was refused (see the message above)");
  return cap;
}

std::string RunIdAfter(const std::vector<std::string>& args, const char* flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) return args[i + 1];
  return "";
}

Status SubmitSweep(Client& client, const std::vector<std::string>& args) {
  auto cap = SweepSubmission(args);
  if (!cap.ok()) return cap.status();
  json req = {{"kind", cap->kind}, {"spec", cap->spec}, {"run_id", RunIdAfter(args, "--run-id")}};
  auto r = client.Call("submit", req);
  if (!r.ok()) return r.status();
  if (!r->ok()) return Status::Invalid(r->error());
  return Status::Ok();
}

bool WaitEnded(Client& client, const std::string& run_id) {
  return FollowRunEvents(
      client, run_id,
      [](const json& batch) {
        for (const auto& e : batch)
          if (e.value("type", "") == "RunFinished") return true;
        return false;
      },
      /*quiet=*/true);
}

}  // namespace

void AddAdviseCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("advise",
                                 "Diagnose a memory-profile run: findings with evidence, a remedy with its predicted "
                                 "effect, and the sweep that tests it (--verify submits it)");
  auto addr = std::make_shared<ServerAddress>();
  auto run = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("json");
  auto verify = std::make_shared<bool>(false);
  auto wait = std::make_shared<bool>(false);
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUN", *run, "A memory-profile run id")->required();
  cmd->add_option("--format", *format, "json (default) or text")->check(CLI::IsMember({"json", "text"}));
  cmd->add_flag("--verify", *verify, "Submit each finding's sweep (its spec records the advice it verifies)");
  cmd->add_flag("--wait", *wait, "With --verify: follow the sweeps to their end, then judge them");
  cmd->callback([addr, run, format, verify, wait] {
    Client client(*addr);
    auto m = client.CallJson("manifest", json{{"run_id", *run}});
    if (!m.ok()) return Fail(2, m.status().message());
    if (StrField(*m, "kind") != "memory-profile")
      return Fail(2, fmt::format("run {} is a {} run; advise reads memory-profile runs", *run,
                                 StrField(*m, "kind", "unknown")));
    json advice = Field(*m, "advice");
    if (!advice.is_object())
      return Fail(2, fmt::format("run {} has no advice (an install-wrapper run, or a server older than advise)", *run));
    advice["run_id"] = *run;
    advice["run_status"] = Field(*m, "status");
    for (auto& f : advice["findings"]) {
      json& sug = f["suggestion"];
      if (!sug.contains("sweep_args") || !sug["sweep_args"].is_array()) {
        sug["command"] = nullptr;
        continue;
      }
      std::vector<std::string> args = sug["sweep_args"].get<std::vector<std::string>>();
      sug["command"] = "npuprof " + ssh::BuildCommand(args);
      if (*verify) {
        if (Status st = SubmitSweep(client, args); !st.ok())
          return Fail(2, fmt::format("{}: {}", StrField(f, "rule"), st.message()));
        if (*wait && !WaitEnded(client, StrField(sug, "verify_run_id"))) return;
      }
      f["verification"] = AdviceVerification(client, *run, f);
    }
    PrintText(*format == "text" ? RenderAdviceText(advice) : advice.dump(2) + "\n");
    // 1 when a verification measured other than predicted.
    for (const auto& f : advice["findings"])
      if (Field(Field(f, "verification"), "matched") == json(false)) ExitCode() = 1;
  });
}

}  // namespace npuprof::cli
