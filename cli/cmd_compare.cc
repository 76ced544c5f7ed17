// `npuprof compare RUN_A RUN_B [RUN_C ...] [--format json|text|html]
// [--lang zh|en] [-o FILE]`: the compare of stored runs, a pure projection
// of their manifests (views/run_compare.h; no remote work). The manifests
// are fetched from the server; a refusal (fewer than 2 runs, different
// kinds, a run not finished or without a report) exits 2 naming the runs.
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "views/html_run_compare.h"
#include "views/run_compare.h"
#include "views/run_compare_text.h"

namespace npuprof::cli {

void AddCompareCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare", "Compare finished runs of one kind: config differences, per-device HBM components (or benchmark, "
                 "gates and ranks) with deltas against the first run");
  auto addr = std::make_shared<ServerAddress>();
  auto runs = std::make_shared<std::vector<std::string>>();
  auto format = std::make_shared<std::string>("json");
  auto lang = std::make_shared<std::string>("zh");
  auto out = std::make_shared<std::string>();
  AddServerOptions(cmd, addr.get());
  cmd->add_option("RUNS", *runs, "Run ids, 2 or more; the first (A) is the reference of every delta")->required();
  cmd->add_option("--format", *format, "json (default), text or html (one self-contained page)")
      ->check(CLI::IsMember({"json", "text", "html"}));
  cmd->add_option("--lang", *lang, "Text and html labels: zh (default) or en")->check(CLI::IsMember({"zh", "en"}));
  cmd->add_option("-o,--output", *out, "Write the compare to FILE instead of stdout");
  cmd->callback([addr, runs, format, lang, out] {
    if (runs->size() < 2)
      return Fail(2, fmt::format("compare needs at least 2 runs, got {}: npuprof compare RUN_A RUN_B [RUN_C ...]",
                                 runs->size()));
    Client client(*addr);
    std::vector<json> manifests;
    for (const auto& run : *runs) {
      auto m = client.CallJson("manifest", json{{"run_id", run}});
      if (!m.ok()) return Fail(2, m.status().message());
      manifests.push_back(std::move(*m));
    }
    auto c = views::BuildRunCompare(manifests);
    if (!c.ok()) return Fail(2, c.status().message());
    std::string text;
    if (*format == "html") {
      auto html = views::RenderRunCompareHtml(*c, *lang);
      if (!html.ok()) return Fail(2, html.status().message());
      text = std::move(*html);
    } else if (*format == "text") {
      text = views::RenderRunCompareText(*c, *lang);
    } else {
      text = c->dump(2) + "\n";
    }
    if (out->empty()) {
      PrintText(text);
    } else {
      if (Status st = WriteFileAtomic(*out, text); !st.ok()) return Fail(2, st.message());
      PrintJson(json{{"runs", *runs}, {"format", *format}, {"file", *out}});
    }
  });
}

}  // namespace npuprof::cli
