"""The sampling planner's rollout engines on the iiwa14: ``mujoco.rollout`` (backend "cpu") vs
``mujoco_warp`` (backend "warp") on a Warp device, same inputs.

``n`` worlds x ``T`` steps of piecewise-constant joint targets (+-0.2 rad about the start pose,
held 25 steps, seeded) from one start state; scene "robot" (the arm alone, ready pose) or "box"
(the box-pushing scene, the box resting on the table: contacts every step). Each engine runs once
to warm up (Warp: kernel compile / load), then ``--repeats`` timed calls; the report gives the
median (min, max) wall time, steps/s and the largest qpos gap between the engines.

    source scripts/activate.sh && python bench/bench_sampling_warp.py [--scene robot] [--n 64] \\
        [--steps 100] [--device cpu] [--threads 2]

Needs the optional packages mujoco-warp and warp-lang (requirements/lock.txt). Timings are wall
clock on a shared machine: the report prints the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import time

import mujoco
import numpy as np

from gato.sampling import scenes
from gato.sampling.sim import RolloutEngine, full_state
from gato.sampling.warp_backend import WarpRolloutEngine
from gato.tasks import Q_READY


def start_state(scene: str):
    spec = scenes.robot_spec("iiwa14") if scene == "robot" else scenes.box_push_spec()
    m = spec.compile()
    d = mujoco.MjData(m)
    if scene == "robot":
        d.qpos[:] = Q_READY["iiwa14"]
    else:
        d.qpos[:7] = [0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0]
        d.qpos[7:11] = [0.6, 0.0, 0.19, 1.0]
    mujoco.mj_forward(m, d)
    return m, d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=("robot", "box"), default="robot")
    ap.add_argument("--n", type=int, default=64, help="worlds (rollouts) per call")
    ap.add_argument("--steps", type=int, default=100, help="steps per rollout")
    ap.add_argument("--device", default="cpu", help="Warp device")
    ap.add_argument("--threads", type=int, default=2, help="mujoco.rollout threads")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    m, d = start_state(a.scene)
    n, T = a.n, a.steps
    rng = np.random.default_rng(0)
    ctrl = d.qpos[None, None, :m.nu] + np.repeat(rng.uniform(-0.2, 0.2, (n, -(-T // 25), m.nu)), 25, axis=1)[:, :T]
    ctrl = ctrl.astype(np.float32).astype(np.float64)  # float32-exact: both engines see the same commands
    x0 = np.tile(full_state(m, d), (n, 1))
    warm = np.zeros((n, m.nv))
    print(f"scene {a.scene} (contacts at start: {d.ncon}), {n} worlds x {T} steps, load {os.getloadavg()}")
    states = {}
    for name, eng in ((f"mujoco.rollout ({a.threads} threads)", RolloutEngine(m, a.threads)),
                      (f"mujoco_warp ({a.device})", WarpRolloutEngine(m, a.device))):
        eng.run(m, x0, warm, ctrl)
        ts = []
        for _ in range(a.repeats):
            tic = time.perf_counter()
            s, _ = eng.run(m, x0, warm, ctrl)
            ts.append(time.perf_counter() - tic)
        states[name] = s.copy()
        eng.close()
        med = float(np.median(ts))
        print(f"{name}: median {med:.3f} s (min {min(ts):.3f}, max {max(ts):.3f}) -> {n * T / med:,.0f} steps/s")
    a_, b_ = states.values()
    q = slice(1, 1 + m.nq)
    print(f"max |qpos gap| between the engines: {np.max(np.abs(a_[..., q] - b_[..., q])):.2e}; "
          f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
