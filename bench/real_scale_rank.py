# One real-scale rank's analyse() outputs, written by the simulator's own
# code, to measure the rank digest program's CPU on (docs/PERFORMANCE.md
# run 52): a *_ascend_pt directory whose device data are the kernels of 10
# requests (32 prompt tokens, 4 output tokens, tp 8, started now) brought up to ROWS rows
# by bulk rows (tests/sim/python/npusim/bulk_rows.py), then
# analyse_impl._write_outputs into DIR/ASCEND_PROFILER_OUTPUT/ with a
# trace_view.json of about TRACE_MB.
#
#   python3 bench/real_scale_rank.py tests/sim/python DIR [ROWS [TRACE_MB]]
#       (the simulator's msprof, SIM/../bin/msprof, is put first on PATH here:
#       without an msprof the simulated analyse() writes no kernel_details.csv)
#   echo 0 > DIR.rc    # analyse() "ended": the digest reads the outputs
#   /usr/bin/time -f "%U %S %e" python3 workers/profiling/remote/rank_digest.py digest DIR DIR 1000 1 ""
import json
import os
import sys
import time

sys.path.insert(0, sys.argv[1])
sim_bin = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "bin")
os.environ["PATH"] = sim_bin + os.pathsep + os.environ.get("PATH", "")
from npusim import analyse_impl, bulk_rows, kernel_model  # noqa: E402

d = sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 400000
trace_mb = int(sys.argv[4]) if len(sys.argv) > 4 else 80
data = os.path.join(d, "PROF_000001_1", "device_0", "data")
os.makedirs(data, exist_ok=True)
os.makedirs(os.path.join(d, "FRAMEWORK"), exist_ok=True)
mc = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 11008,
      "num_hidden_layers": 32, "vocab_size": 32000, "head_dim": 128}
t0 = time.time()  # the simulated service's requests start on the epoch clock: 19-digit start times
reqs = [{"t_start": t0 + i * 0.01, "prompt_tokens": 32, "completion_tokens": 4} for i in range(10)]
tasks = kernel_model.tasks(reqs, mc, 8, 0, {}, rank=0)
with open(os.path.join(data, "sim_tasks.json.slice_0"), "w") as f:
    json.dump(tasks, f)
bulk_rows.write(data, tasks, max(0, rows - len(tasks)))
with open(os.path.join(d, "FRAMEWORK", "torch.op_range"), "w") as f:
    for i in range(200):
        f.write(json.dumps({"name": "aten::mm", "pid": 100, "tid": 100, "ts": 1000.0 + i, "dur": 1.0}) + "\n")
out = os.path.join(d, "ASCEND_PROFILER_OUTPUT")
os.makedirs(out, exist_ok=True)
t = time.process_time()
analyse_impl._write_outputs(d, {"scale": {"rows_per_rank": rows, "trace_view_mb": trace_mb}}, 0.0, out)
sys.stderr.write("%d templates, %d rows; the outputs written in %.2f s of CPU\n" % (len(tasks), rows,
                                                                                     time.process_time() - t))
