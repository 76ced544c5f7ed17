// Client verbs about runs: runs, show, watch, events, cancel, manifest, workers.
#include <algorithm>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/advice_lookup.h"
#include "cli/commands.h"
#include "common/json_depth.h"
#include "common/socket_security.h"
#include "common/terminal_text.h"
#include "statemachine/engine.h"
#include "statemachine/run_kind.h"
#include "views/task_link_table.h"

namespace npuprof::cli {

namespace {

// The import file, whole; one larger than the message cap could not be sent.
Result<std::string> ReadImportFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Io("cannot read " + path);
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > MaxMessageBytes())
      return Status::Invalid(fmt::format("{} is larger than the {} message cap of npuprof's sockets: it cannot be "
                                         "imported in one request",
                                         path, MessageCapText()));
  }
  if (in.bad()) return Status::Io("cannot read " + path);
  return text;
}

void CallAndPrint(const ServerAddress& addr, const std::string& verb, const json& args) {
  Client client(addr);
  auto r = client.CallJson(verb, args);
  if (!r.ok()) return Fail(2, r.status().message());
  PrintJson(*r);
}

}  // namespace

void AddRunCommands(CLI::App& app) {
  {
    auto* cmd = app.add_subcommand("runs", "List runs (newest first)");
    auto addr = std::make_shared<ServerAddress>();
    auto f = std::make_shared<std::map<std::string, std::string>>();
    auto as_json = std::make_shared<bool>(false);
    AddServerOptions(cmd, addr.get());
    cmd->add_option("--state", (*f)["state"], "Only runs in this state");
    cmd->add_option("--status", (*f)["status"], "Only runs with this status (running, ok, failed, cancelled)");
    cmd->add_option("--kind", (*f)["kind"], "Only runs of this kind");
    cmd->add_option("--machine", (*f)["machine"], "Only runs on this machine");
    cmd->add_option("--tag", (*f)["tag"], "Only runs with this tag");
    cmd->add_flag("--json", *as_json, "JSON output");
    cmd->callback([addr, f, as_json] {
      json args = json::object();
      for (const auto& [k, v] : *f)
        if (!v.empty()) args[k] = v;
      Client client(*addr);
      auto r = client.CallJson("runs", args);
      if (!r.ok()) return Fail(2, r.status().message());
      if (*as_json) return PrintJson(*r);
      const json rows = (*r)["runs"];
      size_t id_w = 27;  // wide enough for a sweep's child ids too
      for (const auto& run : rows) id_w = std::max(id_w, run.value("run_id", "").size());
      // One row per line; every field may hold text from a target or an imported run.
      auto row = [](const std::string& line) { std::cout << TerminalLine(line) << '\n'; };
      row(fmt::format("{:<{}} {:<15} {:<14} {:<10} {:<12} {}", "RUN", id_w, "KIND", "STATE", "STATUS", "MACHINE",
                      "CREATED"));
      for (const auto& run : rows) {
        row(fmt::format("{:<{}} {:<15} {:<14} {:<10} {:<12} {}", run.value("run_id", ""), id_w, run.value("kind", ""),
                        run.value("state", ""), run.value("status", ""), run.value("machine", ""),
                        run.value("created_at", "")));
        // A queued run says what it waits for (device lease, FIFO per machine).
        if (run.contains("waiting_for")) {
          const json& w = run["waiting_for"];
          row(fmt::format("{:<{}} waiting for {} device(s) on {} ({} queued ahead): {}", "", id_w,
                          w.value("count", 0), w.value("machine", ""), w.value("queued_ahead", 0),
                          w.value("reason", "")));
        }
      }
      // Devices no run is granted until a probe shows them idle.
      for (const auto& q : r->value("quarantined", json::array()))
        row(fmt::format("quarantined: device {} on {} since {}: run {}: {}", q.value("device", -1),
                        q.value("machine", ""), q.value("since", ""), q.value("run_id", ""), q.value("why", "")));
    });
  }
  {
    // The server's summary, with every task attempt's link figures (round
    // trips, time waiting on the link) from the run's events
    // (views/task_link_table.h) under "tasks" and "link_total".
    auto* cmd = app.add_subcommand("show", "Print a run's summary as JSON, with its tasks' round trips to the target");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    auto as_text = std::make_shared<bool>(false);
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id")->required();
    cmd->add_flag("--text", *as_text, "A text table of the tasks (kind, machine, attempt, round trips, link ms) instead of JSON");
    cmd->callback([addr, run, as_text] {
      Client client(*addr);
      auto summary = client.CallJson("show", json{{"run_id", *run}});
      if (!summary.ok()) return Fail(2, summary.status().message());
      auto events = client.CallJson("events", json{{"run_id", *run}});
      if (!events.ok()) return Fail(2, events.status().message());
      const views::TaskLinkTable table = views::BuildTaskLinkTable(events->value("events", json::array()));
      if (*as_text) {
        return PrintText(fmt::format("run {} ({}): {}\n{}", *run, summary->value("kind", "?"),
                                     summary->value("status", "?"), views::TaskLinkTableText(table)));
      }
      json out = *summary;
      if (out.is_object()) {
        out.update(views::TaskLinkTableJson(table));
        // A sweep testing an advice finding: whether it measured what was predicted.
        if (json verdict = SweepAdviceVerdict(client, out); !verdict.is_null()) out["advice_verdict"] = verdict;
      }
      PrintJson(out);
    });
  }
  for (const auto& [verb, help] : std::vector<std::pair<std::string, std::string>>{
           {"manifest", "Print a run's manifest as JSON"}}) {
    auto* cmd = app.add_subcommand(verb, help);
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id")->required();
    cmd->callback([addr, run, v = verb] { CallAndPrint(*addr, v, json{{"run_id", *run}}); });
  }
  {
    auto* cmd = app.add_subcommand("events", "The audit log of a run: every event with sequence, time, type, payload, cause");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id")->required();
    cmd->add_flag("--json", *as_json, "JSON output (complete, with hashes)");
    cmd->callback([addr, run, as_json] {
      Client client(*addr);
      auto r = client.CallJson("events", json{{"run_id", *run}});
      if (!r.ok()) return Fail(2, r.status().message());
      if (*as_json) return PrintJson(*r);
      for (const auto& e : (*r)["events"])
        std::cout << TerminalLine(fmt::format("{:>4} {} {:<20} cause={} {}", e.value("seq", 0), e.value("time", ""),
                                              e.value("type", ""), e.value("cause", ""),
                                              e["payload"].dump(-1, ' ', false, json::error_handler_t::replace)))
                  << '\n';
    });
  }
  {
    auto* cmd = app.add_subcommand("watch", "Follow a run's transitions until it ends (or reaches --until STATE)");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    auto until = std::make_shared<std::string>();
    auto quiet = std::make_shared<bool>(false);
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id")->required();
    cmd->add_option("--until", *until,
                    "Return once the run has reached this state (exit 0), or ended without reaching it (exit 1)");
    cmd->add_flag("-q,--quiet", *quiet, "No progress lines; print only the run id");
    cmd->callback([addr, run, until, quiet] {
      Client client(*addr);
      if (until->empty()) return WaitForRun(client, *run, false, *quiet);
      // A state the run's kind does not have (a typo, a renamed state) would
      // never be reached: refuse it, naming the kind's states.
      auto first = client.CallJson("show", json{{"run_id", *run}});
      if (!first.ok()) return Fail(2, first.status().message());
      const std::string kind_name = first->value("kind", "");
      if (const sm::RunKind* kind = sm::DefaultKinds().Find(kind_name)) {
        const std::vector<std::string> states = kind->transitions().States();
        const std::string want = kind->transitions().Current(*until);
        if (std::find(states.begin(), states.end(), want) == states.end())
          return Fail(2, fmt::format("--until {}: a {} run has no such state; its states: {}", *until, kind_name,
                                     fmt::join(states, ", ")));
        *until = want;
      }
      bool reached = false;
      const bool followed = FollowRunEvents(
          client, *run,
          [&](const json& batch) {
            for (const auto& e : batch) {
              const std::string type = e.value("type", "");
              if (type == "StateChanged" && e["payload"].value("to", "") == *until) reached = true;
              if (type == "StateChanged" && !reached)
                if (const sm::RunKind* k = sm::DefaultKinds().Find(kind_name))  // stored under an old name
                  reached = k->transitions().Current(e["payload"].value("to", "")) == *until;
              if (reached || type == "RunFinished") return true;
            }
            return false;
          },
          *quiet);
      if (!followed) return;
      auto show = client.CallJson("show", json{{"run_id", *run}});
      if (!show.ok()) return Fail(2, show.status().message());
      if (*quiet) std::cout << *run << std::endl;
      else PrintJson(*show);
      if (!reached)
        return Fail(1, fmt::format("run {} ended ({}) without reaching state '{}'", *run, show->value("status", ""),
                                   *until));
    });
  }
  {
    auto* cmd = app.add_subcommand("cancel", "Cancel a run (its services are stopped)");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id")->required();
    cmd->callback([addr, run] { CallAndPrint(*addr, "cancel", json{{"run_id", *run}}); });
  }
  {
    auto* cmd = app.add_subcommand("stop", "Stop the service of a serve run (SIGINT, SIGTERM; SIGKILL with --force)");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    auto force = std::make_shared<bool>(false);
    auto wait = std::make_shared<bool>(false);
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Run id of the serve run")->required();
    cmd->add_flag("--force", *force, "SIGKILL when SIGINT and SIGTERM did not stop it");
    cmd->add_flag("--wait", *wait, "Wait until the run has ended and print its summary");
    cmd->callback([addr, run, force, wait] {
      Client client(*addr);
      auto r = client.CallJson("signal", json{{"run_id", *run}, {"name", "stop"}, {"payload", {{"force", *force}}}});
      if (!r.ok()) return Fail(2, r.status().message());
      if (*wait) return WaitForRun(client, *run, false);
      PrintJson(*r);
    });
  }
  {
    auto* cmd = app.add_subcommand(
        "verify",
        "Replay runs from their events: hash chain, legal transitions, projections equal to the served ones, "
        "and each launched service's argv (read back from its launch record) agreeing with the spec");
    auto addr = std::make_shared<ServerAddress>();
    auto run = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("RUN", *run, "Only this run (default: every run)");
    cmd->callback([addr, run] {
      Client client(*addr);
      json args = json::object();
      if (!run->empty()) args["run_id"] = *run;
      auto r = client.Call("verify", args, std::chrono::seconds(120));
      if (!r.ok()) return Fail(2, r.status().message());
      if (!r->ok()) return Fail(2, r->error());
      Result<json> parsed = ParseJson(r->body_json(), kMaxOwnJsonDepth);
      if (!parsed.ok()) return Fail(2, "the server's answer cannot be read: " + parsed.status().message());
      const json& body = *parsed;
      PrintJson(body);
      if (!body.value("ok", false)) {
        for (const auto& row : body["runs"])
          if (!row.value("ok", true))
            return Fail(1, fmt::format("run {}: {}", row.value("run_id", ""), row.value("error", "")));
      }
    });
  }
  {
    auto* cmd = app.add_subcommand("import", "Import a finished run from `npuprof events RUN --json` output");
    auto addr = std::make_shared<ServerAddress>();
    auto file = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("FILE", *file, "JSON file written by `npuprof events RUN --json`")->required();
    cmd->callback([addr, file] {
      auto text = ReadImportFile(*file);
      if (!text.ok()) return Fail(2, text.status().message());
      // Read with the nesting limit before anything walks it (sending it
      // dumps it, and nlohmann's dump recurses once per level).
      Result<json> doc = ParseJson(*text);
      if (!doc.ok())
        return Fail(2, fmt::format("{}: {}; expected the output of `npuprof events RUN --json`", *file,
                                   doc.status().message()));
      if (!doc->is_object() || !doc->contains("events"))
        return Fail(2, *file + ": not the output of `npuprof events RUN --json`");
      Client client(*addr);
      auto r = client.CallJson("import", *doc, std::chrono::seconds(60));
      if (!r.ok()) return Fail(2, r.status().message());
      PrintJson(*r);
    });
  }
  {
    auto* cmd = app.add_subcommand("workers", "List the workers connected to the server");
    auto addr = std::make_shared<ServerAddress>();
    AddServerOptions(cmd, addr.get());
    cmd->callback([addr] { CallAndPrint(*addr, "workers", json::object()); });
  }
  {
    auto* cmd = app.add_subcommand("ping", "Check that a server answers");
    auto addr = std::make_shared<ServerAddress>();
    AddServerOptions(cmd, addr.get());
    cmd->callback([addr] { CallAndPrint(*addr, "ping", json::object()); });
  }
}

}  // namespace npuprof::cli
