"""torch_npu's finalise of one rank after /stop_profile: the rank's data
lands in its *_ascend_pt directory over `delay` seconds (FRAMEWORK op data
grows, device data arrives in slices), then the PROF end_info markers and
profiler_info_<rank>.json are written and nothing changes any more.

delay 0: everything is written before /stop_profile answers. delay > 0: a
background thread writes it, in up to 10 chunks spread over the delay.
hang: the rank writes its first chunks and never finalises (no
profiler_info, no end_info). abandon(): the service is shutting down; an
unfinished finalise stops where it is (its rank process is gone)."""
import threading
import time

from . import bulk_rows, sim_clock, torch_profile_writer, work_timeline

MAX_CHUNKS = 10


def _split(items, n):
    k, r = divmod(len(items), n)
    out, i = [], 0
    for c in range(n):
        j = i + k + (1 if c < r else 0)
        out.append(items[i:j])
        i = j
    return out


class RankFinalise:
    def __init__(self, trace, ops, tasks, delay, hang, t_stop, framework_ops=True, device_data=True,
                 with_stack=False, on_done=None, bulk=0, raw_bytes_per_row=64):
        self.trace = trace
        self.tasks = tasks
        self.bulk = int(bulk) if device_data else 0  # scale.rows_per_rank: rows repeating `tasks` (bulk_rows.py)
        self.raw_bytes_per_row = raw_bytes_per_row
        self.delay = max(0.0, float(delay))
        self.hang = bool(hang)
        self.t_stop = t_stop
        self.kw = {"framework_ops": framework_ops, "device_data": device_data}
        self.with_stack = with_stack
        self.on_done = on_done
        self.finished_at = None
        self._abandon = threading.Event()
        n = 1 if self.delay == 0 and not self.hang else max(2, min(MAX_CHUNKS, int(self.delay / 0.05) or 2))
        self.chunks = list(zip(_split(ops, n), _split(tasks, n)))
        self.thread = None

    def start(self):
        if self.delay == 0 and not self.hang:
            self._run()
        else:
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def abandon(self):
        self._abandon.set()

    def _run(self):
        n = len(self.chunks)
        step = self.delay / n
        last = n // 2 if self.hang else n   # a hung rank stops half-way
        for i, (ops, tasks) in enumerate(self.chunks[:last]):
            if self._abandon.is_set():
                return
            torch_profile_writer.write_chunk(self.trace, ops, tasks, **self.kw)
            if step and self._abandon.wait(step):
                return
        if self.hang:
            self._abandon.wait()  # never finalises
            return
        if self.bulk:
            torch_profile_writer.write_bulk(self.trace, self.tasks, self.bulk, self.raw_bytes_per_row)
        torch_profile_writer.finish_rank(self.trace, self.t_stop, self.with_stack)
        self.finished_at = sim_clock.now()
        work_timeline.record("torch_finalise", self.t_stop, self.finished_at, rank=self.trace["rank"],
                             path=self.trace["path"])
        if self.on_done:
            self.on_done(self)
