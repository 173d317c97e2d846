"""Benchmark: gato's CPU BSQP vs crocoddyl FDDP on iiwa14 figure-8 tracking.

One SQP (resp. FDDP) iteration per MPC tick, warm-started by shifting the
previous plan, in closed loop on the same plant (pinocchio ABA, semi-implicit
Euler over the 31.25 ms control period). Same robot, cost weights, horizon and
integrator; gato's joint-limit barrier is off because crocoddyl's problem has
none. Prints median and spread per solve, the ratio, the B=32 two-thread
throughput and gato's per-stage profile.

    scripts/activate.sh && python bench/bench_solver.py [--repeats 3] [--out docs/benchmarks.md]

The crocoddyl peer runs in build/croc-venv (created on first use: pin 4.0.0 +
crocoddyl 3.2.1, which breaks with pin 4.1).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

import gato

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from fig8_problem import DT, Q_READY, TICKS, WEIGHTS, figure8, ref_window  # noqa: E402

CROC_VENV = ROOT / "build" / "croc-venv"


def ensure_croc_venv():
    py = CROC_VENV / "bin" / "python"
    if not py.exists():
        print("[bench] creating build/croc-venv (pin 4.0.0 + crocoddyl 3.2.1) ...", flush=True)
        subprocess.run(["python3", "-m", "venv", str(CROC_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "pin==4.0.0", "crocoddyl==3.2.1", "numpy"], check=True)
    return py


def stats(ts):
    ts = np.asarray(ts) * 1e3
    return dict(median=float(np.median(ts)), p10=float(np.percentile(ts, 10)), p90=float(np.percentile(ts, 90)),
                iqr=float(np.percentile(ts, 75) - np.percentile(ts, 25)), n=int(ts.size))


def gato_closed_loop(urdf, N, repeats, line_search=None):
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId("EE")
    pin.framesForwardKinematics(model, data, Q_READY)
    center = data.oMf[fid].translation.copy()
    times, errs, prof = [], [], []
    extra = {} if line_search is None else {"line_search": line_search}
    for _ in range(repeats):
        s = gato.BSQP(urdf, 1, N, DT, threads=1, integrator="semi_implicit", q_lim_cost=0.0, **WEIGHTS, **extra)
        x = np.r_[Q_READY, np.zeros(7)]
        warm = None
        for tick in range(TICKS):
            ref = np.zeros((N, 6))
            ref[:, :3] = ref_window(center, tick * DT, N)
            start = time.perf_counter()
            s.reset_rho()  # as MPCController does each tick (reset_rho_each_step=True)
            r = s.solve(x, ref.ravel(), warm)
            times.append(time.perf_counter() - start)
            prof.append(s.last_profile)
            u = r.u0(0)
            a = pin.aba(model, data, x[:7], x[7:], u)
            v = x[7:] + DT * a
            x = np.r_[x[:7] + DT * v, v]
            pin.framesForwardKinematics(model, data, x[:7])
            errs.append(np.linalg.norm(data.oMf[fid].translation - figure8(center, (tick + 1) * DT)))
            warm = gato.interface.shift_plan(np.asarray(r.xu[0]), s.nx, s.nu, N)[None]
    profile = {k: float(np.median([p[k] for p in prof])) for k in prof[0]}
    return times, float(np.mean(errs)), profile


def batch_throughput(urdf, N, B, threads, reps=30):
    """Solves per second for B entries on `threads` threads: the same warm-started
    problem every repeat (rho and duals reset), so every repeat does the same work."""
    s = gato.BSQP(urdf, B, N, DT, threads=threads, integrator="semi_implicit", q_lim_cost=0.0, **WEIGHTS)
    rng = np.random.default_rng(0)
    x = np.stack([np.r_[Q_READY + 0.05 * rng.standard_normal(7), np.zeros(7)] for _ in range(B)])
    ref = np.tile(np.r_[s.ee_pos(Q_READY) + [0, 0.05, 0.05], 0, 0, 0], (B, N))
    warm = s.solve(x, ref).xu
    ts = []
    for _ in range(reps):
        s.reset()
        start = time.perf_counter()
        s.solve(x, ref, warm)
        ts.append(time.perf_counter() - start)
    return B / float(np.median(ts)), ts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="closed-loop runs per configuration")
    ap.add_argument("--horizons", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--out", type=Path, help="append the Markdown report to this file")
    args = ap.parse_args()
    urdf = str(gato.robot_urdf("iiwa14"))
    croc = ensure_croc_venv()
    rows, lines = [], []
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    for N in args.horizons:
        print(f"[bench] N={N}: gato closed loop ({args.repeats} x {TICKS} ticks, line search 'first') ...", flush=True)
        f_times, f_err, _ = gato_closed_loop(urdf, N, args.repeats, line_search="first")
        print(f"[bench] N={N}: gato closed loop ({args.repeats} x {TICKS} ticks, line search 'best') ...", flush=True)
        g_times, g_err, prof = gato_closed_loop(urdf, N, args.repeats)
        print(f"[bench] N={N}: crocoddyl closed loop ...", flush=True)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        out = subprocess.run([str(croc), str(HERE / "crocoddyl_fig8.py"), urdf, str(N), str(args.repeats)],
                             capture_output=True, text=True, check=True, env=env)
        c = json.loads(out.stdout.strip().splitlines()[-1])
        gs, cs, fs = stats(g_times), stats(c["times"]), stats(f_times)
        rows.append((N, gs, cs, g_err, c["mean_err"], prof, fs, f_err))
        print(f"  gato      median {gs['median']:.3f} ms  p10 {gs['p10']:.3f}  p90 {gs['p90']:.3f}  "
              f"mean EE err {g_err * 1e3:.1f} mm")
        print(f"  crocoddyl median {cs['median']:.3f} ms  p10 {cs['p10']:.3f}  p90 {cs['p90']:.3f}  "
              f"mean EE err {c['mean_err'] * 1e3:.1f} mm")
        print(f"  gato 'first' median {fs['median']:.3f} ms  p10 {fs['p10']:.3f}  p90 {fs['p90']:.3f}  "
              f"mean EE err {f_err * 1e3:.1f} mm")
        print(f"  ratio gato/crocoddyl {gs['median'] / cs['median']:.2f}x ('best'), "
              f"{fs['median'] / cs['median']:.2f}x ('first'); gato stages (us, median): {prof}")
    print("[bench] batch throughput N=32: B=1 and B=32 on one thread, B=32 on two threads ...", flush=True)
    t1, _ = batch_throughput(urdf, 32, 1, 1)
    t32_1, _ = batch_throughput(urdf, 32, 32, 1)
    t32, _ = batch_throughput(urdf, 32, 32, 2)
    print(f"  B=1/1 thread {t1:.0f} solves/s, B=32/1 thread {t32_1:.0f}, B=32/2 threads {t32:.0f} "
          f"(x{t32 / t1:.2f} vs B=1, x{t32 / t32_1:.2f} vs B=32 on one thread)")
    lines.append(f"### BSQP vs crocoddyl FDDP, iiwa14 figure-8 ({time.strftime('%Y-%m-%d')})\n")
    lines.append(f"Machine: {machine}. Command: `python bench/bench_solver.py --repeats {args.repeats}`. "
                 f"crocoddyl {c['crocoddyl']} with pinocchio {c['pinocchio']} (own venv); gato with pinocchio "
                 f"{pin.__version__}. One iteration per tick, warm-started, {TICKS} ticks x {args.repeats} runs, "
                 "closed loop on the same plant.\n")
    lines.append("| N | gato, line search 'best' (default) [ms] | gato, line search 'first' [ms] | crocoddyl FDDP [ms] "
                 "| ratio best / first vs crocoddyl | mean EE error best / first / croc [mm] |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for N, gs, cs, ge, ce, _, fs, fe in rows:
        lines.append(f"| {N} | {gs['median']:.3f} ({gs['p10']:.3f}-{gs['p90']:.3f}) | {fs['median']:.3f} "
                     f"({fs['p10']:.3f}-{fs['p90']:.3f}) | {cs['median']:.3f} ({cs['p10']:.3f}-{cs['p90']:.3f}) | "
                     f"{gs['median'] / cs['median']:.2f}x / {fs['median'] / cs['median']:.2f}x | "
                     f"{ge * 1e3:.1f} / {fe * 1e3:.1f} / {ce * 1e3:.1f} |")
    lines.append("\nTimes are median (p10-p90) per solve. 'best' evaluates all 8 step sizes and keeps the "
                 "lowest merit (the reference semantics); 'first' stops at the first strict decrease, "
                 "as crocoddyl's backtracking does.\n")
    lines.append("\ngato per-stage profile, median per solve [us]:\n")
    lines.append("| N | KKT (dynamics derivatives, cost) | Schur + preconditioner | linear solve | line search (8 rollouts) |")
    lines.append("| --- | --- | --- | --- | --- |")
    for N, _, _, _, _, prof, _, _ in rows:
        lines.append(f"| {N} | {prof['kkt_us']:.0f} | {prof['schur_us']:.0f} | {prof['linsys_us']:.0f} | {prof['linesearch_us']:.0f} |")
    lines.append(f"\nBatch throughput, N=32 (same warm-started problem every repeat): B=1 on one thread {t1:.0f} "
                 f"solves/s; B=32 on one thread {t32_1:.0f}; B=32 on two threads {t32:.0f} (x{t32 / t1:.2f} the "
                 f"B=1 single-thread throughput, x{t32 / t32_1:.2f} the B=32 single-thread one).\n")
    report = "\n".join(lines)
    print("\n" + report)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n" + report + "\n")


if __name__ == "__main__":
    main()
