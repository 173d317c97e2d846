"""Benchmark: what BSQP.feedback_gains costs per MPC tick (issue 33), beside the solve it follows.

Per robot (iiwa14, indy7) and horizon N (16, 32, 64): a batch of one solves toward an offset EE
goal (5 SQP iterations, bdsv), then, alternating call by call, ``calls`` times each: one
real-time solve (1 SQP iteration, warm from the plan), ``feedback_gains()`` (the C++ core:
the row's KKT assembly at the plan + the Riccati recursion) and ``feedback_gains_numpy()``
(the NumPy twin on debug_setup_kkt's blocks). Reports the median and the 10-90 % range of
each, in microseconds, wall clock through the Python API (float64, one thread).

    source scripts/activate.sh && python bench/bench_feedback_gains.py [--calls 200] [--out result.md]
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

import gato

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchmarks_doc import write_result  # noqa: E402
from run_info import cpu_model, host, stamp  # noqa: E402

HOME = {"iiwa14": np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4]),
        "indy7": np.array([0.1, -0.3, -1.2, 0.2, -1.0, 0.3])}


def measure(robot, N, calls):
    s = gato.BSQP(gato.robot_urdf(robot), 1, N, 0.02, max_sqp_iters=5, linsys="bdsv", threads=1)
    x = np.r_[HOME[robot], np.zeros(s.nv)]
    ref = np.tile(np.r_[s.ee_pos(HOME[robot]) + [0.04, -0.03, 0.05], 0, 0, 0], N)[None]
    xu = np.asarray(s.solve(x[None], ref).xu)
    s.set_params(s.params.replace(max_sqp_iters=1))
    t = {"solve (1 SQP iteration)": [], "feedback_gains (C++)": [], "feedback_gains_numpy": []}
    for _ in range(calls):
        t0 = time.perf_counter()
        s.solve(x[None], ref, xu)
        t1 = time.perf_counter()
        s.feedback_gains()
        t2 = time.perf_counter()
        s.feedback_gains_numpy()
        t3 = time.perf_counter()
        for key, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2)):
            t[key].append(1e6 * dt)
    return {k: (np.median(v), np.percentile(v, 10), np.percentile(v, 90)) for k, v in t.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out", default=None, help="write the table as a Markdown section to this file (not in docs/)")
    a = ap.parse_args(argv)
    rows = []
    for robot in HOME:
        for N in (16, 32, 64):
            r = measure(robot, N, a.calls)
            rows.append((robot, N, r))
            print(robot, N, "  ".join(f"{k}: {m:.0f} us ({lo:.0f}-{hi:.0f})" for k, (m, lo, hi) in r.items()),
                  flush=True)
    keys = list(rows[0][2])
    lines = ["", f"## Feedback gains per MPC tick (issue 33; {stamp()})", "",
             f"{host()}, {cpu_model()}; `python bench/bench_feedback_gains.py --calls {a.calls}`. "
             "Median (10-90 %) wall time in microseconds through the Python API, float64, one thread, "
             "the three calls alternating; the machine was shared with other jobs (loaded), so compare "
             "within a row, not across sessions.", "",
             "| robot | N | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for robot, N, r in rows:
        lines.append(f"| {robot} | {N} | " + " | ".join(f"{m:.0f} ({lo:.0f}-{hi:.0f})" for m, lo, hi in r.values())
                     + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        write_result(a.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
