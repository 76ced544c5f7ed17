// `npuprof export RUN DIR`: writes a run's artifacts into a local directory.
// What gets written depends on the run kind: each kind plugs in an exporter
// keyed by its name. analyse-root (cmd_export.cc) writes DIR/manifest.json;
// torch-profile (export_torch_profile.cc) the same, plus, for a multi-node
// run, every node's ranks under one profile root (profile_root_layout.h);
// other kinds register their own, e.g. in their submit file:
//
//   static const ExporterRegistration kReg("memory-profile", &ExportMemoryRun);
//
// Static registration works because every cli/*.cc is linked straight into
// the npuprof executable.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/client.h"
#include "common/status.h"

namespace npuprof::cli {

struct ExportContext {
  Client& client;          // connected to the run's server
  std::string run_id;
  json summary;            // `npuprof show RUN`
  std::string dir;         // created before the exporter runs
};

// Writes files under ctx.dir; returns the paths written (for the JSON the
// command prints) or an error.
using Exporter = std::function<Result<std::vector<std::string>>(ExportContext& ctx)>;

void RegisterExporter(const std::string& kind, Exporter exporter);
const Exporter* FindExporter(const std::string& kind);
std::vector<std::string> ExporterKinds();

struct ExporterRegistration {
  ExporterRegistration(const std::string& kind, Exporter exporter) { RegisterExporter(kind, std::move(exporter)); }
};

// Shared helper: fetch the run's manifest and write it as DIR/manifest.json.
Result<std::string> WriteManifestJson(ExportContext& ctx);

void AddExportCommand(CLI::App& app);

}  // namespace npuprof::cli
