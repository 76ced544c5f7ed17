#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/time_util.h"

namespace npuprof::cli {

int& ExitCode() {
  static int code = 0;
  return code;
}

void AddServerOptions(CLI::App* cmd, ServerAddress* addr) {
  cmd->add_option("--data-dir", addr->data_dir, "Data dir of the server to talk to (env NPUPROF_DATA_DIR)");
  cmd->add_option("--broker", addr->broker, "Broker endpoint, e.g. tcp://127.0.0.1:5555 (env NPUPROF_BROKER)");
  cmd->add_option("--key-file", addr->key_file,
                  "This peer's CURVE key pair for a tcp broker (`npuprof keys new`; env NPUPROF_KEY_FILE)");
  cmd->add_option("--server-key", addr->server_key,
                  "The server's CURVE public key, or a file holding it (`npuprof keys` on the server; env "
                  "NPUPROF_SERVER_KEY)");
}

void PrintJson(const json& j) { std::cout << j.dump(2) << std::endl; }

void Fail(int code, const std::string& msg) {
  std::cerr << "npuprof: " << msg << std::endl;
  ExitCode() = code;
}

namespace {

// Progress shows the first line of an error; the whole text comes with the final answer.
std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

void PrintProgress(const json& e) {
  const std::string type = e.value("type", "");
  const json& p = e["payload"];
  std::string line = fmt::format("[{}] #{} {}", e.value("time", ""), e.value("seq", 0), type);
  if (type == "StateChanged") {
    line += fmt::format(" {} -> {}", p.value("from", ""), p.value("to", ""));
    if (p.contains("reason")) line += " (" + p.value("reason", "") + ")";
  } else if (type == "TaskScheduled" || type == "TaskRedispatched") {
    line += fmt::format(" {} {} attempt {}", p.value("task_id", ""), p.value("kind", p.value("reason", "")),
                        p.value("attempt", 0));
  } else if (type == "TaskFailed") {
    line += fmt::format(" {}: {}", p.value("error_kind", ""), FirstLine(p.value("error", "")));
  } else if (type == "RunFinished") {
    line += " " + p.value("status", "");
    if (p.contains("error")) line += ": " + FirstLine(p.value("error", ""));
  }
  std::cerr << line << std::endl;
}

}  // namespace

bool FollowRunEvents(Client& client, const std::string& run_id, const std::function<bool(const json&)>& stop,
                     bool quiet) {
  uint64_t next_seq = 1;
  int64_t unreachable_since = 0;
  while (true) {
    auto evs = client.CallJson("events", json{{"run_id", run_id}, {"from_seq", next_seq}});
    if (!evs.ok()) {
      if (evs.status().code() != Code::kUnavailable) {
        Fail(2, evs.status().message());
        return false;
      }
      if (unreachable_since == 0) {
        unreachable_since = NowMs();
        if (!quiet) std::cerr << "npuprof: server not answering; waiting for it to come back" << std::endl;
      }
      if (NowMs() - unreachable_since > 120000) {
        Fail(2, evs.status().message());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      continue;
    }
    unreachable_since = 0;
    const json batch = (*evs)["events"];
    for (const auto& e : batch) {
      if (!quiet) PrintProgress(e);
      next_seq = e.value("seq", next_seq) + 1;
    }
    if (stop(batch)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
}

void WaitForRun(Client& client, const std::string& run_id, bool manifest, bool quiet) {
  const bool followed = FollowRunEvents(
      client, run_id,
      [](const json& batch) {
        for (const auto& e : batch)
          if (e.value("type", "") == "RunFinished") return true;
        return false;
      },
      quiet);
  if (!followed) return;
  auto out = client.CallJson(manifest ? "manifest" : "show", json{{"run_id", run_id}});
  if (!out.ok()) return Fail(2, out.status().message());
  if (quiet) std::cout << run_id << std::endl;
  else PrintJson(*out);
  ExitCode() = out->value("status", "") == "ok" ? 0 : 1;
}

}  // namespace npuprof::cli
