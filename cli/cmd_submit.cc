// `npuprof submit KIND ...`: creates a run; prints {"run_id": ...}; with
// --wait follows it to its end and prints the final JSON.
#include <iostream>

#include "cli/submit_kinds.h"
#include "common/json_depth.h"

namespace npuprof::cli {

CLI::App* AddSubmitKind(CLI::App* submit, const std::string& name, const std::string& help, SubmitCommon* c,
                        bool machine_required) {
  auto* cmd = submit->add_subcommand(name, help);
  AddServerOptions(cmd, &c->addr);
  auto* m = cmd->add_option("--machine", c->machine, "Machine from the inventory (npuprof machine list)");
  if (machine_required) m->required();
  cmd->add_option("--tag", c->tag, "Free label [A-Za-z0-9._-]");
  cmd->add_option("--run-id", c->run_id, "Choose the run id; submitting it again returns the existing run");
  cmd->add_flag("--wait", c->wait, "Follow the run to its end; print its final JSON");
  cmd->add_flag("-q,--quiet", c->quiet,
                "Print only the run id (with --wait: no progress; exit 0 when the run ended ok, 1 otherwise)");
  return cmd;
}

CapturedSubmit*& SubmitCapture() {
  static CapturedSubmit* capture = nullptr;
  return capture;
}

void SubmitAndMaybeWait(const SubmitCommon& c, const std::string& kind, json spec, bool manifest) {
  if (!c.machine.empty()) spec["machine"] = c.machine;
  if (!c.tag.empty()) spec["tag"] = c.tag;
  if (CapturedSubmit* cap = SubmitCapture()) {
    *cap = {kind, std::move(spec), true};
    return;
  }
  json args = {{"kind", kind}, {"spec", spec}};
  if (!c.run_id.empty()) args["run_id"] = c.run_id;
  Client client(c.addr);
  auto r = client.Call("submit", args);
  if (!r.ok()) return Fail(2, r.status().message());
  if (!r->ok()) return Fail(r->exit_code() ? r->exit_code() : 2, r->error());
  Result<json> parsed = ParseJson(r->body_json(), kMaxOwnJsonDepth);
  if (!parsed.ok()) return Fail(2, "the server's answer cannot be read: " + parsed.status().message());
  const json& body = *parsed;
  const std::string run_id = body.value("run_id", "");
  if (!c.wait) {
    if (c.quiet) std::cout << run_id << std::endl;
    else PrintJson(body);
    return;
  }
  if (!c.quiet) std::cerr << "npuprof: run " << run_id << " submitted" << std::endl;
  WaitForRun(client, run_id, manifest, c.quiet);
}

void AddSubmitProbe(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto threshold = std::make_shared<int64_t>(4096);
  auto* cmd = AddSubmitKind(submit, "probe",
                            "Run `npu-smi info` on a machine: devices, HBM, processes, free/busy NPUs", c.get());
  cmd->add_option("--busy-threshold-mb", *threshold,
                  "A device with at least this much HBM used and no process listed counts as busy");
  cmd->callback([c, threshold] { SubmitAndMaybeWait(*c, "probe", json{{"busy_threshold_mb", *threshold}}, false); });
}

void AddSubmitCommand(CLI::App& app) {
  auto* submit = app.add_subcommand("submit", "Submit a run");
  submit->require_subcommand(1);
  AddSubmitProbe(submit);
  AddSubmitServe(submit);
  AddSubmitTorchProfile(submit);
  AddSubmitMemoryProfile(submit);
  AddSubmitSweep(submit);
}

}  // namespace npuprof::cli
