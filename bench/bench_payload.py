"""Payload experiment (the reference's Fig. 7 protocol, sized to this machine): iiwa14
pick-and-place with an unmodelled pendulum payload hanging from the EE.

Per scenario (gato.tasks.pickplace_scenarios(seed=--seed): 3 goals, start pose jittered around
the ready pose, a step or minimum-jerk reference ramp) and configuration, gato.MPC_GATO (bsqp
planner, N = 32, dt = 31.25 ms, SolverParams() defaults, lockstep PinocchioWorld with the
pendulum, RK4 at 1 ms, torques clamped to the URDF limits) runs run_mpc_goals (5 s timeout per
goal, 5 cm / 1 rad/s (L1) gates). Success = every goal reached, no joint outside its URDF
position or velocity limit at any recorded tick, no planner fallback and no divergence.

Configurations: B = 1 plain MPC; B in --batches with the Fibonacci-sphere sampler
(estimator="fe", ForceHypothesisBatch) and with the identified-weight sampler (estimator="wid",
IdentifiedWrenchSampler, its identifier fed every 1 ms substep; at B = 1 the weight alone).

    python bench/bench_payload.py --out /tmp/payload --n 20 [--batches 1 8 32] [--mass 15]
        [--length 0.5]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import gato
from gato import tasks
from gato.mpc_gato import MPC_GATO

IIWA = gato.robot_urdf("iiwa14")
DT = 0.03125


def run(sc, B, estimator, pendulum, seed):
    m = MPC_GATO(None, IIWA, N=32, dt=DT, batch_size=B, estimator=estimator, pendulum_config=pendulum,
                 fe_seed=seed, verbose=False)
    x0 = np.r_[sc["q0"], np.zeros(7)]
    lim = m.solver.limits
    t0 = time.perf_counter()
    try:
        _, st = m.run_mpc_goals(x0, sc["goals"], goal_timeout=5.0, goal_threshold=0.05, velocity_threshold=1.0,
                                pace_by_solve_time=False, goal_ramp=sc["ramp"])
    except RuntimeError as e:  # the world diverged
        return dict(success=False, reason=f"diverged: {e}"[:80], goals_reached=0, wall_s=time.perf_counter() - t0)
    q, dq = st["joint_positions"], st["joint_velocities"]
    qlo, qhi, qdmax = (np.asarray(lim[k], dtype=float) for k in ("q_lo", "q_hi", "qd"))
    viol = []
    if len(q) and (np.any(q < qlo - 1e-6) or np.any(q > qhi + 1e-6)):
        viol.append("position")
    if len(dq) and np.any(np.abs(dq) > qdmax + 1e-6):
        viol.append("velocity")
    fallbacks = sum(1 for p in m.last_record.planner_stats if p.fallback)
    ok = bool(st["all_reached"]) and not viol and fallbacks == 0
    reason = "" if ok else ",".join(([] if st["all_reached"] else [f"{st['goals_reached']}/3 goals"]) + viol
                                     + ([f"{fallbacks} fallbacks"] if fallbacks else []))
    return dict(success=ok, reason=reason, goals_reached=int(st["goals_reached"]), wall_s=time.perf_counter() - t0,
                time_to_all=st["time_to_all_reached"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/bench_payload")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--mass", type=float, default=15.0)
    ap.add_argument("--length", type=float, default=0.5)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(IIWA))
    scen = tasks.pickplace_scenarios(model, "iiwa14", a.n, seed=a.seed)
    pend = {"mass": a.mass, "length": a.length}
    configs = [(1, None)] + [(B, e) for e in ("fe", "wid") for B in a.batches if not (B == 1 and e == "fe")]
    rows = []
    for B, est in configs:
        for i, sc in enumerate(scen):
            r = run(sc, B, est, pend, a.seed + i)
            r.update(B=B, estimator=est, scenario=sc["id"], ramp=sc["ramp"])
            rows.append(r)
            print(f"B={B:2d} {str(est):4s} {sc['id']} ramp {sc['ramp']:.1f}: {'OK ' if r['success'] else 'FAIL'} "
                  f"{r['reason']} ({r['wall_s']:.1f} s)", flush=True)
    (out / "payload.json").write_text(json.dumps(dict(args=vars(a), command=" ".join(sys.argv), rows=rows), indent=1,
                                                 default=str))
    print("| B | sampler | success | goals reached (mean of 3) |")
    print("|---|---|---|---|")
    for B, est in configs:
        rs = [r for r in rows if r["B"] == B and r["estimator"] == est]
        print(f"| {B} | {est or 'none'} | {sum(r['success'] for r in rs)}/{len(rs)} "
              f"({100 * np.mean([r['success'] for r in rs]):.0f} %) | {np.mean([r['goals_reached'] for r in rs]):.2f} |")


if __name__ == "__main__":
    main()
