"""Benchmark: gato's CPU BSQP vs crocoddyl FDDP on iiwa14 figure-8 tracking.

One SQP (resp. FDDP) iteration per MPC tick, warm-started by shifting the
previous plan, in closed loop on the same plant (pinocchio ABA, semi-implicit
Euler over the 31.25 ms control period). Same robot, cost weights, horizon and
integrator; gato's joint-limit barrier is off because crocoddyl's problem has
none. Each repeat runs gato 'first', gato 'best' and crocoddyl once each, one
after the other (this shared host's speed drifts within seconds); prints the
median and spread per solve, the median of the per-repeat ratios, the B=32
two-thread throughput (one round per repeat) and gato's per-stage profile.

    scripts/activate.sh && python bench/bench_solver.py [--repeats 5] [--cpu 0] [--out result.md]

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
from fig8_problem import DT, Q_START, TICKS, WEIGHTS, figure8, ref_window  # noqa: E402
from benchmarks_doc import write_result  # noqa: E402

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


def gato_closed_loop(urdf, N, repeats, line_search=None, digest=None):
    """Closed-loop runs: per-solve times [s], mean EE error [m], median stage profile [us].
    ``digest`` (a hashlib object, optional) is updated with every plan's bytes (the A/B
    script's bit-identity check)."""
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId("EE")
    pin.framesForwardKinematics(model, data, Q_START)
    center = data.oMf[fid].translation.copy()
    times, errs, prof = [], [], []
    extra = {} if line_search is None else {"line_search": line_search}
    for _ in range(repeats):
        s = gato.BSQP(urdf, 1, N, DT, threads=1, integrator="semi_implicit", q_lim_cost=0.0, **WEIGHTS, **extra)
        x = np.r_[Q_START, np.zeros(7)]
        warm = None
        for tick in range(TICKS):
            ref = np.zeros((N, 6))
            ref[:, :3] = ref_window(center, tick * DT, N)
            start = time.perf_counter()
            s.reset_rho()  # as MPCController does each tick (reset_rho_each_step=True)
            r = s.solve(x, ref.ravel(), warm)
            times.append(time.perf_counter() - start)
            prof.append(s.last_profile)
            if digest is not None:
                digest.update(np.ascontiguousarray(r.xu).tobytes())
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
    x = np.stack([np.r_[Q_START + 0.05 * rng.standard_normal(7), np.zeros(7)] for _ in range(B)])
    ref = np.tile(np.r_[s.ee_pos(Q_START) + [0, 0.05, 0.05], 0, 0, 0], (B, N))
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
    ap.add_argument("--out", type=Path, help="write the Markdown report to this file (not in docs/)")
    ap.add_argument("--cpu", type=int, default=0,
                    help="pin the closed-loop runs (gato and the crocoddyl subprocess) to this CPU, so that "
                         "both run on the same vCPU (they differ in speed on a shared host); -1: no pinning")
    args = ap.parse_args()
    all_cpus = os.sched_getaffinity(0)
    if args.cpu >= 0 and args.cpu in all_cpus:
        os.sched_setaffinity(0, {args.cpu})
    urdf = str(gato.robot_urdf("iiwa14"))
    croc = ensure_croc_venv()
    rows, lines = [], []
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    load0 = os.getloadavg()[0]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for N in args.horizons:
        # gato ('first', 'best') and crocoddyl alternate, one closed-loop run each per
        # repeat: the host's speed drifts by tens of percent within seconds, so each
        # ratio compares runs seconds apart; the table reports the median ratio.
        f_times, g_times, c_times, profs, f_errs, g_errs, c_errs, rb, rf = [], [], [], [], [], [], [], [], []
        for rep in range(args.repeats):
            print(f"[bench] N={N}: repeat {rep + 1}/{args.repeats}: gato 'first', gato 'best', crocoddyl "
                  f"({TICKS} ticks each) ...", flush=True)
            ft, fe, _ = gato_closed_loop(urdf, N, 1, line_search="first")
            gt, ge, prof = gato_closed_loop(urdf, N, 1)
            out = subprocess.run([str(croc), str(HERE / "crocoddyl_fig8.py"), urdf, str(N), "1"],
                                 capture_output=True, text=True, check=True, env=env)
            c = json.loads(out.stdout.strip().splitlines()[-1])
            f_times += ft
            g_times += gt
            c_times += c["times"]
            profs.append(prof)
            f_errs.append(fe)
            g_errs.append(ge)
            c_errs.append(c["mean_err"])
            rb.append(float(np.median(gt) / np.median(c["times"])))
            rf.append(float(np.median(ft) / np.median(c["times"])))
        prof = {k: float(np.median([p[k] for p in profs])) for k in profs[0]}
        g_err, f_err, c_err = float(np.mean(g_errs)), float(np.mean(f_errs)), float(np.mean(c_errs))
        gs, cs, fs = stats(g_times), stats(c_times), stats(f_times)
        ratio = dict(best=float(np.median(rb)), first=float(np.median(rf)), best_range=(min(rb), max(rb)),
                     first_range=(min(rf), max(rf)))
        rows.append((N, gs, cs, g_err, c_err, prof, fs, f_err, ratio))
        print(f"  gato      median {gs['median']:.3f} ms  p10 {gs['p10']:.3f}  p90 {gs['p90']:.3f}  "
              f"mean EE err {g_err * 1e3:.1f} mm")
        print(f"  crocoddyl median {cs['median']:.3f} ms  p10 {cs['p10']:.3f}  p90 {cs['p90']:.3f}  "
              f"mean EE err {c_err * 1e3:.1f} mm")
        print(f"  gato 'first' median {fs['median']:.3f} ms  p10 {fs['p10']:.3f}  p90 {fs['p90']:.3f}  "
              f"mean EE err {f_err * 1e3:.1f} mm")
        print(f"  ratio gato/crocoddyl, median of the per-repeat ratios: {ratio['best']:.2f}x ('best', "
              f"{ratio['best_range'][0]:.2f}-{ratio['best_range'][1]:.2f}), {ratio['first']:.2f}x ('first', "
              f"{ratio['first_range'][0]:.2f}-{ratio['first_range'][1]:.2f}); gato stages (us, median): {prof}")
    os.sched_setaffinity(0, all_cpus)  # the batch runs use every CPU
    print("[bench] batch throughput N=32: B=1 and B=32 on one thread, B=32 on two threads, "
          f"{args.repeats} rounds ...", flush=True)
    tp = []
    for _ in range(args.repeats):
        t1, _ = batch_throughput(urdf, 32, 1, 1)
        t32_1, _ = batch_throughput(urdf, 32, 32, 1)
        t32, _ = batch_throughput(urdf, 32, 32, 2)
        tp.append((t1, t32_1, t32))
        print(f"  B=1/1 thread {t1:.0f} solves/s, B=32/1 thread {t32_1:.0f}, B=32/2 threads {t32:.0f} "
              f"(x{t32 / t1:.2f} vs B=1, x{t32 / t32_1:.2f} vs B=32 on one thread)")
    t1, t32_1, t32 = (float(np.median([r[i] for r in tp])) for i in range(3))
    x1 = float(np.median([r[2] / r[0] for r in tp]))
    x32 = float(np.median([r[2] / r[1] for r in tp]))
    lines.append(f"### BSQP vs crocoddyl FDDP, iiwa14 figure-8 ({time.strftime('%Y-%m-%d')})\n")
    pinned = f"closed-loop runs pinned to CPU {args.cpu}" if args.cpu >= 0 else "no CPU pinning"
    lines.append(f"Machine: {machine}. Command: `python bench/bench_solver.py --repeats {args.repeats}` ({pinned}). "
                 f"crocoddyl {c['crocoddyl']} with pinocchio {c['pinocchio']} (own venv); gato with pinocchio "
                 f"{pin.__version__}, core build {gato._core.__name__} ({gato._core.ISA}). One iteration per tick, warm-started, {TICKS} ticks x {args.repeats} runs, "
                 f"closed loop on the same plant. Load average (1 min): {load0:.2f} at the start, "
                 f"{os.getloadavg()[0]:.2f} at the end.\n")
    lines.append("| N | gato, line search 'best' (default) [ms] | gato, line search 'first' [ms] | crocoddyl FDDP [ms] "
                 "| ratio best / first vs crocoddyl, median (min-max) of the repeats | mean EE error best / first / croc [mm] |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for N, gs, cs, ge, ce, _, fs, fe, ra in rows:
        lines.append(f"| {N} | {gs['median']:.3f} ({gs['p10']:.3f}-{gs['p90']:.3f}) | {fs['median']:.3f} "
                     f"({fs['p10']:.3f}-{fs['p90']:.3f}) | {cs['median']:.3f} ({cs['p10']:.3f}-{cs['p90']:.3f}) | "
                     f"{ra['best']:.2f}x ({ra['best_range'][0]:.2f}-{ra['best_range'][1]:.2f}) / "
                     f"{ra['first']:.2f}x ({ra['first_range'][0]:.2f}-{ra['first_range'][1]:.2f}) | "
                     f"{ge * 1e3:.1f} / {fe * 1e3:.1f} / {ce * 1e3:.1f} |")
    lines.append("\nTimes are median (p10-p90) per solve over all repeats; the ratio is the median of the "
                 "per-repeat ratios (gato and crocoddyl alternate, one run each per repeat). 'best' evaluates "
                 "all 8 step sizes and keeps the lowest merit (the reference semantics); 'first' stops at the "
                 "first strict decrease, as crocoddyl's backtracking does.\n")
    lines.append("\ngato per-stage profile, median per solve [us]:\n")
    lines.append("| N | KKT (dynamics derivatives, cost) | Schur + preconditioner | linear solve | line search (8 rollouts) |")
    lines.append("| --- | --- | --- | --- | --- |")
    for N, _, _, _, _, prof, _, _, _ in rows:
        lines.append(f"| {N} | {prof['kkt_us']:.0f} | {prof['schur_us']:.0f} | {prof['linsys_us']:.0f} | {prof['linesearch_us']:.0f} |")
    lines.append(f"\nBatch throughput, N=32 (same warm-started problem every repeat; medians of {args.repeats} "
                 f"rounds): B=1 on one thread {t1:.0f} solves/s; B=32 on one thread {t32_1:.0f}; B=32 on two "
                 f"threads {t32:.0f} (per round: x{x1:.2f} the B=1 single-thread throughput, x{x32:.2f} the B=32 "
                 "single-thread one, medians; rounds: "
                 + ", ".join(f"{r[0]:.0f}/{r[1]:.0f}/{r[2]:.0f}" for r in tp) + ").\n")
    report = "\n".join(lines)
    print("\n" + report)
    if args.out:
        write_result(args.out, "\n" + report + "\n")


if __name__ == "__main__":
    main()
