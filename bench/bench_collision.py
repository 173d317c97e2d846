"""COLLISION rows on the iiwa14 (docs/constraints.md, "Collision clearance rows"): per
mechanism (and weight), a lockstep closed loop on PinocchioWorld whose EE reference moves
0.4 m along +y at 0.15 m/s straight through a sphere obstacle (radius 0.06 m, centred 0.2 m
along the path), N = 16, dt = 0.05 s, 20 ms ticks, 3 s, ADMM limits (for the ADMM / barrier
/ telemetry rows) or AL limits (AL rows), one SQP iteration per tick (the MPC default).

Reports per run: min clearance over all spheres and steps [m], final EE error to the path's
end point [m], median / p90 solve time [ms] (this machine, 2 shared cores: indicative).

    python bench/bench_collision.py [--mech admm al barrier telemetry] [--rho ...]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import gato
from gato.worlds import PinocchioWorld

URDF = str(gato.robot_urdf("iiwa14"))
Q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
N, DT = 16, 0.05


def closed_loop(mech, rho=None, T=3.0, tick=0.02, margin=0.02):
    s = gato.BSQP(URDF, 1, N, DT)
    s.enable_limit_al() if mech == "al" else s.enable_limit_admm()
    p0 = s.ee_pos(Q0)
    c = p0 + np.array([0.0, 0.2, 0.0])
    s.set_collision_environment(spheres=[(*c, 0.06)])
    if mech != "none":
        s.enable_collision(mech=mech, rho=rho, margin=margin)
    world = PinocchioWorld(URDF)
    q, dq = Q0.copy(), np.zeros(7)
    s.hold_warm(np.concatenate([q, dq])[None])

    def path(t):
        return p0 + np.array([0.0, min(0.15 * t, 0.4), 0.0])

    dmin, times, t = [], [], 0.0
    for _ in range(int(round(T / tick))):
        ref = np.concatenate([np.concatenate([path(t + k * DT), np.zeros(3)]) for k in range(N)])
        t0 = time.perf_counter()
        r = s.solve_warm(np.concatenate([q, dq])[None], ref[None])
        times.append(time.perf_counter() - t0)
        s.shift_warm()
        q, dq = world.step(q, dq, r.xu[0][14:21], tick)
        t += tick
        dmin.append(s.collision_clearance(q)[0].min())
    ms = 1e3 * np.array(times)
    return dict(mech=mech, rho=rho, min_clearance=float(np.min(dmin)),
                ee_err=float(np.linalg.norm(s.ee_pos(q) - path(t))),
                solve_ms_median=float(np.median(ms)), solve_ms_p90=float(np.percentile(ms, 90)),
                n_spheres=len(s.collision_spheres["radii"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mech", nargs="+", default=["none", "telemetry", "admm", "al", "barrier"])
    ap.add_argument("--rho", nargs="+", type=float, default=[None])
    a = ap.parse_args()
    print("| mech | rho | min clearance [m] | final EE error [m] | solve median / p90 [ms] |")
    print("|---|---|---|---|---|")
    for m in a.mech:
        for rho in a.rho:
            r = closed_loop(m, rho)
            print(f"| {m} | {rho if rho is not None else 'default'} | {r['min_clearance']:.4f} | {r['ee_err']:.4f} | "
                  f"{r['solve_ms_median']:.2f} / {r['solve_ms_p90']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
