#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/progress_line.h"
#include "common/terminal_text.h"
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

void PrintJson(const json& j) { std::cout << TerminalJson(j, 2) << std::endl; }

void PrintText(const std::string& text) { std::cout << TerminalText(text) << std::flush; }

void Fail(int code, const std::string& msg) {
  std::cerr << "npuprof: " << TerminalText(msg) << std::endl;
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
  std::cerr << TerminalLine(line) << std::endl;
}

// Columns of the terminal on stderr (100 when unknown).
size_t TerminalWidth() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 10) return w.ws_col;
  return 100;
}

// On a terminal: one line, rewritten in place (progress_line.h).
class LiveLine {
 public:
  LiveLine(Client& client, const std::string& run_id) : client_(client) { p_.run_id = run_id; }
  void Event(const json& e) { ApplyProgressEvent(p_, e); }
  void Draw() {
    const int64_t now = NowMs();
    if (p_.state == "queued" && !p_.finished && now - last_show_ms_ >= 1000) {
      last_show_ms_ = now;
      if (auto s = client_.CallJson("show", json{{"run_id", p_.run_id}}); s.ok())
        ApplyWaitingFor(p_, s->value("waiting_for", json(nullptr)));
    }
    std::cerr << "\r\033[K" << ProgressLine(p_, now, TerminalWidth() - 4) << std::flush;
    drawn_ = true;
  }
  void End() {
    if (drawn_) std::cerr << std::endl;
    drawn_ = false;
  }
  ~LiveLine() { End(); }

 private:
  Client& client_;
  RunProgress p_;
  int64_t last_show_ms_ = 0;
  bool drawn_ = false;
};

}  // namespace

bool FollowRunEvents(Client& client, const std::string& run_id, const std::function<bool(const json&)>& stop,
                     bool quiet) {
  uint64_t next_seq = 1;
  int64_t unreachable_since = 0;
  std::optional<LiveLine> live;
  if (!quiet && isatty(STDERR_FILENO)) live.emplace(client, run_id);
  while (true) {
    auto evs = client.CallJson("events", json{{"run_id", run_id}, {"from_seq", next_seq}});
    if (!evs.ok()) {
      if (evs.status().code() != Code::kUnavailable) {
        Fail(2, evs.status().message());
        return false;
      }
      if (unreachable_since == 0) {
        unreachable_since = NowMs();
        if (live) live->End();
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
      if (live) live->Event(e);
      else if (!quiet) PrintProgress(e);
      next_seq = e.value("seq", next_seq) + 1;
    }
    if (live) live->Draw();
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
