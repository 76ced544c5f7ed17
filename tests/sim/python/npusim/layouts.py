"""Chip layouts the simulator can pretend to be, and the device list a new
target gets for each (ids, names, bus ids, HBM totals)."""

# kind: "910" = one chip per NPU with an HBM column (01/06 samples),
#       "a3"  = two chips per NPU with a global Phy-ID (02 sample),
#       "310p" = two chips per NPU, global Device id, no HBM column (09 sample).
LAYOUTS = {
    "910B3": {"kind": "910", "name": "910B3", "version": "25.2.0", "hbm_total_mb": 65536,
              "chips_per_npu": 1, "default_devices": 8,
              "bus_ids": ["0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
                          "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0"]},
    "910B4": {"kind": "910", "name": "910B4", "version": "23.0.6", "hbm_total_mb": 32768,
              "chips_per_npu": 1, "default_devices": 4,
              "bus_ids": ["0000:81:00.0", "0000:41:00.0", "0000:82:00.0", "0000:42:00.0",
                          "0000:01:00.0", "0000:02:00.0", "0000:C1:00.0", "0000:C2:00.0"]},
    "A3": {"kind": "a3", "name": "Ascend910", "version": "25.2.3", "hbm_total_mb": 65536,
           "chips_per_npu": 2, "default_devices": 16,
           "bus_ids": ["0000:9D:00.0", "0000:9F:00.0", "0000:99:00.0", "0000:9B:00.0",
                       "0000:95:00.0", "0000:97:00.0", "0000:91:00.0", "0000:93:00.0",
                       "0000:8D:00.0", "0000:8F:00.0", "0000:89:00.0", "0000:8B:00.0",
                       "0000:85:00.0", "0000:87:00.0", "0000:81:00.0", "0000:83:00.0"]},
    "310P3": {"kind": "310p", "name": "310P3", "version": "25.3.rc1", "hbm_total_mb": 44278,
              "chips_per_npu": 2, "default_devices": 8,
              "npu_ids": [0, 96, 32768, 32896],
              "bus_ids": ["0000:01:00.0", "0000:03:00.0", "0000:81:00.0", "0000:84:00.0"]},
}


def make_devices(layout, count=None, npu_ids=None, hbm_total_mb=None, baseline_mb=2862):
    """Device list for a layout. Device index = position in npu-smi's chip list
    (= the logical id ASCEND_RT_VISIBLE_DEVICES uses)."""
    spec = LAYOUTS[layout]
    cpn = spec["chips_per_npu"]
    count = count or spec["default_devices"]
    if count % cpn:
        raise ValueError("layout %s needs a multiple of %d devices" % (layout, cpn))
    n_npu = count // cpn
    if npu_ids:
        if len(npu_ids) != n_npu:
            raise ValueError("--npu-ids needs %d ids" % n_npu)
        ids = list(npu_ids)
    else:
        base = spec.get("npu_ids", [])
        ids = list(base[:n_npu])
        nxt = (max(ids) + 1) if ids else 0
        while len(ids) < n_npu:
            ids.append(nxt)
            nxt += 1
    if isinstance(baseline_mb, (list, tuple)):
        baselines = list(baseline_mb)
        if len(baselines) != count:
            raise ValueError("--baseline-mb list needs %d values" % count)
    else:
        baselines = [baseline_mb] * count
    devices = []
    idx = 0
    for n, npu in enumerate(ids):
        for chip in range(cpn):
            total = hbm_total_mb or spec["hbm_total_mb"]
            if spec["kind"] == "310p" and not hbm_total_mb and chip == 1:
                total = 43693
            bus = spec["bus_ids"][(n * (cpn if spec["kind"] == "a3" else 1) + (chip if spec["kind"] == "a3" else 0)) % len(spec["bus_ids"])]
            devices.append({
                "index": idx, "npu_id": npu, "chip": chip, "phy_id": idx,
                "name": spec["name"], "health": "OK", "bus_id": bus,
                "power": ("NA" if spec["kind"] == "310p" else ("-" if chip == 1 else "%.1f" % (90.0 + (idx * 3.7) % 8))),
                "temp": 32 + (idx * 5) % 7,
                "hugepages": [0, 0],
                "total_mb": total, "baseline_mb": int(baselines[idx]),
            })
            idx += 1
    return devices
