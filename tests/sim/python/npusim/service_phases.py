"""The phases of one simulated service and the HBM level (hbm_levels.LEVELS)
its devices hold in each: launch, starting, loaded, profile_run,
kv_allocated, graph_captured, ready, then inference / idle windows as
requests come and go, stopping, stopped.

In "retained" mode the allocator keeps the activation of the first request,
so from then on every phase holds the `inferred` level; in "released" mode
it gives it back when no request is running, so idle windows fall back to
`ready`. Not thread-safe: the service calls it under its own lock."""
import time

from . import sim_clock


class PhaseLog:
    def __init__(self, release, t0=None):
        self.release = bool(release)
        self.in_flight = 0
        self.entries = []          # [t_us, phase, level]
        self.level = "base"
        self.closing = False       # from "stopping" on, requests still finishing change no phase
        self.mark("launch", "base", t0)

    def mark(self, phase, level=None, t=None):
        """Start `phase` at t (unix seconds, default now); level None keeps the current one.
        Returns True when the level changed."""
        changed = level is not None and level != self.level
        if phase == "stopping":
            self.closing = True
        if level is not None:
            self.level = level
        self.entries.append([(sim_clock.now() if t is None else t) * 1e6, phase, self.level])
        return changed

    def request_started(self, t=None):
        self.in_flight += 1
        if self.in_flight == 1 and not self.closing:
            return self.mark("inference", "inferred", t)
        return False

    def request_ended(self, t=None):
        self.in_flight = max(0, self.in_flight - 1)
        if self.in_flight == 0 and not self.closing:
            return self.mark("idle", "ready" if self.release else "inferred", t)
        return False

    def series(self, t_end=None):
        """Entries closed by an "end" sentinel, for the msprof series."""
        return [list(e) for e in self.entries] + [[(sim_clock.now() if t_end is None else t_end) * 1e6, "end",
                                                    self.level]]

    def truth(self, t_end=None):
        """[{phase, level, start, end}] (unix seconds); the open last phase ends at t_end (None = open)."""
        out = []
        for i, (t, phase, level) in enumerate(self.entries):
            nxt = self.entries[i + 1][0] / 1e6 if i + 1 < len(self.entries) else t_end
            out.append({"phase": phase, "level": level, "start": round(t / 1e6, 6),
                        "end": None if nxt is None else round(nxt, 6)})
        return out

    def inference_windows(self):
        """[(start_s, end_s or None)] of the inference phases."""
        return [(p["start"], p["end"]) for p in self.truth() if p["phase"] == "inference"]
