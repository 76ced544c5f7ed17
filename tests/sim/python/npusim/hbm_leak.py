"""A leaking service (config key `leak`, see README.md "HBM leak"): from the
moment a service is ready, npu-smi shows each of its devices holding
`mb_per_h` more MB per hour and `mb_per_request` more MB per request answered,
on top of its level (hbm_levels.py). `time_scale` makes the leak's hours pass
faster than the host's clock (a leak of 100 MB/h at time_scale 360 grows
10 MB per second), so a test sees hours of growth in seconds; the slope a
sampler reading the host's clock sees is `slope_mb_per_h` = mb_per_h *
time_scale, recorded in the instance's truth with the rest."""
from . import sim_clock


def settings(cfg):
    """The leak of this config, or None (no leak)."""
    leak = cfg.get("leak") or {}
    mb_h = float(leak.get("mb_per_h") or 0)
    mb_req = float(leak.get("mb_per_request") or 0)
    if mb_h == 0 and mb_req == 0:
        return None
    return {"mb_per_h": mb_h, "mb_per_request": mb_req, "time_scale": float(leak.get("time_scale") or 1)}


def instance_record(leak, ready_at, requests):
    """What the instance file carries for npu-smi (None before ready: no leak yet)."""
    if leak is None or ready_at is None:
        return None
    return dict(leak, ready_at=ready_at, requests=requests)


def leaked_mb(rec, now=None):
    """MB a leaking instance's device holds above its level at `now` (host clock)."""
    if not rec:
        return 0.0
    t = sim_clock.now() if now is None else now
    hours = max(0.0, t - float(rec["ready_at"])) / 3600.0 * float(rec.get("time_scale") or 1)
    return float(rec.get("mb_per_h") or 0) * hours + float(rec.get("mb_per_request") or 0) * int(rec.get("requests") or 0)


def truth(leak, ready_at):
    """The truth's `leak` record."""
    if leak is None:
        return None
    return dict(leak, ready_at=ready_at, slope_mb_per_h=leak["mb_per_h"] * leak["time_scale"])
