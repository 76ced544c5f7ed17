#include "tests/metrics/promtool_check.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace npuprof::broker::testing {

proto::Event MetricsEvent(const std::string& run_id, const std::string& type, const nlohmann::json& payload) {
  proto::Event e;
  e.set_run_id(run_id);
  e.set_type(type);
  e.set_payload_json(payload.dump());
  return e;
}

std::optional<PromtoolVerdict> PromtoolCheck(const std::string& exposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return std::nullopt;
  char tmpl[] = "/tmp/npuprof-promtool-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  PromtoolVerdict v;
  if (fd < 0) {
    v.output = "cannot create a temporary file for promtool";
    return v;
  }
  ::close(fd);
  const std::string path = tmpl;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << exposition;
  const std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    std::filesystem::remove(path);
    v.output = "cannot start promtool";
    return v;
  }
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) v.output.append(buf, n);
  const int status = ::pclose(p);
  std::filesystem::remove(path);
  v.passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return v;
}

}  // namespace npuprof::broker::testing
