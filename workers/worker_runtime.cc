#include "workers/worker_runtime.h"

#include <cerrno>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/socket_security.h"
#include "common/time_util.h"
#include "common/utf8.h"
#include "proto/wire.h"
#include "statemachine/task_schema.h"
#include "workers/fault_injection.h"
#include "workers/result_cap.h"
#include "workers/shown_text.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::workers {

namespace {

struct Running {
  std::string task_id;
  uint32_t attempt = 0;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> done{false};  // set last by the pool thread; the loop then forgets the entry
};

// A task waiting for (or taken by) a pool thread.
struct Job {
  proto::Task task;
  Running* run = nullptr;
  TaskHandler handler;  // empty: no handler for the kind
};

}  // namespace

struct WorkerRuntime::Impl {
  WorkerOptions opts;
  std::map<std::string, TaskHandler> handlers;
  // Warms a spare connection beside a long call (ssh_pool.h): the call beside
  // it then pays no handshake on its path.
  ssh::SshPool pool{ssh::SshPool::Options{.warm_spare = true}};
  zmq::context_t ctx{1};
  std::mutex mu;                                 // guards outbox
  std::deque<proto::WorkerToBroker> outbox;      // results and progress from task threads
  std::list<std::unique_ptr<Running>> running;   // owned by the loop thread

  // Task threads: a pool that grows to the most tasks ever running at once
  // and is joined when Run ends (a thread per task cost more than a no-op
  // task itself).
  std::mutex job_mu;                             // guards jobs, idle, closing
  std::condition_variable job_cv;
  std::deque<Job> jobs;
  int idle = 0;                                  // pool threads waiting for a job
  bool closing = false;                          // Run is ending: drain jobs, then exit
  std::vector<std::thread> pool_threads;         // started and joined by the loop thread
  // Written by Post so that the loop, polling it next to the DEALER socket,
  // sends a result the moment a task thread posts it.
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

  Impl() = default;
  ~Impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Wake() {
    if (wake_fd < 0) return;
    const uint64_t one = 1;
    const ssize_t n = ::write(wake_fd, &one, sizeof(one));
    (void)n;  // EAGAIN: the counter is already non-zero, the loop wakes anyway
  }
  void DrainWake() {
    if (wake_fd < 0) return;
    uint64_t v = 0;
    const ssize_t n = ::read(wake_fd, &v, sizeof(v));
    (void)n;  // EAGAIN: nothing to drain
  }

  void Send(zmq::socket_t& sock, const proto::WorkerToBroker& msg) {
    const std::string body = msg.SerializeAsString();
    try {
      wire::SendFrames(sock, {wire::kWorkerHeader, body});
    } catch (const zmq::error_t& e) {
      spdlog::warn("send to broker failed: {}", e.what());
    }
  }

  void Post(proto::WorkerToBroker msg) {
    {
      std::lock_guard<std::mutex> lock(mu);
      outbox.push_back(std::move(msg));
    }
    Wake();
  }

  void Start(const proto::Task& task) {
    auto run = std::make_unique<Running>();
    run->task_id = task.task_id();
    run->attempt = task.attempt();
    auto it = handlers.find(task.kind());
    {
      std::lock_guard<std::mutex> lock(job_mu);
      jobs.push_back(Job{task, run.get(), it == handlers.end() ? TaskHandler{} : it->second});
      // Every task starts at once, as with a thread per task: a new thread
      // only when no idle one is left (the broker sends at most capacity
      // tasks, but after a reconnect old tasks may still be running).
      if (jobs.size() > static_cast<size_t>(idle)) pool_threads.emplace_back([this] { PoolLoop(); });
    }
    job_cv.notify_one();
    running.push_back(std::move(run));
  }

  void PoolLoop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(job_mu);
        ++idle;
        job_cv.wait(lock, [this] { return closing || !jobs.empty(); });
        --idle;
        if (jobs.empty()) return;  // closing, and every queued task ran
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      RunJob(job);
    }
  }

  // Ends every pool thread once the queued tasks ran (Run marked them cancelled).
  void StopPool() {
    {
      std::lock_guard<std::mutex> lock(job_mu);
      closing = true;
    }
    job_cv.notify_all();
    for (auto& t : pool_threads) t.join();
    pool_threads.clear();
    closing = false;
  }

  void RunJob(const Job& job) {
    const proto::Task& task = job.task;
    Running* r = job.run;
    const TaskHandler& handler = job.handler;
    {
      // The SSH work of this attempt (on this thread and the sessions it
      // creates): sent with its answer (TaskResult.link) and logged.
      ssh::SshStatsScope ssh_scope;
      const auto started = std::chrono::steady_clock::now();
      TaskOutcome out;
      if (!handler) {
        out = TaskOutcome::Failure("unknown_task_kind", "this worker has no handler for " + task.kind(), false);
      } else {
        TaskContext ctx{pool,
                        [this, &task](const std::string& m) {
                          proto::WorkerToBroker p;
                          p.mutable_progress()->set_task_id(task.task_id());
                          p.mutable_progress()->set_attempt(task.attempt());
                          p.mutable_progress()->set_message(ToValidUtf8(m));
                          Post(std::move(p));
                        },
                        r->cancelled};
        try {
          out = handler(task, ctx);
        } catch (const std::exception& e) {
          out = TaskOutcome::Failure("handler_exception", e.what(), false);
        }
        // The handler's answer is held to its result message: a key the
        // message does not declare is a bug here, not something for the
        // machine to guess at.
        if (Status bad = sm::CheckTaskResult(task.kind(), out.result); !bad.ok()) {
          spdlog::error("task {} ({}): {}", task.task_id(), task.kind(), bad.message());
          out = TaskOutcome::Failure("bad_result", bad.message(), false);
        }
      }
      proto::WorkerToBroker msg;
      proto::TaskResult* res = msg.mutable_result();
      res->set_task_id(task.task_id());
      res->set_run_id(task.run_id());
      res->set_attempt(task.attempt());
      res->set_ok(out.ok);
      res->set_retryable(out.retryable);
      // Text fields as valid UTF-8 (shown_text.h); blob bytes as they are.
      res->set_error(ToValidUtf8(out.error));
      res->set_error_kind(ToValidUtf8(out.error_kind));
      res->set_result_json(ResultJsonText(out.result));
      for (auto& [name, data] : out.blobs) {
        auto* b = res->add_blobs();
        b->set_name(ToValidUtf8(name));
        b->set_data(data);
      }
      // The attempt's link figures (ssh_stats.h): recorded with its answer.
      const ssh::SshStats link = ssh_scope.totals();
      events::TaskLink l;
      l.set_round_trips(link.round_trips);
      l.set_commands(link.commands);
      l.set_sftp_ops(link.sftp_ops);
      l.set_http_requests(link.forward_channels);
      l.set_channel_opens(link.exec_channels + link.shell_channels + link.forward_channels + link.sftp_sessions);
      l.set_handshakes(link.handshakes);
      l.set_bytes_out(link.wire_out);
      l.set_bytes_in(link.wire_in);
      l.set_link_ms(link.busy_us / 1000);
      FitResultToMessageCap(res);  // the broker would drop a larger frame (the figures are some 40 bytes)
      *res->mutable_link() = l;
      if (!out.ok) spdlog::warn("task {} attempt {} failed: {}: {}", task.task_id(), task.attempt(), res->error_kind(), res->error());
      if (spdlog::should_log(spdlog::level::info)) {  // the arguments cost a format and a stats walk
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
        const ssh::SshStats proc = ssh::ProcessSshStats();
        spdlog::info("task_stats run={} task={} kind={} attempt={} ok={} handler_ms={} {} worker_pid={} worker_handshakes={} "
                     "worker_sessions={}",
                     task.run_id(), task.task_id(), task.kind(), task.attempt(), out.ok ? 1 : 0, ms.count(),
                     ssh::FormatSshStats(ssh_scope.totals()), ::getpid(), proc.handshakes, pool.sessions());
      }
      Post(std::move(msg));
    }
    r->done = true;  // last touch: the loop thread may free r from here on
  }

  void Reap() {
    for (auto it = running.begin(); it != running.end();) {
      if ((*it)->done) it = running.erase(it);
      else ++it;
    }
  }
};

WorkerRuntime::WorkerRuntime(WorkerOptions opts) : impl_(std::make_unique<Impl>()) {
  if (opts.worker_id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    opts.worker_id = fmt::format("{}-{}", host, ::getpid());
  }
  impl_->opts = std::move(opts);
}

WorkerRuntime::~WorkerRuntime() = default;

void WorkerRuntime::Register(const std::string& kind, TaskHandler handler) {
  impl_->handlers[kind] = WithWorkerAbortFault(kind, std::move(handler));
}

ssh::SshPool& WorkerRuntime::pool() { return impl_->pool; }

Status WorkerRuntime::Run(const std::atomic<bool>& stop) {
  Impl& im = *impl_;
  // However Run ends (stop, a failed reconnect, an exception from zmq), the
  // running tasks are told to stop and the pool threads are joined.
  struct PoolStopper {
    Impl& im;
    void Now() {  // idempotent
      for (auto& r : im.running) r->cancelled = true;
      im.StopPool();
      im.running.clear();
    }
    ~PoolStopper() { Now(); }
  } stopper{im};
  const int64_t silence_limit = static_cast<int64_t>(im.opts.heartbeat_ms) * im.opts.heartbeat_liveness;
  std::optional<std::string> last_refusal;  // logged once, not at every reconnect
  while (!stop) {
    zmq::socket_t sock(im.ctx, zmq::socket_type::dealer);
    SetUpConnectingSocket(sock, im.opts.curve);  // cap, CURVE (docs/SECURITY.md)
    sock.set(zmq::sockopt::routing_id, fmt::format("{}-{}", im.opts.worker_id, RandomHex(4)));
    HandshakeWatch watch(im.ctx, sock, im.opts.curve ? std::optional(im.opts.curve->own.public_key) : std::nullopt);
    try {
      sock.connect(im.opts.broker_endpoint);
    } catch (const zmq::error_t& e) {
      return Status::Invalid(fmt::format("cannot connect to broker {}: {}", im.opts.broker_endpoint, e.what()));
    }
    proto::WorkerToBroker ready;
    ready.mutable_ready()->set_worker_id(im.opts.worker_id);
    for (const auto& [kind, h] : im.handlers) ready.mutable_ready()->add_task_kinds(kind);
    ready.mutable_ready()->set_capacity(im.opts.capacity);
    ready.mutable_ready()->set_pid(static_cast<uint32_t>(::getpid()));
    im.Send(sock, ready);
    int64_t last_heard = NowMs();
    int64_t next_hb = NowMs() + im.opts.heartbeat_ms;
    bool reconnect = false;
    while (!stop && !reconnect) {
      zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, im.wake_fd, ZMQ_POLLIN, 0}};
      // Wakes for a broker message or a posted result (eventfd); without
      // an eventfd, short polls while tasks run (a result leaves within ~2 ms).
      const bool can_wake = im.wake_fd >= 0;
      try {
        zmq::poll(items, can_wake ? 2 : 1, std::chrono::milliseconds(can_wake || im.running.empty() ? 50 : 2));
      } catch (const zmq::error_t& e) {
        // SIGINT/SIGTERM land here as EINTR: the loop's `stop` says what to do.
        if (e.num() == EINTR) continue;
        spdlog::warn("poll of the broker's socket failed: {}; reconnecting", e.what());
        reconnect = true;
        continue;
      }
      if (can_wake && (items[1].revents & ZMQ_POLLIN)) im.DrainWake();
      if (auto why = watch.TakeNewRefusal(); why && why != last_refusal)
        spdlog::error("broker {}: {}", im.opts.broker_endpoint, *(last_refusal = why));
      while (auto frames = wire::RecvFrames(sock, true)) {
        last_heard = NowMs();
        if (frames->size() < 2 || (*frames)[0] != wire::kWorkerHeader) continue;
        proto::BrokerToWorker msg;
        if (!msg.ParseFromString((*frames)[1])) continue;
        if (msg.has_task()) {
          spdlog::info("task {} ({}) attempt {}", msg.task().task_id(), msg.task().kind(), msg.task().attempt());
          im.Start(msg.task());
        } else if (msg.has_cancel_task_id()) {
          for (auto& r : im.running)
            if (r->task_id == msg.cancel_task_id()) r->cancelled = true;
        } else if (msg.has_disconnect()) {
          reconnect = true;  // the broker does not know us (it restarted): announce again
        }
      }
      std::deque<proto::WorkerToBroker> out;
      {
        std::lock_guard<std::mutex> lock(im.mu);
        out.swap(im.outbox);
      }
      for (const auto& m : out) im.Send(sock, m);
      im.Reap();
      const int64_t now = NowMs();
      if (now >= next_hb) {
        proto::WorkerToBroker hb;
        hb.set_heartbeat(true);
        im.Send(sock, hb);
        next_hb = now + im.opts.heartbeat_ms;
      }
      if (now - last_heard > silence_limit) {
        spdlog::warn("broker silent for {} ms; reconnecting", now - last_heard);
        reconnect = true;
      }
    }
    if (reconnect && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stopper.Now();  // before the totals, which should count every task
  spdlog::info("worker_ssh_totals worker_pid={} sessions={} {}", ::getpid(), im.pool.sessions(),
               ssh::FormatSshStats(ssh::ProcessSshStats()));
  return Status::Ok();
}

}  // namespace npuprof::workers
