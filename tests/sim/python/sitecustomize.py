"""The simulated host's clock for a `python3 -c` program of one's own
(npuprof test simulator). Python imports this module at start-up when the
target's set_env.sh put this directory on PYTHONPATH. On a target whose
clock is shifted (`clock.offset_s`, npusim/sim_clock.py), a program given
with `-c` then reads the host's clock from time.time() and time.time_ns(),
as it would on a real machine whose clock is off (npuprof's clock exchange
reads it so: workers/ssh/clock_exchange_protocol.h; it runs `python3 -Sc`,
which skips site, and imports this module itself). Programs run from a
file or a module (the simulated tools) are left as they are: they read the
host's clock through sim_clock.now(), which uses the unshifted clock kept
here, so nothing is shifted twice. Not shifted: bash's $EPOCHREALTIME, file
mtimes, /proc."""
import sys


def _shift_clock():
    if sys.argv[:1] != ["-c"]:
        return
    try:
        from npusim import sim_clock
        off = float(sim_clock.offset())
    except Exception:  # not on a target, or its config unreadable: the real clock
        return
    if not off:
        return
    import time
    real_time, real_ns, off_ns = time.time, time.time_ns, int(round(off * 1e9))
    time.npusim_unshifted_time = real_time
    time.time = lambda: real_time() + off
    time.time_ns = lambda: real_ns() + off_ns


_shift_clock()
