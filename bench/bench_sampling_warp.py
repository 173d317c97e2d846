"""The sampling planner's rollout engines on the iiwa14: ``mujoco.rollout`` (backend "cpu") vs
``mujoco_warp`` (backend "warp") on a Warp device, same inputs.

``n`` worlds x ``T`` steps of piecewise-constant joint targets (+-0.2 rad about the start pose,
held 25 steps, seeded: gato.sampling.scenes.hold_targets) from one start state
(scenes.rollout_start); scene "robot" (the arm alone, ready pose) or "box"
(the box-pushing scene, the box resting on the table: contacts every step). Each engine runs once
to warm up (Warp: kernel compile / load, graph capture), then ``--repeats`` timed calls; the
report gives the median (min, max) wall time, steps/s and the largest qpos gap to
``mujoco.rollout``. Warp runs twice: eager (every kernel launched from Python: the default on
Warp's CPU device) and replaying one captured graph per step (the default on a CUDA device; on
the CPU device Warp replays it in C++).

    source scripts/activate.sh && python bench/bench_sampling_warp.py [--scene robot] [--n 64] \\
        [--steps 100] [--device cpu] [--threads 2]

Needs the optional packages mujoco-warp and warp-lang (requirements/lock.txt). Timings are wall
clock on a shared machine: the report prints the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from gato.sampling import scenes
from gato.sampling.sim import RolloutEngine, full_state
from gato.sampling.warp_backend import WarpRolloutEngine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=scenes.ROLLOUT_SCENES, default="robot")
    ap.add_argument("--n", type=int, default=64, help="worlds (rollouts) per call")
    ap.add_argument("--steps", type=int, default=100, help="steps per rollout")
    ap.add_argument("--device", default="cpu", help="Warp device")
    ap.add_argument("--threads", type=int, default=2, help="mujoco.rollout threads")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    m, d = scenes.rollout_start(a.scene)
    n, T = a.n, a.steps
    ctrl = scenes.hold_targets(m, d, n, T, 0.2)
    x0 = np.tile(full_state(m, d), (n, 1))
    warm = np.zeros((n, m.nv))
    print(f"scene {a.scene} (contacts at start: {d.ncon}), {n} worlds x {T} steps, load {os.getloadavg()}")
    states = {}
    for name, eng in ((f"mujoco.rollout ({a.threads} threads)", RolloutEngine(m, a.threads)),
                      (f"mujoco_warp ({a.device}, eager)", WarpRolloutEngine(m, a.device, graph=False)),
                      (f"mujoco_warp ({a.device}, graph per step)", WarpRolloutEngine(m, a.device, graph=True))):
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
    ref, *others = states.values()
    q = slice(1, 1 + m.nq)
    gaps = ", ".join(f"{np.max(np.abs(o[..., q] - ref[..., q])):.2e}" for o in others)
    print(f"max |qpos gap| to mujoco.rollout (eager, graph): {gaps}; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
