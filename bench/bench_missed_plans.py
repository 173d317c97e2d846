"""Benchmark: tracking with missed plans, the plan's own gains vs the joint PD (issue 33).

The Python loop (MPC_GATO, pinocchio world at 1 kHz, lockstep: one MPC tick per knot dt) on
seeded moderate figure-8s (gato.sim.scenarios.fig8_scenarios, 0.4-0.6 x the joint speed
limits, two periods, at most 4 s) with 20 % heavier links (model error) and a constant 10 N
push (unmodelled). Each run executes its plans with ``feedback`` "pd" or "riccati"; with
``--drop 10`` every 10th plan is lost: the executor keeps running the previous plan one
period further (the plan and its gains advanced one knot, exact in lockstep), as a plugin
whose plan did not arrive. Reports the mean EE tracking error [mm] per MPC rate, mode and
seed, and the growth factor with drops vs without.

    source scripts/activate.sh && python bench/bench_missed_plans.py [--seeds 7,8,9] [--out result.md]
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

import gato
from gato.core.bsqp import shift_plan
from gato.frontends.mpc_gato import MPC_GATO
from gato.planners.planner import Plan, StepResult
from gato.sim.disturbances import LinkMassError
from gato.sim.loop import make_world
from gato.sim.scenarios import fig8_reference, fig8_scenarios

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchmarks_doc import write_result  # noqa: E402
from run_info import cpu_model, host, stamp  # noqa: E402

MODES = ("pd", "riccati")
RATES_HZ = (100, 50, 20)


class DropEvery:
    """A planner whose every ``every``-th step result is lost: that tick plays the previous
    plan advanced one knot (its gains too) instead of the new one."""

    def __init__(self, inner, every):
        self.inner, self.every, self.n, self.last, self.dropped = inner, every, 0, None, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self, x0):
        self.n, self.last = 0, None
        self.inner.reset(x0)

    def step(self, x, reference, dt_elapsed=None, budget_s=None):
        res = self.inner.step(x, reference, dt_elapsed=dt_elapsed, budget_s=budget_s)
        self.n += 1
        if self.every and self.n % self.every == 0 and self.last is not None and self.last.plan is not None:
            p = self.last.plan
            K = None if p.K is None else np.concatenate([p.K[1:], p.K[-1:]])
            plan = Plan(shift_plan(p.xu, p.nx, p.nu, p.N), p.nx, p.nu, p.nu_act, p.N, p.dt, K)
            res = StepResult(u=plan.control(0), plan=plan, stats=res.stats, detail=res.detail)
            self.dropped += 1
        self.last = res
        return res


def run(robot, seed, mode, hz, drop):
    dt = 1.0 / hz
    urdf = gato.robot_urdf(robot)
    model = pin.buildModelFromUrdf(str(urdf))
    links = [f.name for f in model.frames if f.type == pin.FrameType.BODY and f.parentJoint > 0]
    sc = fig8_scenarios(model, robot, 1, seed=seed, dt=dt, ratio_range=(0.4, 0.6))[0]
    ref, t_ref = fig8_reference(sc, 16, periods=2)
    world = make_world("pinocchio", urdf, ee_frame=gato.robot_info(robot)["ee_frame"],
                       disturbances=[LinkMassError({name: 1.2 for name in links})])
    m = MPC_GATO(None, urdf, N=16, dt=dt, world=world, constant_f_ext=np.r_[0.0, 10.0, 0.0, 0.0, 0.0, 0.0],
                 verbose=False, feedback=mode)
    m.planner = DropEvery(m.planner, drop)
    _, st = m.run_mpc_fig8(np.r_[sc["q0"], np.zeros(m.nv)], ref, sim_dt=0.001, sim_time=min(4.0, t_ref),
                           pace_by_solve_time=False)
    assert st["completed"], st["stop_reason"]
    return 1000 * st["mean_tracking_error"], m.planner.dropped, st["n_ticks"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--seeds", default="7,8,9")
    ap.add_argument("--drop", type=int, default=10, help="every n-th plan is lost")
    ap.add_argument("--out", default=None, help="write the table as a Markdown section to this file (not in docs/)")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    res = {}
    for hz in RATES_HZ:
        for mode in MODES:
            for seed in seeds:
                base, _, n = run(a.robot, seed, mode, hz, 0)
                lost, dropped, _ = run(a.robot, seed, mode, hz, a.drop)
                res[hz, mode, seed] = (base, lost, dropped, n)
                print(f"{hz} Hz {mode:8s} seed {seed}: {base:.2f} mm -> {lost:.2f} mm with {dropped}/{n} plans lost "
                      f"({lost / base:.3f}x)", flush=True)
    lines = ["", f"## Missed plans: the plan's own gains vs joint PD (issue 33; {stamp()})", "",
             f"{host()}, {cpu_model()}; `python bench/bench_missed_plans.py --robot {a.robot} --seeds {a.seeds} "
             f"--drop {a.drop}`. {a.robot}, MPC_GATO lockstep (one tick per knot dt, N = 16), pinocchio world at "
             "1 kHz, figure-8 scenarios of gato.sim.scenarios (0.4-0.6 x the joint speed limits, two periods, at "
             "most 4 s), links 20 % heavier than the model, a constant 10 N push along +y (unmodelled). Mean EE "
             f"tracking error [mm], each seed; 'lost': every {a.drop}th plan lost (the previous plan and its gains "
             "run one period further). Deterministic (fixed pacing): no spread over repeats.", "",
             "| MPC rate | executor | seeds | mean error, all plans [mm] | one in " + str(a.drop)
             + " lost [mm] | growth (per seed) | riccati / pd, all plans |", "|---|---|---|---|---|---|---|"]
    for hz in RATES_HZ:
        for mode in MODES:
            b = [res[hz, mode, s][0] for s in seeds]
            lo = [res[hz, mode, s][1] for s in seeds]
            ratio = ", ".join(f"{res[hz, 'riccati', s][0] / res[hz, 'pd', s][0]:.2f}" for s in seeds) \
                if mode == "riccati" else ""
            lines.append(f"| {hz} Hz | {mode} | {a.seeds} | " + ", ".join(f"{v:.1f}" for v in b) + " | "
                         + ", ".join(f"{v:.1f}" for v in lo) + " | "
                         + ", ".join(f"{y / x:.3f}x" for x, y in zip(b, lo)) + f" | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        write_result(a.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
