#include "statemachine/machine_inventory.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "statemachine/json_message_table.h"
#include "statemachine/service_spec.h"
#include "task_payloads.pb.h"
#include "statemachine/spec_checks.h"

namespace npuprof::sm {

void MachineInventory::Apply(const std::string& type, const json& p) {
  const std::string name = p.value("name", "");
  if (type == kMachineAdded) {
    machines_[name] = p;
  } else if (type == kMachineRemoved) {
    machines_.erase(name);
  } else if (type == kMachineHostKeyAccepted) {
    auto it = machines_.find(name);
    if (it != machines_.end()) it->second["accepted_host_key"] = p.value("fingerprint", "");
  }
}

void MachineInventory::ApplyStored(const proto::Event& ev) {
  last_seq_ = ev.seq();  // even for a payload that does not decode: the next append follows it
  Result<json> p = ParseJson(ev.payload_json(), kMaxOwnJsonDepth);
  if (!p.ok() || !p->is_object()) return;
  Apply(ev.type(), *p);
}

std::optional<json> MachineInventory::HostKeyAcceptance(const json& result, const std::string& run_id) const {
  if (!result.is_object() || !result.contains("host_key_accepted")) return std::nullopt;
  const json& acc = result["host_key_accepted"];
  if (!acc.is_object() || !acc.contains("machine") || !acc["machine"].is_string() || !acc.contains("fingerprint") ||
      !acc["fingerprint"].is_string() || acc["fingerprint"].get<std::string>().empty())
    return std::nullopt;
  const std::string name = acc["machine"].get<std::string>();
  const std::string fp = acc["fingerprint"].get<std::string>();
  auto it = machines_.find(name);
  if (it == machines_.end()) return std::nullopt;
  const json& rec = it->second;
  const json accept_new = rec.value("accept_new_host_key", json(false));
  if (!accept_new.is_boolean() || !accept_new.get<bool>()) return std::nullopt;
  const json known = rec.value("accepted_host_key", json(""));
  if (known.is_string() && known.get<std::string>() == fp) return std::nullopt;
  return json{{"name", name}, {"fingerprint", fp}, {"run_id", run_id}};
}

std::optional<json> MachineInventory::Find(const std::string& name) const {
  auto it = machines_.find(name);
  if (it == machines_.end()) return std::nullopt;
  return it->second;
}

json MachineInventory::List() const {
  json out = json::array();
  for (const auto& [n, rec] : machines_) out.push_back(rec);
  return out;
}

namespace {

Status RequireString(const json& rec, const char* field, const char* fix) {
  if (!rec.contains(field) || !rec[field].is_string() || rec[field].get<std::string>().empty())
    return Status::Invalid(fmt::format("{} is required: {}", field, fix));
  return Status::Ok();
}

// A host name or an IPv4/IPv6 address: [A-Za-z0-9.:_-], 1..253 characters, not starting with '-'.
bool IsHostName(const std::string& host) {
  if (host.empty() || host.size() > 253 || host[0] == '-') return false;
  return std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '_';
  });
}

Status RequireAbsolutePath(const json& rec, const char* field) {
  const std::string v = rec.value(field, "");
  if (v.empty() || v[0] != '/')
    return Status::Invalid(fmt::format("{} must be an absolute path (got '{}')", field, v));
  return Status::Ok();
}

}  // namespace

Status MachineInventory::ValidateAdd(json& rec) {
  if (Status s = RequireSafeName(rec, "name", true); !s.ok()) return s;
  if (Status s = RequireString(rec, "host", "pass --host HOST"); !s.ok()) return s;
  if (Status s = RequireString(rec, "user", "pass --user USER"); !s.ok()) return s;
  if (Status s = RequireString(rec, "identity_file", "pass --identity PATH_TO_PRIVATE_KEY"); !s.ok()) return s;
  if (Status s = RequireAbsolutePath(rec, "identity_file"); !s.ok()) return s;
  if (Status s = RequireString(rec, "known_hosts_file", "pass --known-hosts FILE"); !s.ok()) return s;
  if (Status s = RequireAbsolutePath(rec, "known_hosts_file"); !s.ok()) return s;
  if (Status s = CheckIntRange(rec, "port", 22, 1, 65535); !s.ok()) return s;
  if (!IsHostName(rec["host"].get<std::string>()))
    return Status::Invalid(fmt::format("host '{}' is not a host name or address", rec["host"].get<std::string>()));
  const std::string user = rec["user"];
  if (!IsSafeName(user)) return Status::Invalid(fmt::format("user '{}' is not a valid user name", user));
  if (!rec.contains("env_script") || rec["env_script"].is_null()) rec["env_script"] = "";
  if (!rec["env_script"].get<std::string>().empty())
    if (Status s = RequireAbsolutePath(rec, "env_script"); !s.ok()) return s;
  // Default under the SSH user's home ("~/" is resolved on the target by the worker).
  if (!rec.contains("runtime_base") || rec["runtime_base"].is_null() || rec["runtime_base"] == "")
    rec["runtime_base"] = kDefaultRuntimeBase;
  const std::string base = rec["runtime_base"].is_string() ? rec["runtime_base"].get<std::string>() : "";
  const bool control = std::any_of(base.begin(), base.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  if ((base.rfind("~/", 0) != 0 && base.rfind('/', 0) != 0) || control)
    return Status::Invalid(fmt::format(
        "runtime_base must be an absolute path or one under the SSH user's home ('~/dir', quoted so the local "
        "shell keeps the ~), on one line (got {})",
        rec["runtime_base"].dump()));
  // The address the other nodes of a multi-node deployment reach this
  // machine at; absent or "" = its SSH host (not stored then).
  if (rec.contains("cluster_address") && (rec["cluster_address"].is_null() || rec["cluster_address"] == ""))
    rec.erase("cluster_address");
  if (rec.contains("cluster_address")) {
    const json& a = rec["cluster_address"];
    if (!a.is_string() || !IsHostName(a.get<std::string>()))
      return Status::Invalid(fmt::format("cluster_address {} is not a host name or address (--cluster-address "
                                         "HOST: the address the other nodes of a deployment reach this machine at)",
                                         a.dump()));
  }
  // How long one `npu-smi info` may take; absent = the workers' 45 s (not
  // stored then). At most 50 s: inside the 60 s lease of the tasks that run it.
  if (rec.contains("npu_smi_timeout_s") && rec["npu_smi_timeout_s"].is_null()) rec.erase("npu_smi_timeout_s");
  if (rec.contains("npu_smi_timeout_s")) {
    const json& t = rec["npu_smi_timeout_s"];
    if (!t.is_number_integer() || t.get<int64_t>() < 1 || t.get<int64_t>() > 50)
      return Status::Invalid(fmt::format("npu_smi_timeout_s {} is out of range: --npu-smi-timeout takes 1..50 seconds "
                                         "(an npu-smi answer must reach the broker inside its task's 60 s lease)",
                                         t.dump()));
  }
  if (!rec.contains("accept_new_host_key")) rec["accept_new_host_key"] = false;
  if (!rec["accept_new_host_key"].is_boolean())
    return Status::Invalid("accept_new_host_key must be true or false");
  // The record travels in every task's payload as tasks.Machine: a key that
  // message does not declare would make every task for it unsendable.
  if (rec.contains("accepted_host_key"))
    return Status::Invalid("accepted_host_key is recorded by npuprof on first contact, not given: leave it out");
  tasks::Machine machine;
  if (auto why = JsonMessageTable::Parse(rec.dump(-1, ' ', false, json::error_handler_t::replace), machine,
                                         /*tolerate_unknown_keys=*/false))
    return Status::Invalid(fmt::format("machine record does not match proto/task_payloads.proto Machine: {}", *why));
  return Status::Ok();
}

}  // namespace npuprof::sm
