"""Render `npu-smi info` text in the real box-drawn layouts.

render(kind, version, chips, processes, process_table=True) where each chip is
a dict: npu_id, chip, phy_id, name, health, power, temp, hugepages [u,t],
bus_id, aicore, mem [u,t], hbm [u,t] (910/a3 only); each process row is
{npu_id, chip, pid, name, mem_mb}."""

W910 = (27, 15, 52)
W310P = (31, 17, 54)


def _pair(used, total, width):
    return ("%-" + str(width) + "s/ %s") % (used, total)


def _line(widths, ch="-"):
    return "+" + "+".join(ch * w for w in widths) + "+"


def _full(widths, ch="-"):
    return "+" + ch * (sum(widths) + len(widths) - 1) + "+"


def _row(cells):
    return "|" + "|".join(cells) + "|"


def _c(text, width):
    return (" " + text).ljust(width)


def _wide(text, widths):
    inner = sum(widths) + len(widths) - 1
    return "|" + (" " + text).ljust(inner) + "|"


def render(kind, version, chips, processes, process_table=True, driver_version=None):
    widths = W310P if kind == "310p" else W910
    a, b, c = widths
    out = []
    out.append(_full(widths))
    head_pad = 49 if kind == "310p" else 33
    out.append(_wide(("npu-smi %s" % version).ljust(head_pad) + "Version: %s" % (driver_version or version), widths))
    out.append(_line(widths))
    if kind == "310p":
        out.append(_row([_c("NPU     Name", a), _c("Health", b), _c("Power(W)     Temp(C)           Hugepages-Usage(page)", c)]))
        out.append(_row([_c("Chip    Device", a), _c("Bus-Id", b), _c("AICore(%)    Memory-Usage(MB)", c)]))
    else:
        out.append(_row([_c("NPU   Name", a), _c("Health", b), _c("Power(W)    Temp(C)           Hugepages-Usage(page)", c)]))
        second = "Chip  Phy-ID" if kind == "a3" else "Chip"
        out.append(_row([_c(second, a), _c("Bus-Id", b), _c("AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)", c)]))
    out.append(_line(widths, "="))
    for i, ch in enumerate(chips):
        hp = ch.get("hugepages", [0, 0])
        if kind == "310p":
            r1 = [_c("%-8s%s" % (ch["npu_id"], ch["name"]), a), _c(ch["health"], b),
                  _c("%-13s%-18s%s" % (ch["power"], ch["temp"], _pair(hp[0], hp[1], 6)), c)]
            r2 = [_c("%-8s%s" % (ch["chip"], ch["phy_id"]), a), _c(ch["bus_id"], b),
                  _c("%-13s%s" % (ch["aicore"], _pair(ch["mem"][0], ch["mem"][1], 5)), c)]
        else:
            r1 = [_c("%-6s%s" % (ch["npu_id"], ch["name"]), a), _c(ch["health"], b),
                  _c("%-12s%-18s%s" % (ch["power"], ch["temp"], _pair(hp[0], hp[1], 5)), c)]
            first = ("%-6s%s" % (ch["chip"], ch["phy_id"])) if kind == "a3" else str(ch["chip"])
            r2 = [_c(first, a), _c(ch["bus_id"], b),
                  _c("%-12s%-18s%s" % (ch["aicore"], _pair(ch["mem"][0], ch["mem"][1], 5),
                                        _pair(ch["hbm"][0], ch["hbm"][1], 5)), c)]
        out.append(_row(r1))
        out.append(_row(r2))
        last_of_npu = i + 1 == len(chips) or chips[i + 1]["npu_id"] != ch["npu_id"]
        if last_of_npu:
            out.append(_line(widths, "="))
        elif kind == "a3":
            out.append(_full(widths))
        else:
            out.append(_line(widths))
    if process_table:
        out.append(_line(widths))
        pname_w = 26
        if kind == "310p":
            out.append(_row([_c("NPU     Chip", a), _c("Process id", b),
                             _c("Process name", pname_w) + "|" + _c("Process memory(MB)", c - pname_w - 1)]))
        else:
            out.append(_row([_c("NPU     Chip", a), _c("Process id", b),
                             _c("Process name", pname_w) + "|" + _c("Process memory(MB)", c - pname_w - 1)]))
        out.append(_line(widths, "="))
        seen = []
        for ch in chips:
            if ch["npu_id"] not in seen:
                seen.append(ch["npu_id"])
        for npu in seen:
            rows = [p for p in processes if p["npu_id"] == npu]
            if not rows:
                out.append(_wide("No running processes found in NPU %s" % npu, widths))
            for p in rows:
                out.append(_row([_c("%-8s%s" % (p["npu_id"], p["chip"]), a), _c(str(p["pid"]), b),
                                 _c(p.get("name", "")[:15], pname_w) + "|" + _c(str(p["mem_mb"]), c - pname_w - 1)]))
            out.append(_line(widths, "="))
    return "\n".join(out) + "\n"
