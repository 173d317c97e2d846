"""iLQR vs MPPI in SimMPC on the iiwa14 figure-8 and pick-and-place (the sampling studies' scenes and costs).

Each episode: gato.sim.scenarios.fig8_scenarios (speed ratio 0.5, dt 0.03125) seeded scenario,
``gato.sampling.scenes.fig8_task`` (5 ms MuJoCo steps, 0.5 s horizon, nodes every 20 steps, plans
every 4 steps), the planner's ``planner`` / ``max_iterations`` / ``num_samples`` overridden, run
closed loop with ``SimMPC.execute`` for ``--periods`` periods. Reports per planner the mean and
RMS EE tracking error [m] (EE sensor vs the path at every step) and the median wall time per plan.

    source scripts/activate.sh && nice -n 10 python bench/bench_sampling_ilqr.py --seed 7 --n 3 \
        --run mppi:2:64 --run ilqr:1 [--periods 0.5] [--threads 2]

``--run planner:iterations[:num_samples]`` may repeat; every run sees the same scenarios; the
runs after an MPPI run get their mean-error ratio to it. ``--ilqr-node-steps N``: the iLQR runs
hold each command offset N steps (default: the scene's 20; N = 4, the steps executed per plan,
is the pick-and-place configuration, docs/benchmarks_sampling.md).
``--task pickplace``: gato.sim.scenarios.pickplace_scenarios (ramp 0, 3 goals x ``--goal-s`` s),
``scenes.pickplace_task``, the planner told only the current goal (as the sampling_pickplace
study); reports the mean EE-to-goal distance over the run and the worst end-of-goal error.

``--eval SPEC``: the same comparison through ``gato eval``'s runner instead (a spec of the
sampling_fig8 / sampling_pickplace kinds, e.g. bench/specs/sampling_ilqr_{fig8,pickplace}_iiwa14.yaml;
``--n`` scenarios per seed, ``--seeds`` to replace the spec's; one local worker, episodes resume
from ``--out``): prints per scenario and configuration the mean error (mean_tracking_error /
mean_goal_error) and mean plan time (solve_time_ms), and each configuration's mean error over the
scenarios as a ratio to the ``mppi`` row.

    nice -n 5 python bench/bench_sampling_ilqr.py --eval bench/specs/sampling_ilqr_pickplace_iiwa14.yaml --n 1
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

import numpy as np


def episode(sc, planner, iterations, samples, periods, threads):
    import mujoco

    from gato.sampling import MjSim, SimMPC, scenes

    cfg, qs, xyz, n = scenes.fig8_task(sc, timestep=0.005, periods=periods)
    cfg = _configure(cfg, planner, iterations, samples)
    mpc = SimMPC(cfg, MjSim(scenes.robot_spec("iiwa14", timestep=0.005), 1, nthread=threads), qs)
    ex = MjSim(mpc.model, 1)
    d = ex.data[0]
    d.qpos[:7] = sc["q0"]
    d.ctrl[:] = sc["q0"]
    mujoco.mj_forward(mpc.model, d)
    tic = time.perf_counter()
    (rows,), (plans,) = mpc.execute(ex, n)
    wall = time.perf_counter() - tic
    mpc.close()
    m = mpc.model
    adr = m.sensor_adr[m.sensor(scenes.ee_sensor("iiwa14")).id]
    err = np.linalg.norm(rows["sensordata"][:, adr:adr + 3] - xyz[1:n + 1], axis=1)
    return dict(mean=float(err.mean()), rms=float(np.sqrt(np.mean(err ** 2))),
                plan_s=statistics.median(p["wall_s"] for p in plans), episode_s=wall, plans=len(plans))


#: --ilqr-config: "cautious" (ilqr=None, SimMPC's default) or "reference" (ILQROptimizerConfig()'s
#: defaults: mu 1e-6, no step limit, the reference's line search).
ILQR_CONFIG = "cautious"
#: --ilqr-node-steps: the iLQR runs' node_steps (steps each command offset is held); None: the scene's.
ILQR_NODE_STEPS = None


def _configure(cfg, planner, iterations, samples):
    ilqr = None
    if planner == "ilqr" and ILQR_CONFIG == "reference":
        from gato.sampling import ILQROptimizerConfig

        ilqr = ILQROptimizerConfig()
    cfg = replace(cfg, planner=planner, max_iterations=iterations, num_samples=samples, ilqr=ilqr,
                  stages=None if planner == "ilqr" else cfg.stages)
    if planner == "ilqr" and ILQR_NODE_STEPS is not None:
        cfg = replace(cfg, node_steps=ILQR_NODE_STEPS)
    if cfg.stages is not None:
        cfg = replace(cfg, stages=[replace(cfg.stages[0], iters=iterations)])
    return cfg


def episode_pp(sc, planner, iterations, samples, goal_s, threads):
    import mujoco

    from gato.sampling import MjSim, SimMPC, scenes

    cfg, qs, ee_ref, n = scenes.pickplace_task(sc, timestep=0.005, goal_s=goal_s)
    cfg = _configure(cfg, planner, iterations, samples)
    mpc = SimMPC(cfg, MjSim(scenes.robot_spec("iiwa14", timestep=0.005), 1, nthread=threads), qs)
    m = mpc.model
    ex = MjSim(m, 1)
    d = ex.data[0]
    d.qpos[:7] = sc["q0"]
    d.ctrl[:] = sc["q0"]
    mujoco.mj_forward(m, d)
    adr = m.sensor_adr[m.sensor(scenes.ee_sensor("iiwa14")).id]
    per = int(round(goal_s / 0.005))
    ee_term, ctrl_term = cfg.task("ee"), cfg.task("ctrl")
    ends, dists, walls = [], [], []
    for i, (g, qg) in enumerate(zip(sc["goals"], sc["q_goals"])):
        ee_term.sensor_ref = g[None]
        ctrl_term.ctrl_ref = qg[None]
        for term in (ee_term, ctrl_term):
            term.resolve(m)
        mpc.set_ctrl_ref(qg[None])
        (rows,), (plans,) = mpc.execute(ex, per, t0=i * per)
        dist = np.linalg.norm(rows["sensordata"][:, adr:adr + 3] - g, axis=1)
        dists.append(dist)
        ends.append(dist[-1])
        walls += [p["wall_s"] for p in plans]
    mpc.close()
    dist = np.concatenate(dists)
    return dict(mean=float(dist.mean()), rms=float(np.sqrt(np.mean(dist ** 2))), end=float(max(ends)),
                plan_s=statistics.median(walls), plans=len(walls))


def via_eval(spec_path, n, seeds=None, out=None):
    """Run spec_path (n scenarios per seed, ``seeds`` replacing the spec's) through gato eval's
    runner; print the per-scenario mean error / plan time and the ratios to ``mppi``; returns
    {label: mean error over the scenarios [m]}."""
    import sys

    import yaml

    from gato.eval import parse_spec, run_eval_strict

    raw = yaml.safe_load(open(spec_path).read())
    raw["task"] = dict(raw["task"], n=int(n), **({} if seeds is None else {"seeds": list(seeds)}))
    spec = parse_spec(raw)
    metric = {"sampling_fig8": "mean_tracking_error", "sampling_pickplace": "mean_goal_error"}[spec.task["kind"]]
    out = out or f"eval_out/{spec.name}_n{n}"
    print(f"load before: {os.getloadavg()}  {spec_path} through gato eval, seeds {spec.task['seeds']}, n {n}, "
          f"out {out}", flush=True)
    r = run_eval_strict(spec, out, workers=1, log=lambda m: print(m, file=sys.stderr, flush=True))
    labels = list(dict.fromkeys(x["label"] for x in r["rows"]))
    sids = list(dict.fromkeys(x["scenario_id"] for x in r["rows"]))
    rows = {(x["scenario_id"], x["label"]): x for x in r["rows"]}
    print("| scenario | " + " | ".join(f"{lab}: {metric} [mm], plan [ms]" for lab in labels) + " |")
    print("|---|" + "---|" * len(labels))
    for sid in sids:
        print(f"| {sid} | " + " | ".join(f"{1e3 * rows[(sid, lab)][metric]:.2f}, {rows[(sid, lab)]['solve_time_ms']:.1f}"
                                         for lab in labels) + " |")
    means = {lab: float(np.mean([rows[(sid, lab)][metric] for sid in sids])) for lab in labels}
    plan = {lab: float(np.median([rows[(sid, lab)]["solve_time_ms"] for sid in sids])) for lab in labels}
    print(f"| mean over {len(sids)} | " + " | ".join(f"{1e3 * means[lab]:.2f}, {plan[lab]:.1f} (median)"
                                                   for lab in labels) + " |")
    for lab in labels:
        if lab != "mppi" and "mppi" in means:
            per = [rows[(sid, lab)][metric] / rows[(sid, "mppi")][metric] for sid in sids]
            print(f"{lab} / mppi: mean {means[lab] / means['mppi']:.2f}x  per scenario {np.round(per, 2).tolist()}")
    print(f"load after: {os.getloadavg()}")
    return means


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n", type=int, default=3, help="scenarios")
    ap.add_argument("--task", choices=("fig8", "pickplace"), default="fig8")
    ap.add_argument("--periods", type=float, default=0.5)
    ap.add_argument("--goal-s", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--run", action="append", default=None, help="planner:iterations[:num_samples]")
    ap.add_argument("--ilqr-config", choices=("cautious", "reference"), default="cautious")
    ap.add_argument("--ilqr-node-steps", type=int, default=None,
                    help="node_steps of the iLQR runs (steps each offset is held; default: the scene's 20)")
    ap.add_argument("--only", type=int, nargs="*", default=None, help="scenario indices (default: all)")
    ap.add_argument("--eval", default=None, metavar="SPEC", help="run SPEC through gato eval's runner (--n, --seeds)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="--eval: seeds replacing the spec's")
    ap.add_argument("--out", default=None, help="--eval: output folder (default eval_out/<spec name>_n<n>)")
    a = ap.parse_args(argv)
    if a.eval is not None:
        return via_eval(a.eval, a.n, a.seeds, a.out)
    if a.ilqr_node_steps is not None and a.ilqr_node_steps < 1:
        ap.error("--ilqr-node-steps: expected an integer >= 1")
    global ILQR_CONFIG, ILQR_NODE_STEPS
    ILQR_CONFIG, ILQR_NODE_STEPS = a.ilqr_config, a.ilqr_node_steps
    import pinocchio as pin

    from gato.core.bsqp import robot_urdf
    from gato.sim.scenarios import fig8_scenarios, pickplace_scenarios

    runs = a.run or ["mppi:2:64", "ilqr:1"]
    pm = pin.buildModelFromUrdf(str(robot_urdf("iiwa14")))
    if a.task == "fig8":
        scs = fig8_scenarios(pm, "iiwa14", a.n, seed=a.seed, dt=0.03125, ratio_range=(0.5, 0.5))
        run = lambda sc, p, i, s: episode(sc, p, i, s, a.periods, a.threads)  # noqa: E731
    else:
        scs = pickplace_scenarios(pm, "iiwa14", a.n, seed=a.seed, ramps=(0.0,), n_goals=3)
        run = lambda sc, p, i, s: episode_pp(sc, p, i, s, a.goal_s, a.threads)  # noqa: E731
    if a.only is not None:
        scs = [scs[i] for i in a.only]
    print(f"load before: {os.getloadavg()}  {a.task}, seed {a.seed}, {len(scs)} of {a.n} scenarios, "
          f"{a.threads} threads, ilqr config {a.ilqr_config}, ilqr node_steps {a.ilqr_node_steps or 'scene'}")
    means = {}
    for r in runs:
        parts = r.split(":")
        planner, its = parts[0], int(parts[1])
        samples = int(parts[2]) if len(parts) > 2 else 64
        res = [run(sc, planner, its, samples) for sc in scs]
        means[r] = [x["mean"] for x in res]
        print(f"{r:14s} mean err {np.mean([x['mean'] for x in res]) * 1e3:7.2f} mm  "
              f"rms {np.mean([x['rms'] for x in res]) * 1e3:7.2f} mm  per scenario mean "
              f"{[round(x['mean'] * 1e3, 2) for x in res]} mm  median plan "
              f"{statistics.median(x['plan_s'] for x in res) * 1e3:6.1f} ms  ({res[0]['plans']} plans/episode)"
              + (f"  worst end err {max(x['end'] for x in res) * 1e3:.2f} mm" if a.task == "pickplace" else ""))
    base = next((r for r in runs if r.startswith("mppi")), None)
    for r in runs:  # the ratio to the MPPI run, pooled (mean over scenarios) and per scenario
        if base is not None and r != base:
            per = np.array(means[r]) / np.array(means[base])
            print(f"{r:14s} / {base}: mean {np.mean(means[r]) / np.mean(means[base]):.2f}x  "
                  f"per scenario {np.round(per, 2).tolist()}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
