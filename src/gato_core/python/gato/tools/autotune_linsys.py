"""Probe a task under pure pcg and pure bdsv and store its linear-system policy.

    python -m gato.tools.autotune_linsys --plant iiwa14 --N 32 --dt 0.03125 --task-tag fig8

Two closed-loop legs track a figure-8 around the start end-effector position:
the plant is the solver's own integrator (``solver.sim_forward``), optionally
with seeded Gaussian state noise to emulate model mismatch. Leg 1 pins
``linsys="pcg"`` and records every solve's ``pred_err`` and solve time; leg 2
pins ``linsys="bdsv"`` and records its (flat) solve time. ``fit_tau`` and
``decide_policy`` turn the traces into {pure pcg | pure bdsv | auto@tau}, and
``save_tuning`` writes the entry (with provenance) under ``plant|N|task_tag`` to
``$GATO_LINSYS_TUNING`` or ``linsys_tuning.json`` next to the package (``--out``
overrides both). The legs are TIMINGS: run on a quiet machine.

Exit status: 0 on success, 2 on bad arguments or an unusable probe.
"""
from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

import numpy as np

def figure8(center, N, dt, duration, amplitude=0.1, period=4.0) -> np.ndarray:
    """Flat (6T,) probe reference: the y-z figure-8 (:class:`gato.references.Figure8`, theta = pi/2)
    around ``center`` (3,) [m] with half-amplitudes ``amplitude`` (lateral) and ``amplitude / 2``
    (vertical) [m], sampled every dt [s] at T = ceil(duration/dt) + N + 1 knots, so a window of
    N knots exists at every time in [0, duration]."""
    from ..core.references import Figure8

    T = int(np.ceil(duration / dt)) + int(N) + 1
    ref = Figure8(center, amplitude, 0.5 * amplitude, np.pi / 2, period).window(0.0, T, dt)
    return ref.solver_layout()


def _git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_leg(solver, mode, x0, traj, steps, ctrl_dt, noise=0.0, seed=0, log=None) -> dict:
    """One closed-loop probe leg with the SQP path pinned to ``mode``.

    Returns {"pred_err" (steps,), "solve_ms" (steps,), "ee_err" (steps,) [m]}.
    """
    from ..planners.controller import MPCController
    from ..frontends.policy import MPCPolicy, TrajectoryReference

    ctrl = MPCController(solver, linsys=mode, limits="off")
    ref = TrajectoryReference(traj, solver.dt, solver.N)
    policy = MPCPolicy(ctrl, ref, ctrl_dt)
    rng = np.random.default_rng(seed)
    B, nx, nq = solver.batch_size, solver.nx, solver.nq
    x = np.asarray(x0, dtype=np.float64).copy()
    policy.reset(x)
    pred, ms, ee = np.zeros(steps), np.zeros(steps), np.zeros(steps)
    every = max(steps // 10, 1)
    for i in range(steps):
        u = policy(x)
        r = policy.last_result
        pred[i], ms[i] = r.pred_err, r.solve.solve_time_us / 1e3
        x = np.asarray(solver.sim_forward(np.repeat(x[None], B, 0), np.repeat(np.asarray(u)[None], B, 0),
                                          ctrl_dt))[0]
        if noise > 0:
            x = x + rng.normal(0.0, noise, nx)
        if not np.all(np.isfinite(x)):
            raise RuntimeError(f"{mode} leg: the closed loop went non-finite at tick {i}")
        goal = ref.window(policy.t)[:3]
        ee[i] = float(np.linalg.norm(solver.ee_pos(x[:nq]) - goal))
        if log and ((i + 1) % every == 0 or i + 1 == steps):
            log(f"{mode} leg: {i + 1}/{steps} ticks, median solve {np.median(ms[:i + 1]):.3f} ms, "
                f"mean EE error {np.mean(ee[:i + 1]) * 1e3:.1f} mm")
    return {"pred_err": pred, "solve_ms": ms, "ee_err": ee}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gato.tools.autotune_linsys", description=__doc__.split("\n\n")[0])
    p.add_argument("--plant", default="iiwa14", help="registered robot name (default iiwa14)")
    p.add_argument("--N", type=int, default=32, help="horizon in knots (default 32)")
    p.add_argument("--dt", type=float, default=0.03125, help="knot spacing [s] (default 0.03125)")
    p.add_argument("--task-tag", default="fig8", help="workload tag of the entry (default fig8)")
    p.add_argument("--steps", type=int, default=400, help="closed-loop ticks per leg (default 400)")
    p.add_argument("--ctrl-dt", type=float, default=None, help="control period [s] (default: --dt)")
    p.add_argument("--amplitude", type=float, default=0.1, help="figure-8 half width [m] (default 0.1)")
    p.add_argument("--period", type=float, default=4.0, help="figure-8 period [s] (default 4)")
    p.add_argument("--max-sqp-iters", type=int, default=1, help="SQP iterations per solve (default 1)")
    p.add_argument("--noise", type=float, default=0.0,
                   help="std of Gaussian state noise added after each plant step (default 0)")
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    p.add_argument("--q0", default=None, help="start configuration, comma-separated rad (default: the ready pose)")
    p.add_argument("--n-bins", type=int, default=12, help="quantile bins of the cost fit (default 12)")
    p.add_argument("--lo", type=float, default=0.02, help="cold fraction at or below which pure pcg wins")
    p.add_argument("--hi", type=float, default=0.98, help="cold fraction at or above which pure bdsv wins")
    p.add_argument("--out", default=None, help="tuning file (default $GATO_LINSYS_TUNING or next to the package)")
    p.add_argument("--dry-run", action="store_true", help="fit and print, write nothing")
    p.add_argument("--admm", action="store_true", help="also fit the ADMM inner-loop policy (needs row groups)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    log = (lambda m: None) if args.quiet else (lambda m: print(f"[autotune] {m}", file=sys.stderr, flush=True))
    from ..core import linsys_autotune as lt
    from ..core.bsqp import BSQP, robot_info, robot_urdf
    from ..core.version import __version__

    def fail(msg):
        print(f"[autotune] error: {msg}", file=sys.stderr)
        return 2

    if args.steps < 2:
        return fail(f"--steps: expected >= 2 ticks, got {args.steps}")
    ctrl_dt = args.dt if args.ctrl_dt is None else args.ctrl_dt
    try:
        solver = BSQP(robot_urdf(args.plant), 1, args.N, args.dt, max_sqp_iters=args.max_sqp_iters)
    except (ValueError, FileNotFoundError) as e:
        return fail(str(e))
    if args.admm:
        return fail("--admm: the ADMM inner-loop probe (pcg vs bdsv_factor legs under the limit rows) is not "
                    "implemented yet; the CPU backend's wired ADMM default is bdsv_factor "
                    "(gato.linsys_autotune.resolve_admm_linsys)")
    if args.q0 is not None:
        q0 = np.array([float(v) for v in args.q0.split(",")])
    else:  # the robot's ready pose (the registry), else zeros
        q0 = np.array(robot_info(args.plant).get("q_ready", np.zeros(solver.nq)), dtype=np.float64)
    if q0.shape != (solver.nq,):
        return fail(f"--q0: expected {solver.nq} joint angles, got {q0.size}")
    x0 = np.concatenate([q0, np.zeros(solver.nv)])
    duration = args.steps * ctrl_dt
    traj = figure8(solver.ee_pos(q0), args.N, args.dt, duration, args.amplitude, args.period)
    log(f"{args.plant} N={args.N} dt={args.dt} ctrl_dt={ctrl_dt} steps={args.steps} tag={args.task_tag!r}")
    try:
        pcg = run_leg(solver, "pcg", x0, traj, args.steps, ctrl_dt, args.noise, args.seed, log)
        bdsv = run_leg(solver, "bdsv", x0, traj, args.steps, ctrl_dt, args.noise, args.seed, log)
    except RuntimeError as e:
        return fail(str(e))
    skip = 1  # the first tick follows the warm-up and carries one-off costs
    bdsv_ms = float(np.median(bdsv["solve_ms"][skip:]))
    tau, diag = lt.fit_tau(pcg["pred_err"][skip:], pcg["solve_ms"][skip:], bdsv_ms, n_bins=args.n_bins)
    decision = lt.decide_policy(pcg["pred_err"][skip:], tau, lo=args.lo, hi=args.hi)
    pe = pcg["pred_err"][skip:]
    entry = dict(decision)
    entry.update({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_sha": _git_sha(),
        "gato_version": __version__,
        "probe": {
            "steps": args.steps, "dt": args.dt, "ctrl_dt": ctrl_dt, "max_sqp_iters": args.max_sqp_iters,
            "amplitude": args.amplitude, "period": args.period, "noise": args.noise, "seed": args.seed,
            "pcg_median_ms": float(np.median(pcg["solve_ms"][skip:])), "bdsv_median_ms": bdsv_ms,
            "pred_err_p50": float(np.quantile(pe, 0.5)), "pred_err_p90": float(np.quantile(pe, 0.9)),
            "pred_err_max": float(pe.max()), "pcg_mean_ee_err_m": float(pcg["ee_err"].mean()),
            "bdsv_mean_ee_err_m": float(bdsv["ee_err"].mean()),
            "bins": {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in diag.items()},
        },
    })
    old = lt.lookup(args.plant, args.N, args.task_tag, args.out)
    if old:
        for k in ("admm_policy", "admm_tau"):
            if k in old:
                entry.setdefault(k, old[k])
    tau_s = "None" if decision["tau"] is None else f"{decision['tau']:.4g}"
    log(f"pcg median {entry['probe']['pcg_median_ms']:.3f} ms, bdsv median {bdsv_ms:.3f} ms, "
        f"pred_err p50 {entry['probe']['pred_err_p50']:.3g} p90 {entry['probe']['pred_err_p90']:.3g}")
    log(f"decision: policy={decision['policy']} tau={tau_s} cold_frac={decision['cold_frac']:.3f}")
    if args.dry_run:
        log("dry run: nothing written")
        return 0
    path = lt.save_tuning(args.plant, args.N, args.task_tag, entry, args.out)
    log(f"wrote {args.plant}|{args.N}|{args.task_tag} to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
