"""Per-tick diagnosis of a joint-velocity overshoot on one step scenario (issue 22).

Runs gato.limit_scenarios.step_scenarios(plant, 1, seed, step_range=(step, step))[0] with
the default controller (or ``--kw`` overrides of its ADMM limits) on MuJoCoWorld or
PinocchioWorld, 1 ms world steps, the command held for the 10 ms tick and clamped to the
URDF effort, and separates the candidates: the plan's knot-1 velocity (what the solver
promised), the plant's velocity at the end of the tick (prediction error = the RTI lag /
discretization / model mismatch), the maximum inside the tick (zero-order hold between
knots), the winning plan's row violation, the ADMM residual and inner iterations, the
line-search step. All velocities as |qd_j| / URDF limit_j.

    source scripts/activate.sh
    python bench/limits_diagnose.py --seed 100 --step 1.2 [--integrator rk4] [--world pinocchio] \\
        [--kw "{'iters': 10, 'rho_qd': 0.03}"]
"""
from __future__ import annotations

import argparse
import ast
import sys

import numpy as np

import gato
from gato.controller import MPCController
from gato.limit_scenarios import step_scenarios
from gato.worlds import MuJoCoWorld, PinocchioWorld


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plant", default="iiwa14")
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--step", type=float, default=1.2, help="per-joint step size [rad]")
    p.add_argument("--integrator", default=None, help="solver integrator (default: BSQP's)")
    p.add_argument("--world", default="mujoco", choices=("mujoco", "pinocchio"))
    p.add_argument("--kw", default=None, help="limits_kw overrides, a Python dict literal")
    p.add_argument("--goal-ticks", type=int, default=150)
    a = p.parse_args(argv)
    sc = step_scenarios(a.plant, 1, seed=a.seed, step_range=(a.step, a.step))[0]
    urdf = gato.robot_urdf(a.plant)
    extra = {} if a.integrator is None else {"integrator": a.integrator}
    s = gato.BSQP(urdf, 1, sc["N"], sc["dt"], **extra)
    c = MPCController(s, limits_kw=ast.literal_eval(a.kw) if a.kw else None)
    qdm, um = np.asarray(s.limits["qd"]), np.asarray(s.limits["u"])
    nq, nx, nu = qdm.size, int(s.nx), int(s.nu)
    w = MuJoCoWorld(urdf, timestep=0.001) if a.world == "mujoco" else PinocchioWorld(urdf)
    sub = int(round(sc["dt"] / 0.001))
    q, dq = sc["q0"].copy(), np.zeros(nq)
    c.reset(np.r_[q, dq])
    rows = []
    for g in sc["goals"]:
        ref = np.tile(np.r_[g, 0, 0, 0], sc["N"])
        for _ in range(a.goal_ticks):
            r = c.step(np.r_[q, dq], ref)
            xu = np.asarray(r.xu_best)
            qd1 = xu[nx + nu + nq: nx + nu + 2 * nq]           # the plan's knot-1 velocity
            u = np.clip(np.asarray(r.u), -um, um)
            mx = np.zeros(nq)
            for _ in range(sub):
                q, dq = w.step(q, dq, u, 0.001)
                mx = np.maximum(mx, np.abs(dq))
            st = r.solve.stats
            rows.append(dict(plan=np.abs(qd1) / qdm, end=np.abs(dq) / qdm, intra=mx / qdm, pred=(dq - qd1) / qdm,
                             viol=np.asarray(r.row_viol), rp=float(np.asarray(st.admm_r_prim)[0]),
                             it=int(np.asarray(st.admm_iters)[0]), alpha=float(np.ravel(st.step_size)[0])))
    plan, end, intra = (np.array([r[k] for r in rows]) for k in ("plan", "end", "intra"))
    print(f"scenario {sc['id']} step {sc['step']:.2f} integrator {a.integrator or 'default'} world {a.world} "
          f"kw {a.kw or '{}'}")
    print("shrunk bound / limit          ", np.round((qdm - 0.1) / qdm, 3))
    print("peak plant (in-tick) / limit  ", np.round(intra.max(0), 3), "max", round(float(intra.max()), 4))
    print("peak plan knot 1 / limit      ", np.round(plan.max(0), 3))
    print("peak plant end of tick / limit", np.round(end.max(0), 3))
    k, j = np.unravel_index(np.argmax(intra), intra.shape)
    print(f"worst: tick {k}, joint {j + 1}")
    for kk in range(max(0, k - 3), min(len(rows), k + 3)):
        r = rows[kk]
        print(f"  tick {kk:3d} plan {r['plan'][j]:.4f} end {r['end'][j]:.4f} in-tick {r['intra'][j]:.4f} "
              f"plant-plan {r['pred'][j]:+.4f} row viol q/qd/u {np.round(r['viol'], 4)} r_prim {r['rp']:.3g} "
              f"inner its {r['it']} alpha {r['alpha']:.3g}")
    print("max row viol q/qd/u", np.round(np.max([r["viol"] for r in rows], axis=0), 4))


if __name__ == "__main__":
    sys.exit(main())
