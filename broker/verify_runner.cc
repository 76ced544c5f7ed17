#include "broker/verify_runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "statemachine/device_lease.h"
#include "statemachine/launch_audit.h"
#include "statemachine/machine_inventory.h"
#include "statemachine/replay_verifier.h"

namespace npuprof::broker {

using json = nlohmann::json;

namespace {

std::string Hash(const proto::Event& e) { return store::EventHash(e); }

json VerifyOneRun(const std::string& id, const VerifyJob& job, const store::EventStore& store,
                  const sm::KindRegistry& kinds) {
  json row = {{"run_id", id}};
  // The index row first: it is written in the same batch as the events it
  // describes, so it is checked against the prefix it was written with.
  const std::optional<proto::RunIndexRow> idx = store.GetRun(id);
  auto evs = store.ReadRun(id);
  if (!evs.ok()) {
    row["ok"] = false;
    row["error"] = evs.status().ToString();
    return row;
  }
  const auto served = job.served.find(id);
  if (served != job.served.end() && served->second.last_seq < evs->size())
    evs->resize(served->second.last_seq);  // judged as served; what came later is the next verify's
  auto vr = sm::VerifyRunEvents(kinds, *evs, Hash);
  row["events"] = vr.events;
  const sm::RunKind* k = vr.ok ? kinds.Find(vr.state.kind) : nullptr;
  if (vr.ok && k && served != job.served.end()) {
    // The projections served must equal the fold from scratch, byte for byte.
    // A kind that cannot project the folded state fails this run's row.
    try {
      if (k->Manifest(vr.state).dump() != served->second.manifest) {
        vr.ok = false;
        vr.first_divergence = "the manifest folded from the events differs from the one served";
      } else if (k->Summary(vr.state).dump() != served->second.summary) {
        vr.ok = false;
        vr.first_divergence = "the summary folded from the events differs from the one served";
      }
    } catch (const std::exception& e) {
      vr.ok = false;
      vr.first_divergence = std::string("the run's projections cannot be built from its events: ") + e.what();
    }
  }
  if (vr.ok && k) {
    // The service ran as the spec says: the managed values of the argv read
    // back from the target's launch record, and the leased devices.
    std::vector<std::string> disagree;
    try {
      disagree = sm::LaunchDisagreements(*k, vr.state);
    } catch (const std::exception& e) {  // a kind that cannot read the folded state: this run's row
      disagree.push_back(std::string("its launch cannot be judged: ") + e.what());
    }
    if (!disagree.empty()) {
      vr.ok = false;
      std::string all;
      for (const auto& d : disagree) all += (all.empty() ? "" : "; ") + d;
      vr.first_divergence = "the service that ran disagrees with the run's spec: " + all;
    }
  }
  if (vr.ok && k && idx) {
    if (std::string why = sm::IndexRowDivergence(*k, *idx, vr.state, evs->size()); !why.empty()) {
      vr.ok = false;
      vr.first_divergence = std::move(why);
    }
  }
  row["ok"] = vr.ok;
  row["error"] = vr.ok ? json(nullptr) : json(vr.first_divergence);
  return row;
}

}  // namespace

VerifyAnswer RunVerifyJob(const VerifyJob& job, const store::EventStore& store, const sm::KindRegistry& kinds,
                          const std::atomic<bool>& stop) {
  VerifyAnswer a;
  a.identity = job.identity;
  json results = json::array();
  bool all_ok = true;
  std::vector<std::string> ids;
  if (!job.only.empty()) {
    ids.push_back(job.only);
  } else {
    for (const auto& row : store.ListRuns()) ids.push_back(row.run_id());
    auto evs = store.ReadRun(sm::kMachinesStream);
    if (evs.ok() && !evs->empty()) {
      auto vr = sm::VerifyChainOnly(*evs, Hash);
      all_ok = all_ok && vr.ok;
      results.push_back({{"run_id", sm::kMachinesStream}, {"ok", vr.ok}, {"events", vr.events},
                         {"error", vr.ok ? json(nullptr) : json(vr.first_divergence)}});
    }
  }
  for (const auto& id : ids) {
    if (stop.load()) {
      a.body = {{"ok", false}, {"error", "the server is stopping; verify was cut short"}};
      return a;
    }
    json row = VerifyOneRun(id, job, store, kinds);
    all_ok = all_ok && row["ok"].get<bool>();
    results.push_back(std::move(row));
  }
  json out = {{"ok", all_ok}, {"checked", results.size()}, {"runs", std::move(results)}};
  if (job.only.empty()) {
    // Across runs: no device was ever leased to two runs at once.
    std::vector<proto::Event> lease_events;
    (void)store.ScanGlobal(1, [&](const proto::Event& e) {
      if (e.type() == sm::kDevicesLeased || e.type() == sm::kDevicesReleased) lease_events.push_back(e);
      return !stop.load();
    });
    const std::string clash = sm::FindDoubleLease(lease_events);
    out["lease_audit"] = {{"ok", clash.empty()}, {"lease_events", lease_events.size()},
                          {"error", clash.empty() ? json(nullptr) : json(clash)}};
    if (!clash.empty()) all_ok = false;
    out["ok"] = all_ok;
  }
  a.ok = all_ok;
  a.body = std::move(out);
  return a;
}

VerifyRunner::VerifyRunner(zmq::context_t& ctx, std::string wake_endpoint, const store::EventStore& store,
                           const sm::KindRegistry& kinds)
    : ctx_(ctx), wake_endpoint_(std::move(wake_endpoint)), store_(store), kinds_(kinds), thread_([this] { Loop(); }) {}

VerifyRunner::~VerifyRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void VerifyRunner::Submit(VerifyJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

std::vector<VerifyAnswer> VerifyRunner::TakeDone() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<VerifyAnswer> out;
  out.swap(done_);
  return out;
}

void VerifyRunner::Loop() {
  zmq::socket_t wake(ctx_, zmq::socket_type::push);
  wake.set(zmq::sockopt::linger, 0);
  wake.connect(wake_endpoint_);
  while (true) {
    VerifyJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_.load() || !jobs_.empty(); });
      if (stop_.load()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    VerifyAnswer answer;
    try {
      answer = RunVerifyJob(job, store_, kinds_, stop_);
    } catch (const std::exception& e) {  // a kind's projection that throws: this verify fails, nothing else
      answer.identity = job.identity;
      answer.body = {{"ok", false}, {"error", std::string("verify failed: ") + e.what()}};
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back(std::move(answer));
    }
    try {
      wake.send(zmq::message_t(), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::warn("verify: cannot wake the loop: {}", e.what());
    }
  }
}

}  // namespace npuprof::broker
