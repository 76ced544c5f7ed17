// `npuprof report RUN [--format json|text|html] [--lang zh|en] [-o FILE]`:
// the report of a run (memory-profile: the HBM attribution; torch-profile
// and analyse-root: gates and per-rank kernel summaries,
// views/torch_report_text.h; sweep: the compare of its points,
// cli/sweep_report.h), a pure projection of its events (the server folds
// them; nothing is recomputed here except the rendering). html: one
// self-contained page (views/html_memory_report.h for memory-profile runs,
// views/html_torch_report.h for torch-profile and analyse-root runs,
// views/html_hbm_watch.h for serve runs with --watch-hbm) from
// the manifest the server serves, plus the run's HBM series when it has
// them (cli/run_hbm_series.h).
#include <iostream>

#include <fmt/format.h>

#include "cli/advice_verify.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "cli/run_hbm_series.h"
#include "cli/sweep_report.h"
#include "views/hbm_watch_text.h"
#include "views/html_hbm_watch.h"
#include "statemachine/memory_report_text.h"
#include "views/html_memory_report.h"
#include "views/html_run_compare.h"
#include "views/run_compare_text.h"
#include "views/html_torch_report.h"
#include "views/torch_report_text.h"

namespace npuprof::cli {

namespace {

// The html page of a run of any kind that has one.
Result<std::string> RenderHtml(Client& client, const std::string& run, const json& manifest, const std::string& lang) {
  const std::string kind = manifest.value("kind", "");
  if (kind == "torch-profile" || kind == "analyse-root") return views::RenderTorchProfileHtml(manifest, lang);
  if (kind == "serve") {  // serve --watch-hbm: views/html_hbm_watch.h
    auto rep = views::BuildHbmWatchReport(manifest);
    if (!rep.ok()) return rep.status();
    return views::RenderHbmWatchHtml(*rep, lang);
  }
  if (manifest.contains("report") && manifest["report"].is_object()) {
    auto evs = client.CallJson("events", json{{"run_id", run}}, std::chrono::seconds(60));
    if (!evs.ok()) return evs.status();
    return views::RenderMemoryReportHtml(manifest, RunHbmSeries(client, *evs), lang);
  }
  return Status::Invalid(fmt::format("run {} ({}) has no HTML report; memory-profile, torch-profile, "
                                     "analyse-root and serve --watch-hbm runs have one",
                                     run, kind.empty() ? "unknown kind" : kind));
}

}  // namespace

void AddReportCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report", "Print a run's report (memory-profile: per-device HBM attribution; torch-profile: gates and kernel summaries)");
  auto addr = std::make_shared<ServerAddress>();
  auto run = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("json");
  auto lang = std::make_shared<std::string>("zh");
  auto out = std::make_shared<std::string>();
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUN", *run, "Run id")->required();
  cmd->add_option("--format", *format, "json (default), text or html (one self-contained page)")
      ->check(CLI::IsMember({"json", "text", "html"}));
  cmd->add_option("--lang", *lang, "Text and html labels: zh (default) or en")->check(CLI::IsMember({"zh", "en"}));
  cmd->add_option("-o,--output", *out, "Write the report to FILE instead of stdout");
  cmd->callback([addr, run, format, lang, out] {
    Client client(*addr);
    auto m = client.CallJson("manifest", json{{"run_id", *run}});
    if (!m.ok()) return Fail(2, m.status().message());
    std::string text;
    if (m->value("kind", "") == "sweep") {
      auto c = SweepCompare(client, *m);
      if (!c.ok()) return Fail(2, c.status().message());
      if (*format == "html") {
        auto html = views::RenderRunCompareHtml(*c, *lang);
        if (!html.ok()) return Fail(2, html.status().message());
        text = std::move(*html);
      } else {
        text = *format == "text" ? views::RenderRunCompareText(*c, *lang) : c->dump(2) + "\n";
      }
    } else if (*format == "html") {
      auto html = RenderHtml(client, *run, *m, *lang);
      if (!html.ok()) return Fail(2, html.status().message());
      text = std::move(*html);
    } else if (m->value("kind", "") == "serve") {  // serve --watch-hbm: views/hbm_watch_text.h
      auto rep = views::BuildHbmWatchReport(*m);
      if (!rep.ok()) return Fail(2, rep.status().message());
      text = *format == "text" ? views::RenderHbmWatchText(*rep, *lang) : rep->dump(2) + "\n";
    } else if (const std::string kind = m->value("kind", ""); kind == "torch-profile" || kind == "analyse-root") {
      auto rep = views::BuildTorchReport(*m);
      if (!rep.ok()) return Fail(2, rep.status().message());
      text = *format == "text" ? views::RenderTorchReportText(*rep, *lang) : rep->dump(2) + "\n";
    } else {
      if (!m->contains("report") || !(*m)["report"].is_object())
        return Fail(2, fmt::format("run {} ({}) has no report", *run, m->value("kind", "unknown kind")));
      const json& report = (*m)["report"];
      // The advice's findings (docs/ADVISE.md) close the report.
      json advice = m->value("advice", json());
      if (advice.is_object()) advice["run_id"] = *run;
      const bool advised = advice.is_object() && advice.value("findings", json::array()).size() > 0;
      if (*format == "text") {
        text = sm::RenderMemoryReportText(report, *lang);
        if (advised) text += "\n" + RenderAdviceText(advice);
      } else {
        json doc = report;
        doc["run_id"] = *run;
        doc["status"] = m->value("status", "");
        if (advice.is_object()) doc["advice"] = advice;
        text = doc.dump(2) + "\n";
      }
    }
    if (out->empty()) {
      PrintText(text);
    } else {
      if (Status st = WriteFileAtomic(*out, text); !st.ok()) return Fail(2, st.message());
      PrintJson(json{{"run_id", *run}, {"format", *format}, {"file", *out}});
    }
    if (m->value("status", "") != "ok" && m->value("status", "") != "running") ExitCode() = 1;
  });
}

}  // namespace npuprof::cli
