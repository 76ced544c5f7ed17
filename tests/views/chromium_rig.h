// Headless Chromium rig (test helper): renders a local HTML file from its
// file:// URL in a real browser and reports what a person would see and
// what the page did.
//
// One browser run per render, in a fresh --user-data-dir under `work_dir`:
//   --headless --no-sandbox --disable-gpu --disable-background-networking
//   --disable-component-update --no-first-run --disable-sync
//   --disable-dev-shm-usage (containers often have a small /dev/shm)
//   --host-resolver-rules="MAP * ~NOTFOUND" (the browser's own background
//   requests cannot leave the machine either)
//   --enable-logging=stderr --v=0   console messages -> stderr
//   --log-net-log=<work_dir>/netlog.json   every URL request it started
//   --screenshot=<work_dir>/screenshot.png --window-size=W,H
//   --dump-dom                      the rendered DOM -> stdout
// The browser is started in its own process group; the wait polls its exit
// with back-off; if it outlives the timeout, or its helpers outlive it by
// 10 s, that group (and only it) is killed.
//
// Results: the DOM; every console line ("CONSOLE" in the log: a page without
// script logs nothing unless the browser complained, e.g. about a blocked
// load or a CSP violation); the non-file URLs the page requested (net-log
// URL requests made for the page — initiator "null" or a file:// network
// isolation key — as opposed to the browser's own); the screenshot's size
// and whether it is blank (libpng: fewer than 1% of the pixels differ from
// the most common colour).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace npuprof::testing {

// The browser: $NPUPROF_CHROMIUM, else chromium / chromium-browser /
// google-chrome on PATH; "" when none is installed.
std::string FindChromium();

struct PngInfo {
  int width = 0;
  int height = 0;
  double non_background_fraction = 0;  // pixels differing from the most common colour
  size_t distinct_colours = 0;         // capped at 4096
};

// Reads a PNG with libpng. Errors: unreadable or not a PNG.
Result<PngInfo> InspectPng(const std::string& path);

struct BrowserRender {
  std::string dom;
  std::vector<std::string> console;        // "CONSOLE" log lines
  std::vector<std::string> page_requests;  // non-file URLs the page asked for
  size_t net_log_requests = 0;             // every URL request in the net log (page or browser)
  std::string screenshot;                  // path
  PngInfo png;
  std::string log;                         // the browser's stderr, for failure messages
};

Result<BrowserRender> RenderInChromium(const std::string& html_path, const std::string& work_dir, int width = 1280,
                                       int height = 1800, int timeout_s = 90);

}  // namespace npuprof::testing
