"""COLLISION rows on the iiwa14 (docs/constraints.md, "Collision clearance rows"): per
mechanism (and weight), a lockstep closed loop on PinocchioWorld whose EE reference moves
0.4 m along +y at 0.15 m/s straight through a sphere obstacle (radius 0.06 m, centred 0.2 m
along the path), N = 16, dt = 0.05 s, 20 ms ticks, 3 s, ADMM limits (for the ADMM / barrier
/ telemetry rows) or AL limits (AL rows), one SQP iteration per tick (the MPC default).

Reports per run: min clearance over all spheres and steps [m], final EE error to the path's
end point [m], median / p90 solve time [ms] (this machine, 2 shared cores: indicative).

    python bench/bench_collision.py [--mech admm al barrier telemetry] [--rho ...]
    python bench/bench_collision.py --open-loop --mech admm --rho 1 3 10 30 100 1000
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


def open_loop(mech, rho=None, iters=12, margin=0.02):
    """12 warm real-time iterations from rest toward a goal 0.36 m along +y behind a sphere
    obstacle (r 0.07 m at 0.18 m): (min clearance over spheres and knots 1..N-1 of the final
    plan [m], its last knot's EE distance to the goal [m])."""
    s = gato.BSQP(URDF, 1, N, DT)
    s.enable_limit_al() if mech == "al" else (s.enable_limit_barrier() if mech == "barrier" else s.enable_limit_admm())
    p0 = s.ee_pos(Q0)
    c = p0 + np.array([0.0, 0.18, 0.0])
    s.set_collision_environment(spheres=[(*c, 0.07)])
    if mech != "none":
        s.enable_collision(mech=mech, rho=rho, margin=margin)
    goal = p0 + 2.0 * (c - p0)
    ref = np.tile(np.concatenate([goal, np.zeros(3)]), N)[None]
    x0 = np.concatenate([Q0, np.zeros(7)])[None]
    xu = None
    for _ in range(iters):
        xu = s.solve(x0, ref, xu).xu
    qs = [xu[0][k * 21:k * 21 + 7] for k in range(N)]
    return (float(min(s.collision_clearance(q)[0].min() for q in qs[1:])),
            float(np.linalg.norm(s.ee_pos(qs[-1]) - goal)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mech", nargs="+", default=["none", "telemetry", "admm", "al", "barrier"])
    ap.add_argument("--rho", nargs="+", type=float, default=[None])
    ap.add_argument("--open-loop", action="store_true", help="the open-loop weight sweep instead")
    a = ap.parse_args()
    if a.open_loop:
        print("| mech | weight | min clearance [m] | EE to goal [m] |")
        print("|---|---|---|---|")
        for m in a.mech:
            for rho in a.rho:
                d, e = open_loop(m, rho)
                print(f"| {m} | {rho if rho is not None else 'default'} | {d:.4f} | {e:.4f} |", flush=True)
        return
    print("| mech | rho | min clearance [m] | final EE error [m] | solve median / p90 [ms] |")
    print("|---|---|---|---|---|")
    for m in a.mech:
        for rho in a.rho:
            r = closed_loop(m, rho)
            print(f"| {m} | {rho if rho is not None else 'default'} | {r['min_clearance']:.4f} | {r['ee_err']:.4f} | "
                  f"{r['solve_ms_median']:.2f} / {r['solve_ms_p90']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
