"""Joint limits in closed loop: the controller's limit mechanisms on a simulated iiwa14.

Two workloads, both on gato.worlds.PinocchioWorld (pinocchio ABA + RK4, the
solver's own rigid-body model; the applied torque is clamped to the URDF effort
limits, as a driver would):

* step-reference pick-and-place (gato.tasks.pickplace_scenarios, ramp 0): the
  reference jumps to each goal, the unconstrained MPC drives the joints well past
  the URDF velocity limit; reported: the peak simulated |qd_j| / qd_limit_j, the
  task time (sum over goals of the time until the EE stays within 2 cm of the goal)
  and the mean EE error;
* a slow figure-8 (gato.tasks.fig8_scenarios, speed ratio 0.5 of the limit), where
  no limit binds: RMS EE tracking error and the task time, the time the EE takes to
  complete the figure-8: the run's duration plus the EE's lag behind the reference
  path (the time shift, at 1 ms resolution, that best aligns the EE trace with the
  reference; a controller slowed by limits lags).

    scripts/activate.sh && python bench/bench_limits.py [--n 3] [--out docs/benchmarks.md]

No wall-clock figures: every number here is a simulated-physics outcome and is
deterministic (seeded scenarios, bit-deterministic solves).
"""
from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

import gato
from gato.controller import MPCController
from gato.tasks import fig8_reference, fig8_scenarios, pickplace_scenarios
from gato.worlds import PinocchioWorld

PLANT = "iiwa14"
N, DT = 32, 0.03125          # knots, knot spacing = control period [s]
SUBSTEPS = 4                 # RK4 substeps per control period (velocity sampled after each)
GOAL_S = 2.0                 # seconds per pick-and-place goal
REACH_TOL = 0.02             # m: a goal is reached when the EE stays within this
LAG_GRID = np.arange(-0.1, 0.5, 0.001)  # s: candidate lags of the EE behind the figure-8 reference


def _setup():
    urdf = gato.robot_urdf(PLANT)
    model = pin.buildModelFromUrdf(str(urdf))
    return urdf, model


#: The solver of both workloads: an aggressive EE tracker (SolverParams' q_cost 2 / N_cost 50 never
#: reaches the velocity limit on a 1 s horizon; at 150 / 750 a step reference asks for 2-3x the
#: limit) on the RK4 integrator, the discretization of the simulated plant: with the default
#: constant-acceleration step the plan's knot-1 velocity can sit on the bound while the plant,
#: integrated finely, overshoots it by ~0.1 rad/s during a hard acceleration.
SOLVER = dict(q_cost=150.0, N_cost=750.0, integrator="rk4")


def _controller(urdf, limits, limits_kw=None, solver_kw=None):
    s = gato.BSQP(urdf, 1, N, DT, **(SOLVER if solver_kw is None else solver_kw))
    return s, MPCController(s, limits=limits, limits_kw=limits_kw)


def _settle_time(err, tol, dt):
    """Time of the first sample after which err stays below tol (len*dt when it never does)."""
    above = np.flatnonzero(np.asarray(err) >= tol)
    return (above[-1] + 1) * dt if above.size else 0.0


def _advance(world, q, dq, u, ratio, qd_max):
    """One control period as SUBSTEPS RK4 steps (the same integration as substeps=SUBSTEPS),
    recording |qd| / limit after each."""
    for _ in range(SUBSTEPS):
        q, dq = world.step(q, dq, u, DT / SUBSTEPS)
        ratio.append(np.abs(dq) / qd_max)
    return q, dq


def run_pickplace(scenario, limits=None, limits_kw=None, goal_s=GOAL_S, solver_kw=None):
    """One closed-loop pick-and-place run: dict(peak_qd_ratio (max over joints and RK4 substeps of
    |qd_j| / URDF limit_j), peak_joint, task_time [s], mean_err [m], limits, plan_viol (G,) max over
    ticks of the winning plan's row violation)."""
    urdf, model = _setup()
    s, ctrl = _controller(urdf, limits, limits_kw, solver_kw)
    world = PinocchioWorld(urdf, substeps=1)
    u_max = np.asarray(s.limits["u"])
    qd_max = np.asarray(s.limits["qd"])
    q, dq = np.array(scenario["q0"], dtype=np.float64), np.zeros(model.nv)
    ctrl.reset(np.concatenate([q, dq]))
    ticks = int(round(goal_s / DT))
    qd_ratio, task_time, errs, viols = [], 0.0, [], []
    for goal in scenario["goals"]:
        ref = np.tile(np.concatenate([goal, np.zeros(3)]), N)
        goal_err = []
        for _ in range(ticks):
            r = ctrl.step(np.concatenate([q, dq]), ref)
            u = np.clip(np.asarray(r.u), -u_max, u_max)
            q, dq = _advance(world, q, dq, u, qd_ratio, qd_max)
            e = float(np.linalg.norm(s.ee_pos(q) - goal))
            goal_err.append(e)
            if r.row_viol is not None:
                viols.append(np.asarray(r.row_viol))
        task_time += _settle_time(goal_err, REACH_TOL, DT)
        errs += goal_err
    qd_ratio = np.array(qd_ratio)
    return dict(peak_qd_ratio=float(qd_ratio.max()), peak_joint=int(np.argmax(qd_ratio.max(axis=0))),
                task_time=task_time, mean_err=float(np.mean(errs)), limits=ctrl.limits or "off",
                plan_viol=np.max(viols, axis=0) if viols else None)


def path_lag(ee, ref_xyz, dt):
    """Lag [s] of the EE trace ee (T, 3) (sample t at time (t+1) dt) behind the reference samples
    ref_xyz (at times k dt): the shift in LAG_GRID minimizing the RMS distance between ee(t) and
    the linearly interpolated reference at t - lag, over the samples after the first 10 %."""
    t = (np.arange(len(ee)) + 1) * dt
    keep = slice(len(ee) // 10, None)
    tr = np.arange(len(ref_xyz)) * dt
    best, lag = np.inf, 0.0
    for tau in LAG_GRID:
        p = np.stack([np.interp(t[keep] - tau, tr, ref_xyz[:, i]) for i in range(3)], axis=1)
        e = float(np.mean(np.sum((ee[keep] - p) ** 2, axis=1)))
        if e < best:
            best, lag = e, round(float(tau), 6)
    return lag


def run_fig8(scenario, limits=None, limits_kw=None, periods=1, solver_kw=None):
    """One closed-loop figure-8 run: dict(rms_err [m], task_time [s] (the run's duration plus the
    EE's lag behind the path, :func:`path_lag`), lag [s], peak_qd_ratio, limits, plan_viol)."""
    urdf, model = _setup()
    s, ctrl = _controller(urdf, limits, limits_kw, solver_kw)
    world = PinocchioWorld(urdf, substeps=1)
    u_max = np.asarray(s.limits["u"])
    qd_max = np.asarray(s.limits["qd"])
    sc = dict(scenario, dt=DT)
    ref, sim_time = fig8_reference(sc, N, periods=periods)
    ref = ref.reshape(-1, 6)
    q, dq = np.array(scenario["q0"], dtype=np.float64), np.zeros(model.nv)
    ctrl.reset(np.concatenate([q, dq]))
    ticks = int(round(sim_time / DT))
    errs, ratio, viols, ee = [], [], [], []
    for t in range(ticks):
        r = ctrl.step(np.concatenate([q, dq]), ref[t:t + N].ravel())
        if r.row_viol is not None:
            viols.append(np.asarray(r.row_viol))
        u = np.clip(np.asarray(r.u), -u_max, u_max)
        q, dq = _advance(world, q, dq, u, ratio, qd_max)
        ee.append(s.ee_pos(q))
        errs.append(float(np.linalg.norm(ee[-1] - ref[t + 1, :3])))
    errs = np.array(errs)
    lag = path_lag(np.array(ee), ref[:, :3], DT)
    return dict(rms_err=float(np.sqrt(np.mean(errs ** 2))), task_time=ticks * DT + lag, lag=lag,
                peak_qd_ratio=float(np.max(ratio)), limits=ctrl.limits or "off",
                plan_viol=np.max(viols, axis=0) if viols else None)


def pickplace_set(n, seed=0):
    _, model = _setup()
    return pickplace_scenarios(model, PLANT, n, seed=seed, ramps=(0.0,))


def fig8_set(n, seed=0, ratio=0.5):
    _, model = _setup()
    return fig8_scenarios(model, PLANT, n, seed=seed, dt=DT, ratio_range=(ratio, ratio))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=3, help="scenarios per workload (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mechs", default="off,admm,al,barrier", help="comma-separated limits= values")
    p.add_argument("--out", default=None, help="append a markdown section to this file")
    args = p.parse_args(argv)
    mechs = args.mechs.split(",")
    lines = []
    pp = pickplace_set(args.n, args.seed)
    lines.append(f"Step-reference pick-and-place (`pickplace_scenarios(seed={args.seed}, ramps=(0,))`, "
                 f"{len(pp[0]['goals'])} goals x {GOAL_S} s):\n")
    lines.append("| scenario | limits | peak qd / limit (joint) | task time [s] | mean EE err [m] | "
                 "plan viol q / qd / u |")
    lines.append("|---|---|---|---|---|---|")
    for sc in pp:
        for m in mechs:
            r = run_pickplace(sc, None if m == "default" else m)
            pv = "—" if r["plan_viol"] is None else " / ".join(f"{v:.3g}" for v in r["plan_viol"])
            lines.append(f"| {sc['id']} | {m} | {r['peak_qd_ratio']:.3f} (j{r['peak_joint'] + 1}) | "
                         f"{r['task_time']:.3f} | {r['mean_err']:.4f} | {pv} |")
            print(lines[-1], flush=True)
    f8 = fig8_set(args.n, args.seed)
    lines.append("")
    lines.append(f"Slow figure-8 (`fig8_scenarios(seed={args.seed})`, speed ratio 0.5 of the limit, one period):\n")
    lines.append("| scenario | limits | RMS EE err [m] | task time [s] (lag [ms]) | peak qd / limit |")
    lines.append("|---|---|---|---|---|")
    for sc in f8:
        for m in mechs:
            r = run_fig8(sc, None if m == "default" else m)
            lines.append(f"| {sc['id']} | {m} | {r['rms_err']:.5f} | {r['task_time']:.3f} ({1e3 * r['lag']:.0f}) | "
                         f"{r['peak_qd_ratio']:.3f} |")
            print(lines[-1], flush=True)
    if args.out:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent).stdout.strip()
        head = (f"\n## Joint limits in closed loop ({datetime.date.today().isoformat()}, {sha}, "
                f"{platform.machine()})\n\n`python bench/bench_limits.py --n {args.n}`: iiwa14, N = {N}, "
                f"dt = control period = {DT} s, PinocchioWorld RK4 x{SUBSTEPS}, torque clamped to the URDF "
                "effort; `limits=` of MPCController (`admm` = the default, LIMIT_DEFAULTS). Simulated "
                "figures, deterministic; no timings.\n\n")
        with open(args.out, "a") as fh:
            fh.write(head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
