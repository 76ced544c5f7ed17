// `npuprof report RUN [--format json|text] [--lang zh|en]`: the report of a
// run, a pure projection of its events (the server folds them; nothing is
// recomputed here except the text rendering).
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "statemachine/memory_report_text.h"

namespace npuprof::cli {

void AddReportCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Print a run's report (memory-profile: per-device HBM attribution)");
  auto addr = std::make_shared<ServerAddress>();
  auto run = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("json");
  auto lang = std::make_shared<std::string>("zh");
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUN", *run, "Run id")->required();
  cmd->add_option("--format", *format, "json (default) or text")->check(CLI::IsMember({"json", "text"}));
  cmd->add_option("--lang", *lang, "Text labels: zh (default) or en")->check(CLI::IsMember({"zh", "en"}));
  cmd->callback([addr, run, format, lang] {
    Client client(*addr);
    auto m = client.CallJson("manifest", json{{"run_id", *run}});
    if (!m.ok()) return Fail(2, m.status().message());
    if (!m->contains("report") || !(*m)["report"].is_object())
      return Fail(2, fmt::format("run {} ({}) has no report", *run, m->value("kind", "unknown kind")));
    const json& report = (*m)["report"];
    if (*format == "text") {
      std::cout << sm::RenderMemoryReportText(report, *lang);
    } else {
      json out = report;
      out["run_id"] = *run;
      out["status"] = m->value("status", "");
      PrintJson(out);
    }
    if (m->value("status", "") != "ok" && m->value("status", "") != "running") ExitCode() = 1;
  });
}

}  // namespace npuprof::cli
