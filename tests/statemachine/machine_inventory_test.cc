// The machine inventory: validation of `machine add`, and the fold of
// MachineAdded / MachineRemoved / MachineHostKeyAccepted.
#include <gtest/gtest.h>

#include "npuprof.pb.h"
#include "statemachine/machine_inventory.h"

namespace npuprof::sm {
namespace {

json GoodRecord(const std::string& name = "sim1") {
  return json{{"name", name},
              {"host", "127.0.0.1"},
              {"user", "tester"},
              {"identity_file", "/home/tester/.ssh/id_ed25519"},
              {"known_hosts_file", "/home/tester/.ssh/known_hosts"}};
}

TEST(MachineInventoryValidate, GoodRecordGetsDefaults) {
  json rec = GoodRecord();
  ASSERT_TRUE(MachineInventory::ValidateAdd(rec).ok());
  EXPECT_EQ(rec["port"], 22);
  EXPECT_EQ(rec["env_script"], "");
  EXPECT_EQ(rec["runtime_base"], "~/.cache/npuprof/runtime");
  EXPECT_EQ(rec["accept_new_host_key"], false);
  json full = GoodRecord();
  full["port"] = 2222;
  full["env_script"] = "/usr/local/Ascend/ascend-toolkit/set_env.sh";
  full["runtime_base"] = "/data/npuprof";
  full["accept_new_host_key"] = true;
  full["host"] = "npu-01.example.com";
  ASSERT_TRUE(MachineInventory::ValidateAdd(full).ok());
  EXPECT_EQ(full["port"], 2222);
  EXPECT_EQ(full["runtime_base"], "/data/npuprof");
  json home = GoodRecord();
  home["runtime_base"] = "~/npuprof-rt";
  ASSERT_TRUE(MachineInventory::ValidateAdd(home).ok());
  EXPECT_EQ(home["runtime_base"], "~/npuprof-rt");
}

struct Bad {
  const char* field;
  json value;  // null = remove the field
};

TEST(MachineInventoryValidate, AnNpuSmiTimeoutIsKeptInsideItsTasksLease) {
  json rec = GoodRecord();
  ASSERT_TRUE(MachineInventory::ValidateAdd(rec).ok());
  EXPECT_FALSE(rec.contains("npu_smi_timeout_s")) << "absent when not given: the workers' 45 s";
  rec = GoodRecord();
  rec["npu_smi_timeout_s"] = 20;
  ASSERT_TRUE(MachineInventory::ValidateAdd(rec).ok());
  EXPECT_EQ(rec["npu_smi_timeout_s"], 20);
  for (const json& bad : {json(0), json(51), json("20"), json(2.5)}) {
    json r = GoodRecord();
    r["npu_smi_timeout_s"] = bad;
    const Status st = MachineInventory::ValidateAdd(r);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("--npu-smi-timeout takes 1..50 seconds"), std::string::npos) << st.message();
  }
}

TEST(MachineInventoryValidate, ErrorsNameTheField) {
  const std::vector<Bad> cases = {
      {"name", nullptr},
      {"name", "bad/name"},
      {"name", "a b"},
      {"host", nullptr},
      {"host", "evil;rm -rf /"},
      {"user", nullptr},
      {"user", "us er"},
      {"identity_file", nullptr},
      {"identity_file", "relative/key"},
      {"known_hosts_file", nullptr},
      {"known_hosts_file", "known_hosts"},
      {"port", 0},
      {"port", 70000},
      {"port", "22"},
      {"env_script", "set_env.sh"},
      {"runtime_base", "tmp/x"},
      {"runtime_base", "~bob/x"},
  };
  for (const auto& c : cases) {
    json rec = GoodRecord();
    if (c.value.is_null()) rec.erase(c.field);
    else rec[c.field] = c.value;
    Status st = MachineInventory::ValidateAdd(rec);
    ASSERT_FALSE(st.ok()) << c.field << "=" << c.value.dump();
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(c.field), std::string::npos)
        << c.field << "=" << c.value.dump() << ": " << st.message();
  }
  json rec = GoodRecord();
  rec["accept_new_host_key"] = "yes";
  Status st = MachineInventory::ValidateAdd(rec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("accept_new_host_key"), std::string::npos) << st.message();
  // The record goes into every task's payload (tasks.Machine): an undeclared
  // key would make every task for the machine unsendable.
  rec = GoodRecord();
  rec["identity"] = "/k";
  st = MachineInventory::ValidateAdd(rec);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("identity"), std::string::npos) << st.message();
  rec = GoodRecord();
  rec["accepted_host_key"] = "SHA256:x";
  st = MachineInventory::ValidateAdd(rec);
  EXPECT_NE(st.message().find("recorded by npuprof"), std::string::npos) << st.message();
}

proto::Event Stored(uint64_t seq, const std::string& type, const json& payload) {
  proto::Event e;
  e.set_run_id(kMachinesStream);
  e.set_seq(seq);
  e.set_type(type);
  e.set_payload_json(payload.dump());
  return e;
}

TEST(MachineInventoryFold, AddRemoveAndHostKey) {
  MachineInventory inv;
  json a = GoodRecord("zeta"), b = GoodRecord("alpha");
  ASSERT_TRUE(MachineInventory::ValidateAdd(a).ok());
  ASSERT_TRUE(MachineInventory::ValidateAdd(b).ok());
  inv.ApplyStored(Stored(1, kMachineAdded, a));
  inv.ApplyStored(Stored(2, kMachineAdded, b));
  EXPECT_EQ(inv.last_seq(), 2u);
  json list = inv.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "alpha");  // by name
  EXPECT_EQ(list[1]["name"], "zeta");
  ASSERT_TRUE(inv.Find("zeta").has_value());
  EXPECT_EQ((*inv.Find("zeta"))["host"], "127.0.0.1");
  EXPECT_FALSE(inv.Find("nope").has_value());

  inv.ApplyStored(Stored(3, kMachineHostKeyAccepted, json{{"name", "zeta"}, {"fingerprint", "SHA256:abc"}}));
  EXPECT_EQ((*inv.Find("zeta"))["accepted_host_key"], "SHA256:abc");
  // A host key for a machine that is gone (or never was) changes nothing.
  inv.ApplyStored(Stored(4, kMachineHostKeyAccepted, json{{"name", "ghost"}, {"fingerprint", "SHA256:x"}}));
  EXPECT_FALSE(inv.Find("ghost").has_value());

  inv.ApplyStored(Stored(5, kMachineRemoved, json{{"name", "zeta"}}));
  EXPECT_FALSE(inv.Find("zeta").has_value());
  EXPECT_EQ(inv.List().size(), 1u);
  inv.ApplyStored(Stored(6, kMachineRemoved, json{{"name", "never-added"}}));
  EXPECT_EQ(inv.List().size(), 1u);
  EXPECT_EQ(inv.last_seq(), 6u);

  // Re-adding after a remove gives the new record.
  json a2 = GoodRecord("zeta");
  a2["port"] = 2200;
  inv.ApplyStored(Stored(7, kMachineAdded, a2));
  EXPECT_EQ((*inv.Find("zeta"))["port"], 2200);
  EXPECT_FALSE((*inv.Find("zeta")).contains("accepted_host_key"));
}

TEST(MachineInventoryHostKey, AnAcceptanceIsRecordedOnlyForAnAcceptNewMachineAndOnlyOnce) {
  MachineInventory inv;
  json strict = GoodRecord("strict");
  json open = GoodRecord("open");
  open["accept_new_host_key"] = true;
  ASSERT_TRUE(MachineInventory::ValidateAdd(strict).ok());
  ASSERT_TRUE(MachineInventory::ValidateAdd(open).ok());
  inv.Apply(kMachineAdded, strict);
  inv.Apply(kMachineAdded, open);
  auto report = [](const json& machine, const json& fp) {
    return json{{"ok", true}, {"host_key_accepted", {{"machine", machine}, {"fingerprint", fp}}}};
  };
  auto ev = inv.HostKeyAcceptance(report("open", "SHA256:abc"), "r1");
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(*ev, (json{{"name", "open"}, {"fingerprint", "SHA256:abc"}, {"run_id", "r1"}}));
  inv.Apply(kMachineHostKeyAccepted, *ev);
  EXPECT_FALSE(inv.HostKeyAcceptance(report("open", "SHA256:abc"), "r2").has_value()) << "already recorded";
  EXPECT_FALSE(inv.HostKeyAcceptance(report("strict", "SHA256:abc"), "r1").has_value()) << "strict machine";
  EXPECT_FALSE(inv.HostKeyAcceptance(report("ghost", "SHA256:abc"), "r1").has_value()) << "not in the inventory";
  EXPECT_FALSE(inv.HostKeyAcceptance(report(7, "SHA256:abc"), "r1").has_value()) << "malformed";
  EXPECT_FALSE(inv.HostKeyAcceptance(report("open", ""), "r1").has_value()) << "no fingerprint";
  EXPECT_FALSE(inv.HostKeyAcceptance(json{{"host_key_accepted", "yes"}}, "r1").has_value());
  EXPECT_FALSE(inv.HostKeyAcceptance(json{{"ok", true}}, "r1").has_value());
  EXPECT_FALSE(inv.HostKeyAcceptance(json(nullptr), "r1").has_value());
}

TEST(MachineInventoryFold, ReplayIsDeterministic) {
  std::vector<proto::Event> evs = {Stored(1, kMachineAdded, GoodRecord("m1")), Stored(2, kMachineAdded, GoodRecord("m2")),
                                   Stored(3, kMachineRemoved, json{{"name", "m1"}}),
                                   Stored(4, kMachineHostKeyAccepted, json{{"name", "m2"}, {"fingerprint", "f"}})};
  MachineInventory x, y;
  for (const auto& e : evs) x.ApplyStored(e);
  for (const auto& e : evs) y.ApplyStored(e);
  EXPECT_EQ(x.List().dump(), y.List().dump());
  EXPECT_EQ(x.List().size(), 1u);
  // An unparseable payload is skipped, not fatal.
  proto::Event junk = Stored(5, kMachineAdded, json::object());
  junk.set_payload_json("{not json");
  x.ApplyStored(junk);
  EXPECT_EQ(x.List().dump(), y.List().dump());
}

}  // namespace
}  // namespace npuprof::sm
