"""The simulated host's own clock: real time shifted by the target's
`clock.offset_s` (setup_target.py --clock-offset-s), as on a machine whose
clock is not in sync with its neighbours. Every timestamp the target
produces (logs, truth, timeline, traces, kernel and msprof series,
directory stamps, the `date` shim in bin/) comes from here, so a target
set 3.2 s ahead says so everywhere at once.

The offset is read once per process from the target's config (a running
service keeps the offset it started with, as it keeps the rest of the
config); without a target it is 0. Reading it imports no json module in the
usual case (see _offset_in): every `python3 -c` on a target reads it at
start-up (sitecustomize.py), most of them never needing json otherwise."""
import os
import time

_OFFSET = None


def offset():
    """Seconds this host's clock is ahead of the real one (negative: behind)."""
    global _OFFSET
    if _OFFSET is None:
        _OFFSET = 0.0
        root = os.environ.get("NPUPROF_SIM_ROOT", "")
        if root:
            try:
                with open(os.path.join(root, "state", "config.json")) as f:
                    _OFFSET = _offset_in(f.read())
            except (OSError, ValueError, TypeError, AttributeError):
                _OFFSET = 0.0
    return _OFFSET


# How target_setup writes the key (json, indent 2): a top-level "clock" object
# whose first key is offset_s. A string value cannot hold a raw newline, so
# this text occurs nowhere else in such a file.
_CLOCK_KEY = '\n  "clock": {\n    "offset_s": '


def _offset_in(text):
    """clock.offset_s of a config's text: the number after _CLOCK_KEY when the
    file has it, else (another layout) the JSON parsed in full."""
    i = text.find(_CLOCK_KEY)
    if i >= 0:
        value = text[i + len(_CLOCK_KEY):text.find("\n", i + len(_CLOCK_KEY))].rstrip(",")
        try:
            return float(value)
        except ValueError:  # null (a missing offset), or a layout this does not know
            pass
    import json
    return float((json.loads(text).get("clock") or {}).get("offset_s") or 0.0)


def set_offset(seconds):
    """Use this offset in this process from now on (tests; a process that loaded another config)."""
    global _OFFSET
    _OFFSET = float(seconds)


def now():
    """Unix time on this host's clock."""
    # (a `python3 -c` program's time.time() is shifted already: sitecustomize.py)
    return getattr(time, "npusim_unshifted_time", time.time)() + offset()


def localtime(t=None):
    return time.localtime(now() if t is None else t)


def strftime(fmt, t=None):
    """time.strftime on this host's clock (t: a time already on it)."""
    return time.strftime(fmt, localtime(t))
