#!/usr/bin/env bash
# Runs every npuprof benchmark and prints one table of the figures.
#
#   scripts/bench.sh                 # build dir ./build (configured Release if absent)
#   BUILD_DIR=build-bench scripts/bench.sh
#   MIN_TIME=0.5 scripts/bench.sh    # seconds per store benchmark (default 0.2; broker
#                                    # and ssh benchmarks run fixed iteration counts)
#   BENCHES="store ssh" scripts/bench.sh   # a subset (store broker ssh task_schema advise overhead scale compare multinode far drift)
#   BENCHES=drift DRIFT_SAMPLES=30 scripts/bench.sh   # serve --watch-hbm: the cost of one HBM sample
#   FILTER=Throughput scripts/bench.sh     # --benchmark_filter for every Google Benchmark binary
#   OVERHEAD_RUNS=3 scripts/bench.sh       # runs per kind (torch-profile, memory-profile) of the overhead bench
#   BENCHES=overhead OVERHEAD_DELAYS=reference scripts/bench.sh
#                                          # the overhead bench with the reference table's target delays
#                                          # (docs/PERFORMANCE.md "Against the one-shot scripts")
#   SCALE_RUNS=20,200 SCALE_TARGETS=20 scripts/bench.sh   # concurrent probe runs / simulated targets
#   BENCHES=multinode MULTINODE_RUNS=3 scripts/bench.sh     # 2-node vs 1-node torch-profile, reference delays
#   BENCHES=multinode MULTINODE_ARGS=--cgroup-cpu scripts/bench.sh
#                                          # the same, each simulated host and npuprof at a fixed CPU share (root,
#                                          # cgroup v1; docs/PERFORMANCE.md "Multi-node", run 49); or --core-per-host
#   BENCHES=far FAR_RUNS=2 FAR_RTT_MS=0,50,200 scripts/bench.sh
#                                          # torch-profile and memory-profile, reference delays, behind the
#                                          # latency relay at each round trip time (docs/PERFORMANCE.md "Far targets")
#   BENCHES=real_scale REAL_SCALE_RANKS=1,8,16 REAL_SCALE_ROWS=400000 scripts/bench.sh
#                                          # torch-profile at real scale: wall, bytes over the link and peak RSS
#                                          # against the target's own work (docs/PERFORMANCE.md run 31)
#
# store, broker, ssh, task_schema and advise are Google Benchmark binaries; overhead, scale, compare, multinode, far and
# real_scale are
# whole installations (npuprof server + loopback sshd + simulated targets,
# built only with the test harness) and print their own tables too.
# Builds only the benchmark targets (and what they need), -j$JOBS (default 2).
# Raw JSON and logs of each binary go to $OUT_DIR (default: a fresh temp dir,
# printed at the end).
# What each figure means: docs/PERFORMANCE.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
MIN_TIME="${MIN_TIME:-0.2}"
read -r -a BENCH_LIST <<<"${BENCHES:-store broker ssh task_schema advise overhead scale compare multinode far real_scale drift}"
FILTER="${FILTER:-}"
OVERHEAD_RUNS="${OVERHEAD_RUNS:-3}"
OVERHEAD_DELAYS="${OVERHEAD_DELAYS:-zero}"
SCALE_RUNS="${SCALE_RUNS:-20,200}"
SCALE_TARGETS="${SCALE_TARGETS:-20}"
JOBS="${JOBS:-2}"
OUT_DIR="${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/npuprof_bench_out_XXXXXX")}"
mkdir -p "$OUT_DIR"

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >&2
fi
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
if [[ "$build_type" != "Release" ]]; then
  echo "note: $BUILD_DIR is a '$build_type' build; figures in docs/PERFORMANCE.md are Release" >&2
fi
targets=()
for b in "${BENCH_LIST[@]}"; do targets+=("npuprof_bench_$b"); done
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}" >&2

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(uname -srm); load before: $(loadavg)" | tee "$OUT_DIR/machine.txt"

for b in "${BENCH_LIST[@]}"; do
  exe="$BUILD_DIR/bench/npuprof_bench_$b"
  case "$b" in
    overhead) args=(--runs "$OVERHEAD_RUNS" --delays "$OVERHEAD_DELAYS" --json "$OUT_DIR/$b.result.json") ;;
    scale) args=(--runs "$SCALE_RUNS" --targets "$SCALE_TARGETS" --json "$OUT_DIR/$b.result.json") ;;
    compare) args=(--points "${COMPARE_POINTS:-16}" --json "$OUT_DIR/$b.result.json") ;;
    multinode)
      read -r -a mn_extra <<<"${MULTINODE_ARGS:-}"
      args=(--runs "${MULTINODE_RUNS:-3}" --spans "${mn_extra[@]}" --json "$OUT_DIR/$b.result.json") ;;
    far) args=(--runs "${FAR_RUNS:-2}" --rtt-ms "${FAR_RTT_MS:-0,50,200}" --json "$OUT_DIR/$b.result.json") ;;
    drift) args=(--samples "${DRIFT_SAMPLES:-30}" --json "$OUT_DIR/$b.result.json") ;;
    real_scale)
      args=(--ranks "${REAL_SCALE_RANKS:-1,8,16}" --rows "${REAL_SCALE_ROWS:-400000}" --spans
            --json "$OUT_DIR/$b.result.json") ;;
    *)
      args=(--benchmark_out="$OUT_DIR/$b.json" --benchmark_out_format=json)
      [[ "$b" == store ]] && args+=(--benchmark_min_time="$MIN_TIME")
      [[ -n "$FILTER" ]] && args+=(--benchmark_filter="$FILTER")
      ;;
  esac
  echo "running $b (load $(loadavg)) ..." >&2
  "$exe" "${args[@]}" >"$OUT_DIR/$b.log" 2>&1 || { cat "$OUT_DIR/$b.log" >&2; exit 1; }
  echo "$b load after: $(loadavg)" >>"$OUT_DIR/machine.txt"
done

python3 - "$OUT_DIR" "${BENCH_LIST[@]}" <<'EOF'
import json, os, re, sys
out_dir, benches = sys.argv[1], sys.argv[2:]
# Counters worth a column, in this order; anything else is listed as well.
preferred = ["events", "tasks_per_s", "cpu_us_per_task", "runs_per_s", "task_rt_per_s", "cpu_us_per_run", "run_id_collisions", "submit_ack_p50_us", "submit_ack_p99_us",
             "d2r_p50_us", "d2r_p99_us", "e2e_p50_us", "e2e_p99_us", "events_per_run", "median_ms"]
skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
        "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index", "label",
        "items_per_second", "aggregate_name", "aggregate_unit", "finished_runs", "unfinished_runs"}

def fmt(v):
    if abs(v) >= 1e6: return f"{v/1e6:.2f}M"
    if abs(v) >= 1e4: return f"{v/1e3:.1f}k"
    if abs(v) >= 100: return f"{v:.0f}"
    return f"{v:.3g}"

rows = []
def kv(d, keys):
    return "  ".join(f"{k}={fmt(d[k]) if isinstance(d[k], (int, float)) else d[k]}" for k in keys if k in d)
for b in benches:
    res = os.path.join(out_dir, f"{b}.result.json")
    if b == "overhead" and os.path.exists(res):
        o = json.load(open(res))
        for kind, m in o.get("medians", {}).items():
            rows.append((f"overhead/{kind}", f"median of {m['n']}", f"{m['server_s']:.3g} s", str(m["n"]),
                         kv(m, ["overhead_s", "orch_s", "shell_s", "ssh_s", "exec", "http", "sftp_ops", "handshakes",
                                "wire_bytes"])))
        continue
    if b == "compare" and os.path.exists(res):
        o = json.load(open(res))
        for name, m in o.get("figures", {}).items():
            rows.append((f"compare/{name}", f"{o['points']}-point sweep", f"{m['median_s']:.3g} s", str(o["reps"]),
                         kv(m, ["max_s", "bytes"])))
        continue
    if b == "multinode" and os.path.exists(res):
        o = json.load(open(res))
        for shape in ("1-node", "2-node"):
            v = sorted(r["server_s"] for r in o["runs"] if r["shape"] == shape)
            if v:
                rows.append((f"multinode/{shape}", "torch-profile tp 2/node", f"{v[len(v) // 2]:.3g} s", str(len(v)),
                             f"ratio_2_to_1={o['ratio']:.3f}  goal_met={o['goal_met']}"))
        continue
    if b == "far" and os.path.exists(res):
        o = json.load(open(res))
        for key in sorted({(r["rtt_ms"], r["kind"]) for r in o["runs"]}):
            rs = [r for r in o["runs"] if (r["rtt_ms"], r["kind"]) == key]
            v = sorted(r["wall_s"] for r in rs)
            t = sorted(r["turns"] for r in rs)
            rows.append((f"far/{key[1]}", f"RTT {key[0]} ms", f"{v[len(v) // 2]:.3g} s", str(len(rs)),
                         f"turns={t[len(t) // 2]}"))
        continue
    if b == "real_scale" and os.path.exists(res):
        o = json.load(open(res))
        for r in o["runs"]:
            rows.append((f"real_scale/{r['ranks']}_ranks", f"{o['rows_per_rank']} rows/rank", f"{r['wall_s']:.3g} s", "1",
                         kv(r, ["status", "own_s", "analyse_batch_s", "goal_s", "goal_met", "relay_bytes_to_npuprof",
                                "largest_analyse_rank_bytes_in", "server_hwm_kb", "worker_hwm_kb"])))
        continue
    if b == "drift" and os.path.exists(res):
        o = json.load(open(res))
        rows.append(("drift/hbm_sample", "serve --watch-hbm 1", f"{o['sample_ms_median']:.3g} ms", str(o["samples"]),
                     kv(o, ["link_ms_median", "commands_median", "round_trips_median", "bytes_in_median",
                            "events_per_sample", "payload_bytes_per_sample", "decide_us_after_120",
                            "decide_us_after_1000"])))
        continue
    if b == "scale" and os.path.exists(res):
        for r in json.load(open(res)):
            if "error" in r:
                rows.append((f"scale/{r.get('runs')}", "error", "-", "-", r["error"][:80]))
                continue
            rows.append((f"scale/{r['runs']}_runs", f"{r['targets']} targets", f"{r['wall_s']:.3g} s", str(r["runs"]),
                         kv(r, ["runs_per_min", "ok", "broker_rss_kb_after", "broker_hwm_kb", "store_du_per_run",
                                "store_apparent_per_run", "ssh_handshakes"])))
        continue
    path = os.path.join(out_dir, f"{b}.json")
    if not os.path.exists(path): continue
    for r in json.load(open(path))["benchmarks"]:
        if r.get("run_type") != "iteration": continue
        extra = {k: v for k, v in r.items() if k not in skip and isinstance(v, (int, float))}
        keys = [k for k in preferred if k in extra] + sorted(k for k in extra if k not in preferred)
        figures = "  ".join(f"{k}={fmt(extra[k])}" for k in keys)
        rows.append((r["name"], r.get("label", ""), f"{r['real_time']:.3g} {r['time_unit']}", str(r["iterations"]), figures))

hdr = ("benchmark", "variant", "time/iter", "iters", "figures")
w = [max(len(x[i]) for x in rows + [hdr]) for i in range(4)]
line = lambda x: f"{x[0]:<{w[0]}}  {x[1]:<{w[1]}}  {x[2]:>{w[2]}}  {x[3]:>{w[3]}}  {x[4]}"
print(line(hdr))
print("-" * (sum(w) + 8 + 40))
for r in rows: print(line(r))
ssh_log = os.path.join(out_dir, "ssh.log")
if os.path.exists(ssh_log):
    for l in open(ssh_log):
        if l.startswith("ssh_"): print(l.rstrip())
# The whole-installation benches' own tables (stdout of each binary).
for b in ("overhead", "scale", "compare", "multinode", "far", "real_scale", "drift"):
    log = os.path.join(out_dir, f"{b}.log")
    if b in benches and os.path.exists(log):
        print()
        for l in open(log):
            if not l.startswith("# "): print(l.rstrip())  # "# " = progress lines
EOF
echo "load after: $(loadavg)"
echo "raw results: $OUT_DIR"
