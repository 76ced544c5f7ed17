// `npuprof machine add|list|show|remove|check`: the machine inventory, kept as events.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"

namespace npuprof::cli {

namespace {

std::string AbsPath(const std::string& p) {
  if (p.empty()) return p;
  return std::filesystem::absolute(p).lexically_normal().string();
}

}  // namespace

void AddMachineCommand(CLI::App& app) {
  auto* machine = app.add_subcommand("machine", "Manage the machines runs can target");
  machine->require_subcommand(1);
  {
    auto* cmd = machine->add_subcommand("add", "Add a machine reached over SSH");
    struct Opts {
      ServerAddress addr;
      std::string name, host, user, identity, known_hosts, env_script, runtime_base, cluster_address;
      int port = 22;
      int npu_smi_timeout_s = 0;
      bool accept_new = false;
    };
    auto o = std::make_shared<Opts>();
    AddServerOptions(cmd, &o->addr);
    cmd->add_option("NAME", o->name, "Machine name [A-Za-z0-9._-]")->required();
    cmd->add_option("--host", o->host, "Host name or address")->required();
    cmd->add_option("--port", o->port, "SSH port")->check(CLI::Range(1, 65535));
    cmd->add_option("--user", o->user, "SSH user")->required();
    cmd->add_option("--identity", o->identity, "Private key file (public-key auth)")->required();
    cmd->add_option("--known-hosts", o->known_hosts, "known_hosts file to verify the host key (default ~/.ssh/known_hosts)");
    cmd->add_option("--env-script", o->env_script, "Script sourced before every remote command (e.g. Ascend set_env.sh)");
    cmd->add_option("--runtime-base", o->runtime_base, "Remote directory under which runtime dirs are made, absolute or '~/...' (the SSH user's home "
                    "on the target; quote it). Default ~/.cache/npuprof/runtime. Its dirs are made 0700; one owned "
                    "by another user, group/world-writable or a symbolic link is refused");
    cmd->add_option("--cluster-address", o->cluster_address,
                    "Address the other machines of a multi-node deployment reach this one at (its cluster "
                    "network); default: --host");
    cmd->add_option("--npu-smi-timeout", o->npu_smi_timeout_s,
                    "Seconds one `npu-smi info` on this machine may take before its task fails saying it timed "
                    "out (1..50; default 45)")
        ->check(CLI::Range(1, 50));
    cmd->add_flag("--accept-new-host-key", o->accept_new,
                  "Trust the host key seen on first connection and add it to known_hosts (recorded)");
    cmd->callback([o] {
      std::string kh = o->known_hosts;
      if (kh.empty()) {
        const char* home = std::getenv("HOME");
        kh = std::string(home ? home : "/root") + "/.ssh/known_hosts";
      }
      json rec = {{"name", o->name},
                  {"host", o->host},
                  {"port", o->port},
                  {"user", o->user},
                  {"identity_file", AbsPath(o->identity)},
                  {"known_hosts_file", AbsPath(kh)},
                  {"env_script", o->env_script},
                  {"runtime_base", o->runtime_base},
                  {"accept_new_host_key", o->accept_new}};
      if (!o->cluster_address.empty()) rec["cluster_address"] = o->cluster_address;
      if (o->npu_smi_timeout_s > 0) rec["npu_smi_timeout_s"] = o->npu_smi_timeout_s;
      if (!std::filesystem::exists(rec["identity_file"].get<std::string>()))
        return Fail(2, "identity: no such file " + rec["identity_file"].get<std::string>());
      Client client(o->addr);
      auto r = client.CallJson("machine.add", rec);
      if (!r.ok()) return Fail(2, r.status().message());
      PrintJson(*r);
    });
  }
  {
    auto* cmd = machine->add_subcommand("list", "List machines");
    auto addr = std::make_shared<ServerAddress>();
    AddServerOptions(cmd, addr.get());
    cmd->callback([addr] {
      Client client(*addr);
      auto r = client.CallJson("machine.list", json::object());
      if (!r.ok()) return Fail(2, r.status().message());
      PrintJson(*r);
    });
  }
  for (const auto& [verb, help] : std::vector<std::pair<std::string, std::string>>{
           {"show", "Show one machine"}, {"remove", "Remove a machine from the inventory"}}) {
    auto* cmd = machine->add_subcommand(verb, help);
    auto addr = std::make_shared<ServerAddress>();
    auto name = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("NAME", *name, "Machine name")->required();
    cmd->callback([addr, name, v = verb] {
      Client client(*addr);
      auto r = client.CallJson("machine." + v, json{{"name", *name}});
      if (!r.ok()) return Fail(2, r.status().message());
      PrintJson(*r);
    });
  }
  {
    auto* cmd = machine->add_subcommand(
        "check", "Connect, verify the host key, report uname and whether npu-smi, msprof and python3 are present");
    auto addr = std::make_shared<ServerAddress>();
    auto name = std::make_shared<std::string>();
    AddServerOptions(cmd, addr.get());
    cmd->add_option("NAME", *name, "Machine name")->required();
    cmd->callback([addr, name] {
      Client client(*addr);
      auto r = client.CallJson("submit", json{{"kind", "machine-check"}, {"spec", {{"machine", *name}}}});
      if (!r.ok()) return Fail(2, r.status().message());
      WaitForRun(client, r->value("run_id", ""), false);
    });
  }
}

}  // namespace npuprof::cli
