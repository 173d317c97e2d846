"""go2 pushed while standing under the floating-base MPC: issue 34's push-recovery protocol.

gato.sim.go2.run_go2_push (re-exported by gato.tasks): from reset("stand"), a horizontal force of
impulse / duration on the base (default 20 N s over 50 ms) at a seeded time in [1.0, 1.5] s in a
seeded direction (uniform in the horizontal plane, or --lateral: the base's +-y +-15 deg); up =
base height > 60 % of the start's after the push and no link but the feet in contact with the
ground (MuJoCo contacts), to 3 s. The controller (gato.sim.go2.Go2Balance) never sees the push.
Scenarios: go2_push_scenarios(SEED, N) (numpy default_rng([34, SEED, k])). Tuning seed: 18 only
(docs/floating_solver.md); report held-out seeds. One JSON line per push, then a summary line.

--hypotheses B (B > 1): the controller's hypothesis batch over the push (Go2Balance(hypotheses=B):
B plans per replan under B external base-wrench hypotheses, the one that best predicts the measured
base motion applied; --wrench-knots: the intervals each hypothesis acts in); each line then also
gives the winning rows' counts (wins) and the largest winning force (max_win_N).

usage: python bench/go2_push.py SEED [SEED ...] [--n 10] [--lateral] [--controller stand|push]
       [--hypotheses 1] [--wrench-knots 1] [--impulse 20] [--duration 0.05] [--T 3]
"""
import argparse, json, time
from gato.sim.go2 import PUSH_RECOVERY, Go2Balance, go2_push_scenarios, run_go2_push

ap = argparse.ArgumentParser()
ap.add_argument("seeds", type=int, nargs="+")
ap.add_argument("--n", type=int, default=10)
ap.add_argument("--lateral", action="store_true")
ap.add_argument("--controller", choices=["stand", "push"], default="push",
                help="stand: the standing study's weights; push: gato.sim.go2.PUSH_RECOVERY")
ap.add_argument("--hypotheses", type=int, default=1)
ap.add_argument("--wrench-knots", type=int, default=1)
ap.add_argument("--impulse", type=float, default=20.0)
ap.add_argument("--duration", type=float, default=0.05)
ap.add_argument("--T", type=float, default=3.0)
args = ap.parse_args()
ctrl = dict(PUSH_RECOVERY) if args.controller == "push" else {}
ups = []
for seed in args.seeds:
    for sc in go2_push_scenarios(seed, args.n, impulse=args.impulse, duration=args.duration, lateral=args.lateral):
        t0 = time.process_time()
        c = Go2Balance(**ctrl, hypotheses=args.hypotheses, wrench_knots=args.wrench_knots)
        r = run_go2_push(sc, T=args.T, controller=c)
        ups.append(r["up"])
        extra = {} if c.hyp is None else dict(wins=c.hyp.wins.tolist(),
                                              max_win_N=round(max(n for _, n in c.best_log), 1))
        print(json.dumps(dict(id=sc["id"], angle_deg=round(r["angle_deg"]), t_push=sc["t_push"], up=r["up"],
                              hmin_rel=round(r["hmin_rel"], 3), body_contact=r["body_contact"],
                              trunk_contact=r["trunk_contact"], drift_m=round(r["drift_m"], 3), **extra,
                              cpu_s=round(time.process_time() - t0, 2))), flush=True)
print(json.dumps(dict(summary=True, controller=args.controller, hypotheses=args.hypotheses, lateral=args.lateral,
                      seeds=args.seeds, up=int(sum(ups)), of=len(ups))), flush=True)
