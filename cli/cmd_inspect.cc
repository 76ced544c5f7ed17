// `npuprof inspect ...`: offline parsing of a saved artifact; no server needed.
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "parsers/npu_smi_parser.h"

namespace npuprof::cli {

namespace {

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Parse a saved artifact offline and print JSON");
  inspect->require_subcommand(1);
  {
    auto* cmd = inspect->add_subcommand("npu-smi", "Parse saved `npu-smi info` output");
    auto file = std::make_shared<std::string>();
    auto with_avail = std::make_shared<bool>(false);
    cmd->add_option("FILE", *file, "File with npu-smi info output")->required();
    cmd->add_flag("--availability", *with_avail, "Add free/busy verdicts per device");
    cmd->callback([file, with_avail] {
      auto text = ReadWholeFile(*file);
      if (!text.ok()) return Fail(2, text.status().message());
      auto snap = parsers::ParseNpuSmi(*text);
      if (!snap.ok()) return Fail(1, *file + ": " + snap.status().message());
      json j = parsers::NpuSmiToJson(*snap);
      if (*with_avail) {
        json av = json::array();
        for (const auto& d : parsers::ClassifyDevices(*snap))
          av.push_back({{"logical_id", d.logical_id}, {"npu", d.npu}, {"chip", d.chip}, {"busy", d.busy},
                        {"reason", d.reason}, {"used_mb", d.used_mb}, {"total_mb", d.total_mb}, {"pids", d.pids}});
        j["availability"] = av;
      }
      PrintJson(j);
    });
  }
}

}  // namespace npuprof::cli
