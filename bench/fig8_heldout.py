"""Held-out figure-8 check of BSQP weights: gato.tasks.fig8_scenarios (speed ratio 0.6-0.9)
through gato.MPC_GATO at dt = 0.01 s (knot spacing = control period), per arm.

    python bench/fig8_heldout.py --robot iiwa14 --seeds 100 101 --n 3 \
        --params '{"u_ref": "gravity", "q_cost": 12.0}'
    python bench/fig8_heldout.py --robot indy7 --bringup   # the weights of src/gato_bringup/config/indy7.yaml

Prints, per scenario, the mean EE tracking error (knot 0 of the reference window) and the
mean over all scenarios in mm, as JSON on the last line. pinocchio world (MPC_GATO's default),
1 ms substeps, fixed pacing (deterministic), N = 32 knots, limits admm (the node's default).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def bringup_params(robot: str) -> dict:
    """The solver weights of the shipped controller configuration of ``robot``: the controller
    schema's defaults for it (gato_ros.params, the generator of src/gato_bringup/config/<robot>.yaml)."""
    from gato_ros import params as P
    cfg = P.defaults(P.CONTROLLER, robot)
    keys = ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost",
            "mu", "rho", "max_sqp_iters", "u_ref")
    return {k: cfg[k] for k in keys}


def run(robot: str, params: dict, seeds, n: int, N: int = 32, periods: float = 1.0, limits: str = "admm") -> dict:
    import pinocchio as pin

    import gato
    from gato.frontends.mpc_gato import MPC_GATO
    from gato.sim.scenarios import fig8_reference, fig8_scenarios

    urdf = str(gato.robot_urdf(robot))
    model = pin.buildModelFromUrdf(urdf)
    rows = []
    for seed in seeds:
        for sc in fig8_scenarios(model, robot, n, seed=int(seed), dt=0.01, ratio_range=(0.6, 0.9)):
            ref, sim_time = fig8_reference(sc, N, periods=periods)
            m = MPC_GATO(model, urdf, N=N, dt=0.01, params=dict(params), plant_type=robot, limits=limits,
                         verbose=False)
            x0 = np.concatenate([sc["q0"], np.zeros(model.nv)])
            t0 = time.perf_counter()
            _, st = m.run_mpc_fig8(x0, ref, sim_time=sim_time, pace_by_solve_time=False)
            rows.append(dict(seed=int(seed), id=sc["id"], ratio=float(sc["ratio"]),
                             mean_mm=1000 * float(st["mean_tracking_error"]),
                             max_mm=1000 * float(st["max_tracking_error"]), wall_s=time.perf_counter() - t0))
            print(f"{robot} seed {seed} {sc['id']}: ratio {sc['ratio']:.2f} mean {rows[-1]['mean_mm']:.2f} mm "
                  f"max {rows[-1]['max_mm']:.2f} mm ({rows[-1]['wall_s']:.1f} s)", file=sys.stderr, flush=True)
    return dict(robot=robot, params=params, N=N, dt=0.01, periods=periods, limits=limits, rows=rows,
                mean_mm=float(np.mean([r["mean_mm"] for r in rows])),
                max_mean_mm=float(np.max([r["mean_mm"] for r in rows])))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[100])
    ap.add_argument("--n", type=int, default=3, help="scenarios per seed")
    ap.add_argument("--N", type=int, default=32)
    ap.add_argument("--periods", type=float, default=1.0, help="figure-8 periods per episode")
    ap.add_argument("--params", default="{}", help="SolverParams overrides as JSON")
    ap.add_argument("--bringup", action="store_true", help="the weights of the shipped bringup config")
    a = ap.parse_args(argv)
    params = bringup_params(a.robot) if a.bringup else {}
    params.update(json.loads(a.params))
    res = run(a.robot, params, a.seeds, a.n, N=a.N, periods=a.periods)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
