"""Disturbance experiment (the reference's Fig. 5 protocol): iiwa14 figure-8 tracking with a
constant, unmodelled external force on the EE, batch-as-identity wrench hypotheses.

Per (force magnitude F, batch size B, direction seed): gato.MPC_GATO (the bsqp planner over
gato.simloop.run_closed_loop, lockstep PinocchioWorld, RK4 at sim_dt = 1 ms, torques clamped
to the URDF limits) tracks bench/fig8_problem's figure-8 (N = 32, dt = 31.25 ms, its cost
weights, one SQP iteration per tick) from Q_START at rest for --sim-time seconds, with the
ground-truth world force F * d (d a seeded uniform direction, applied from t = 0; the solver is
never told). Configurations:

    B = 1   plain MPC (no hypotheses)
    B = 8, 32   ForceHypothesisBatch(ForceEstimator(B, seed)): B wrench guesses, the one-step
            rollout picks the winner each tick
    B = 1 + wid  (extra row) IdentifiedWrenchBatch: one wrench identified by least squares
            from the 1 ms motion (OneStepWrenchIdentifier fed every substep)

Reported: mean tracking error ||ee - reference knot 0|| over the whole run, and over t >= 2 s
(after the estimators settled); median and spread over the directions. Writes a JSON and a
PNG plot. Usage:

    python bench/bench_disturbance.py --out /tmp/dist [--forces 0 20 40 60 80] [--batches 1 8 32]
        [--dirs 3] [--sim-time 5.0] [--no-wid]
"""
import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fig8_problem import DT, Q_START, WEIGHTS, figure8  # noqa: E402

import gato  # noqa: E402
from gato.mpc_gato import MPC_GATO  # noqa: E402

IIWA = gato.robot_urdf("iiwa14")
N = 32
SETTLED_S = 2.0


def directions(n, seed):
    """n unit vectors drawn uniformly on the sphere (seeded)."""
    v = np.random.default_rng(seed).standard_normal((n, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def run(F, d, B, mode, sim_time, seed):
    kw = dict(wrench_id=True) if mode == "wid" else dict(estimator="fe" if B > 1 else None)
    m = MPC_GATO(None, IIWA, N=N, dt=DT, batch_size=B, params=dict(WEIGHTS), fe_seed=seed,
                 constant_f_ext=np.r_[F * d, 0.0, 0.0, 0.0], verbose=False, **kw)
    x0 = np.r_[Q_START, np.zeros(7)]
    n = int(np.ceil(sim_time / DT)) + N + 2
    traj = np.zeros((n, 6))
    traj[:, :3] = figure8(m.solver.ee_pos(Q_START), DT * np.arange(n))
    t0 = time.perf_counter()
    _, st = m.run_mpc_fig8(x0, traj.reshape(-1), sim_dt=0.001, sim_time=sim_time, pace_by_solve_time=False)
    wall = time.perf_counter() - t0
    e, t = np.asarray(st["goal_distances_knot0"]), np.asarray(st["timestamps"])
    h = m.controller.hypotheses
    est = None
    if h is not None:
        hs = h.get_stats()
        est = np.asarray(hs.get("smoothed_estimate", hs.get("estimate")))[:3].tolist()
    return dict(F=F, B=B, mode=mode, dir=d.tolist(), mean=float(np.mean(e)), mean_settled=float(np.mean(e[t >= SETTLED_S])),
                max=float(np.max(e)), n_ticks=int(st["n_ticks"]), wall_s=wall, force_estimate=est)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/bench_disturbance")
    ap.add_argument("--forces", type=float, nargs="+", default=[0, 20, 40, 60, 80])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--dirs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sim-time", type=float, default=5.0)
    ap.add_argument("--no-wid", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dirs = directions(a.dirs, a.seed)
    configs = [(B, "fe" if B > 1 else "none") for B in a.batches] + ([] if a.no_wid else [(1, "wid")])
    rows = []
    for F in a.forces:
        for k, d in enumerate(dirs):
            for B, mode in configs:
                r = run(F, d, B, mode, a.sim_time, a.seed + k)
                rows.append(r)
                print(f"F={F:5.1f} N dir {k} B={B:2d} {mode:4s}: mean {1000 * r['mean']:6.1f} mm, "
                      f"t>={SETTLED_S:.0f}s {1000 * r['mean_settled']:6.1f} mm, max {1000 * r['max']:6.1f} mm "
                      f"({r['wall_s']:.1f} s)", flush=True)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = ""
    meta = dict(commit=commit, machine=platform.machine(), processor=platform.processor(), sim_time=a.sim_time,
                dirs=dirs.tolist(), seed=a.seed, N=N, dt=DT, command=" ".join(sys.argv))
    (out / "disturbance.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    table(rows, configs, a.forces)
    plot(rows, configs, a.forces, out / "disturbance.png")


def table(rows, configs, forces):
    head = "| F [N] | " + " | ".join(f"B = {B}{' + wid' if m == 'wid' else ''}" for B, m in configs) + " |"
    print(head)
    print("|" + "---|" * (len(configs) + 1))
    for F in forces:
        cells = []
        for B, m in configs:
            v = np.array([[r["mean"], r["mean_settled"]] for r in rows if r["F"] == F and r["B"] == B
                          and r["mode"] == m]) * 1000
            cells.append(f"{np.median(v[:, 0]):.1f} [{v[:, 0].min():.1f}-{v[:, 0].max():.1f}] / "
                         f"{np.median(v[:, 1]):.1f}")
        print(f"| {F:.0f} | " + " | ".join(cells) + " |")


def plot(rows, configs, forces, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for B, m in configs:
        v = [[r["mean"] * 1000 for r in rows if r["F"] == F and r["B"] == B and r["mode"] == m] for F in forces]
        med = [np.median(x) for x in v]
        lo = [np.median(x) - min(x) for x in v]
        hi = [max(x) - np.median(x) for x in v]
        ax.errorbar(forces, med, yerr=[lo, hi], marker="o", capsize=3,
                    label=f"B = {B}" + (" + identified wrench" if m == "wid" else ""))
    ax.axhline(20.0, color="grey", ls="--", lw=0.8, label="2 cm")
    ax.set_xlabel("constant EE force [N]")
    ax.set_ylabel("mean tracking error [mm]")
    ax.set_title("iiwa14 figure-8 under an unmodelled EE force")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
