#include "tests/views/chromium_rig.h"

#include <fcntl.h>
#include <png.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/views/view_fixtures.h"
#include "workers/poll_backoff.h"

namespace npuprof::testing {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool GroupAlive(pid_t pgid) { return ::kill(-pgid, 0) == 0; }

// Runs argv in a new process group, stdout and stderr to files; waits for
// its exit (polled with back-off) up to timeout_s, then for the rest of its
// group; a group still there after that is killed.
Result<int> RunToFiles(const std::vector<std::string>& argv, const std::string& out_file, const std::string& err_file,
                       int timeout_s) {
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Internal("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  workers::PollBackoff backoff(std::chrono::milliseconds(500), std::chrono::milliseconds(20));
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(backoff.Next());
  }
  // The browser's helpers (zygote, renderer, GPU process) leave with it; what
  // is still there 10 s after the browser exited is killed.
  const auto helpers_deadline = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  while (exited && GroupAlive(pid) && std::chrono::steady_clock::now() < helpers_deadline)
    std::this_thread::sleep_for(backoff.Next());
  if (GroupAlive(pid)) ::kill(-pid, SIGKILL);
  if (!exited) {
    ::waitpid(pid, &status, 0);
    return Status::Timeout(fmt::format("{} did not finish within {} s", argv[0], timeout_s));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// URL requests in a Chrome net log: all of them, and those the page made.
Status ReadNetLog(const std::string& path, BrowserRender& r) {
  std::string text = ReadFileBytes(path);
  json log = json::parse(text, nullptr, false);
  if (log.is_discarded()) log = json::parse(text + "]}", nullptr, false);  // a log cut short at exit
  if (log.is_discarded() || !log.is_object()) return Status::Corruption("net log " + path + " is not JSON");
  const json types = log.value("constants", json::object()).value("logEventTypes", json::object());
  if (!types.contains("URL_REQUEST_START_JOB"))
    return Status::Corruption("net log " + path + " names no URL_REQUEST_START_JOB event type");
  const int start_job = types["URL_REQUEST_START_JOB"].get<int>();
  for (const auto& e : log.value("events", json::array())) {
    if (!e.is_object() || e.value("type", -1) != start_job || !e.contains("params")) continue;
    const json& p = e["params"];
    if (!p.is_object() || !p.contains("url") || !p["url"].is_string()) continue;
    ++r.net_log_requests;
    const std::string url = p["url"];
    const std::string initiator = p.value("initiator", "");
    const std::string nik = p.value("network_isolation_key", "");
    const bool from_page = initiator == "null" || initiator.rfind("file:", 0) == 0 ||
                           nik.find("file://") != std::string::npos;
    if (from_page && url.rfind("file:", 0) != 0 && url.rfind("data:", 0) != 0) r.page_requests.push_back(url);
  }
  return Status::Ok();
}

}  // namespace

std::string FindChromium() {
  if (const char* env = std::getenv("NPUPROF_CHROMIUM"); env && *env) return ::access(env, X_OK) == 0 ? env : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
      const std::string p = dir + "/" + name;
      if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p;
    }
  return "";
}

Result<PngInfo> InspectPng(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    return Status::Invalid(fmt::format("{}: not a readable PNG ({})", path, image.message));
  image.format = PNG_FORMAT_RGBA;
  std::vector<png_byte> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    png_image_free(&image);
    return Status::Invalid(fmt::format("{}: PNG decode failed ({})", path, image.message));
  }
  PngInfo info;
  info.width = static_cast<int>(image.width);
  info.height = static_cast<int>(image.height);
  std::unordered_map<uint32_t, size_t> counts;
  const size_t n = static_cast<size_t>(image.width) * image.height;
  for (size_t i = 0; i < n; ++i) {
    uint32_t px;
    std::memcpy(&px, &pixels[i * 4], 4);
    ++counts[px];
  }
  size_t most = 0;
  for (const auto& [px, k] : counts) most = std::max(most, k);
  info.distinct_colours = std::min<size_t>(counts.size(), 4096);
  info.non_background_fraction = n ? static_cast<double>(n - most) / static_cast<double>(n) : 0;
  return info;
}

Result<BrowserRender> RenderInChromium(const std::string& html_path, const std::string& work_dir, int width,
                                       int height, int timeout_s) {
  const std::string browser = FindChromium();
  if (browser.empty()) return Status::NotFound("chromium is not installed");
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  const std::string profile = work_dir + "/profile";
  fs::remove_all(profile, ec);
  BrowserRender r;
  r.screenshot = work_dir + "/screenshot.png";
  const std::string net_log = work_dir + "/netlog.json", dom = work_dir + "/dom.html", log = work_dir + "/chromium.log";
  fs::remove(r.screenshot, ec);
  const std::vector<std::string> argv = {browser,
                                         "--headless",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--disable-background-networking",
                                         "--disable-component-update",
                                         "--no-first-run",
                                         "--disable-sync",
                                         "--disable-dev-shm-usage",
                                         "--host-resolver-rules=MAP * ~NOTFOUND",
                                         "--user-data-dir=" + profile,
                                         "--enable-logging=stderr",
                                         "--v=0",
                                         "--log-net-log=" + net_log,
                                         "--screenshot=" + r.screenshot,
                                         fmt::format("--window-size={},{}", width, height),
                                         "--dump-dom",
                                         "file://" + fs::absolute(html_path).string()};
  auto rc = RunToFiles(argv, dom, log, timeout_s);
  r.log = ReadFileBytes(log);
  if (!rc.ok()) return Status(rc.status().code(), rc.status().message() + "\n" + r.log);
  if (*rc != 0) return Status::Internal(fmt::format("chromium exited {}:\n{}", *rc, r.log));
  r.dom = ReadFileBytes(dom);
  std::stringstream lines(r.log);
  for (std::string line; std::getline(lines, line);)
    if (line.find("CONSOLE") != std::string::npos) r.console.push_back(line);
  if (Status st = ReadNetLog(net_log, r); !st.ok()) return st;
  auto png = InspectPng(r.screenshot);
  if (!png.ok()) return Status(png.status().code(), png.status().message() + "\n" + r.log);
  r.png = *png;
  fs::remove_all(profile, ec);
  return r;
}

}  // namespace npuprof::testing
