"""The sampling planner (gato.sampling.SimMPC) on the iiwa14: rollout throughput, plan time per
tick, and closed-loop task outcomes against the BSQP controller.

Parts (``--part``, default all):

* ``throughput``: simulated steps per second of 7-DoF iiwa14 rollouts WITH contacts (the
  box-pushing scene: table, box, robot meshes; timestep 2 ms, 0.5 s horizon), for a Python loop
  over ``mj_step``, one ``mujoco.rollout`` call per sample, one batched ``mujoco.rollout`` call
  over all samples (the raw C throughput), and the planner itself (``SimMPC.plan`` with one fine
  stage: rollout steps it ran / its wall time, i.e. including noise draws, interpolation, cost
  terms and the elite update). ``--threads`` rollout threads everywhere.
* ``plan``: wall time of one MPC tick (``SimMPC.plan``, 2 iterations) at num_samples 64 / 256,
  horizon 0.5 s, fine stage and the coarse stage [(0.25, fine), (1.0, 4 x timestep)].
* ``closed`` (through ``gato eval``: bench/specs/sampling_{fig8,pickplace,box_push}_iiwa14.yaml,
  gato.eval.planner_studies; episodes resume from ``--out``): same seeded scenarios for both planners in MuJoCo (the same URDF -> MjSpec model):
  figure-8 RMS EE tracking error (gato.tasks.fig8_scenarios, speed ratio 0.5, one period) and
  step-reference pick-and-place success (gato.tasks.pickplace_scenarios, ramp 0, 3 goals x 2 s;
  success: the EE within 2 cm of every goal at the end of its 2 s) for ``sampling`` and ``bsqp``
  (MPCController with bench_limits' solver settings on gato.worlds.MuJoCoWorld, torque clamped to
  the effort limits); box pushing for ``sampling`` (10 seeded boxes; success: box within 3 cm of
  its goal at the end) with the scripted IK path played open loop as the baseline.

    source scripts/activate.sh && python bench/bench_sampling.py [--part all] [--threads 2]

Timings are wall clock on a shared machine: the report prints the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mujoco  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

from gato.sampling import MjSim, SimMPC, SimMPCConfig, SimMPCStage, SensorTask, scenes  # noqa: E402

PLANT = "iiwa14"
TIMESTEP = 0.002      # s, throughput / plan-time scene step
HORIZON_S = 0.5       # s
REPEATS = 5


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} / {b:.2f} / {c:.2f}"


def _stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[0], xs[-1]


def _scene():
    spec = scenes.box_push_spec(timestep=TIMESTEP)
    return spec, spec.compile()


def _start(model):
    d = mujoco.MjData(model)
    d.qpos[:7] = scenes_q_ready()
    d.ctrl[:] = d.qpos[:7]
    mujoco.mj_forward(model, d)
    return d


def scenes_q_ready():
    from gato.tasks import Q_READY

    return Q_READY[PLANT].copy()


def _x0(model, d):
    s = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, d, s, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    return s


def _ctrl(model, S, H, seed=0):
    rng = np.random.default_rng(seed)
    q = scenes_q_ready()
    return q[None, None] + 0.05 * rng.standard_normal((S, H, model.nu))


def throughput(S, threads):
    """{name: (median, min, max)} steps/s at S samples of H steps, measured in REPEATS interleaved
    rounds (each round times every method once, so load changes hit them alike), plus the per-round
    ratio planner / raw and the share of the planner's wall time spent inside mujoco.rollout."""
    spec, model = _scene()
    H = int(round(HORIZON_S / TIMESTEP))
    d = _start(model)
    x0, warm = _x0(model, d), np.array(d.qacc_warmstart)
    ctrl = _ctrl(model, S, H)
    pool = mj_rollout.Rollout(nthread=threads)
    datas = [mujoco.MjData(model) for _ in range(threads)]
    state = np.empty((S, H, x0.size))
    sens = np.empty((S, H, model.nsensordata))
    cfg = SimMPCConfig(num_samples=S, horizon_steps=H, node_steps=H // 5, ctrl_steps=H // 25, max_iterations=1,
                       stages=[SimMPCStage(1)], ctrl_std=0.05)
    ee = scenes.ee_sensor(PLANT)
    cfg = cfg.add(SensorTask(np.tile([0.6, 0.1, 0.3, 0.6, 0.1, 0.19], (H + 1, 1)),
                             {ee: 100.0, "box_pos": [10.0, 10.0, 0.0]}))
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=threads), np.tile(scenes_q_ready(), (H + 1, 1)))
    dp = _start(mpc.model)
    mpc.plan(dp, 0)  # warm the buffers
    calls = []
    run = mpc.engine.run

    def spy(m, x, w, u):  # record the planner's rollout calls to replay them raw
        calls.append((m, x.copy(), w.copy(), u.copy()))
        return run(m, x, w, u)

    mpc.engine.run = spy
    names = ["Python loop over mj_step (1 thread)", "mujoco.rollout, one call per sample",
             "mujoco.rollout, one batched call (raw; white-noise controls)",
             "SimMPC.plan (draws + validation, costs, update)",
             "raw mujoco.rollout replaying the planner's own calls"]
    res = {n: [] for n in names}
    ratio, inside = [], []
    dd = mujoco.MjData(model)
    for r in range(REPEATS):
        if r < 2:  # the slowest; two rounds are enough
            t = time.perf_counter()
            for s in range(S):
                mujoco.mj_setState(model, dd, x0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
                dd.qacc_warmstart[:] = warm
                for k in range(H):
                    dd.ctrl[:] = ctrl[s, k]
                    mujoco.mj_step(model, dd)
            res[names[0]].append(S * H / (time.perf_counter() - t))
        t = time.perf_counter()
        for s in range(S):
            pool.rollout(model, datas, x0[None], ctrl[s:s + 1], initial_warmstart=warm[None])
        res[names[1]].append(S * H / (time.perf_counter() - t))
        t = time.perf_counter()
        pool.rollout([model] * S, datas, np.tile(x0, (S, 1)), ctrl, initial_warmstart=np.tile(warm, (S, 1)),
                     state=state, sensordata=sens)
        res[names[2]].append(S * H / (time.perf_counter() - t))
        s0 = mpc.engine.steps
        calls.clear()
        t = time.perf_counter()
        _, infos = mpc.plan(dp, 0)
        res[names[3]].append((mpc.engine.steps - s0) / (time.perf_counter() - t))
        inside.append(infos[0]["rollout_s"] / infos[0]["wall_s"])
        # the same rollouts (models, states, controls) as raw batched calls, right after
        steps, t = 0, time.perf_counter()
        for m, x, w, u in calls:
            pool.rollout([m] * len(x), datas, x, u, initial_warmstart=w)
            steps += u.shape[0] * u.shape[1]
        res[names[4]].append(steps / (time.perf_counter() - t))
        ratio.append(res[names[3]][-1] / res[names[4]][-1])
    pool.close()
    mpc.close()
    out = {n: _stats(v) for n, v in res.items()}
    out["ratio SimMPC.plan / raw replay of its calls, per round"] = _stats(ratio)
    out["share of SimMPC.plan wall time inside mujoco.rollout"] = _stats(inside)
    return out


def plan_time(S, threads, coarse, timestep=TIMESTEP):
    H = int(round(HORIZON_S / timestep))
    spec = scenes.box_push_spec(timestep=timestep)
    stage = SimMPCStage(2, [(0.25, None), (1.0, 4 * timestep)]) if coarse else SimMPCStage(2)
    cfg = SimMPCConfig(num_samples=S, horizon_steps=H, node_steps=H // 5, ctrl_steps=H // 25, stages=[stage],
                       ctrl_std=0.05, min_improvement=0.0)
    ee = scenes.ee_sensor(PLANT)
    cfg = cfg.add(SensorTask(np.tile([0.6, 0.1, 0.3, 0.6, 0.1, 0.19], (H + 1, 1)),
                             {ee: 100.0, "box_pos": [10.0, 10.0, 0.0]}))
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=threads), np.tile(scenes_q_ready(), (H + 1, 1)))
    d = _start(mpc.model)
    mpc.plan(d, 0)
    ts = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        mpc.plan(d, 0)
        ts.append(1e3 * (time.perf_counter() - t))
    mpc.close()
    return _stats(ts)


# ------------------------------------------------------------------ closed loop
# The episodes run through gato eval (study kinds sampling_fig8 / sampling_pickplace /
# sampling_box_push, gato.eval.planner_studies: the loops this script ran before, moved there).
SPECS = Path(__file__).resolve().parent / "specs"


def closed_spec(name, n, threads):
    """bench/specs/<name>.yaml with n scenarios and ``threads`` rollout threads."""
    import yaml

    from gato.eval import parse_spec

    raw = yaml.safe_load((SPECS / f"{name}.yaml").read_text())
    raw["task"] = dict(raw["task"], n=int(n))
    for p in raw["planners"]:
        if p["planner"] == "sampling":
            p["config"] = dict(p.get("config") or {}, threads=int(threads))
    return parse_spec(raw)


def run_closed_spec(spec, out):
    """Run (or resume) ``spec`` with gato eval's runner (one local worker: the rollouts use
    ``threads`` threads themselves); rows by (scenario_id, label) and the scenario order.
    gato.eval.EpisodesFailed naming the episodes that failed; KeyboardInterrupt when interrupted."""
    from gato.eval import run_eval_strict

    r = run_eval_strict(spec, out, workers=1, log=lambda m: print(m, file=sys.stderr, flush=True))
    order = list(dict.fromkeys(x["scenario_id"] for x in r["rows"]))
    return {(x["scenario_id"], x["label"]): x for x in r["rows"]}, order


def closed(n_f8, n_pp, n_box, out="eval_out/bench_sampling"):
    lines = ["| task | scenario | sampling | bsqp |", "|---|---|---|---|"]
    rows, order = run_closed_spec(closed_spec("sampling_fig8_iiwa14", n_f8, ARGS.threads), Path(out) / "fig8")
    for sid in order:
        a, b = rows[(sid, "sampling")]["rms_tracking_error"], rows[(sid, "bsqp")]["rms_tracking_error"]
        lines.append(f"| figure-8 RMS EE err [mm] | {sid} | {1e3 * a:.2f} | {1e3 * b:.2f} |")
        print(lines[-1], flush=True)
    rows, order = run_closed_spec(closed_spec("sampling_pickplace_iiwa14", n_pp, ARGS.threads), Path(out) / "pickplace")
    for sid in order:
        a, b = rows[(sid, "sampling")]["end_goal_error_max"], rows[(sid, "bsqp")]["end_goal_error_max"]
        lines.append(f"| pick-and-place worst end-of-goal EE err [mm] | {sid} | {1e3 * a:.1f} | {1e3 * b:.1f} |")
        print(lines[-1], flush=True)
    ok = {lab: sum(rows[(sid, lab)]["success"] for sid in order) for lab in ("sampling", "bsqp")}
    lines.append(f"| pick-and-place success (< 20 mm at every goal) | {len(order)} scenarios | "
                 f"{ok['sampling']}/{len(order)} | {ok['bsqp']}/{len(order)} |")
    print(lines[-1], flush=True)
    lines += ["", "| box push | start (x, y) [m] | goal (x, y) [m] | sampling: final box err [mm] | "
              "open-loop scripted path [mm] |", "|---|---|---|---|---|"]
    spec = closed_spec("sampling_box_push_iiwa14", n_box, ARGS.threads)
    rows, order = run_closed_spec(spec, Path(out) / "box_push")
    scs = {sc["id"]: sc for sc in spec.scenarios("iiwa14")}
    succ = base = 0
    for sid in order:
        r, sc = rows[(sid, "sampling")], scs[sid]
        e, e0 = r["box_error"], r["box_error_open_loop"]
        succ += e < 0.03
        base += e0 < 0.03
        lines.append(f"| {sid} | ({sc['start'][0]:.3f}, {sc['start'][1]:.3f}) | ({sc['goal'][0]:.3f}, "
                     f"{sc['goal'][1]:.3f}) | {1e3 * e:.1f} | {1e3 * e0:.1f} |")
        print(lines[-1], flush=True)
    lines.append(f"| success (< 30 mm) | {len(order)} boxes | | {succ}/{len(order)} | {base}/{len(order)} |")
    print(lines[-1], flush=True)
    return lines


def main(argv=None):
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", default="all", choices=["all", "throughput", "plan", "closed"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--samples", default="64,256")
    p.add_argument("--n-fig8", type=int, default=3)
    p.add_argument("--n-pickplace", type=int, default=3)
    p.add_argument("--n-box", type=int, default=10)
    p.add_argument("--out", default="eval_out/bench_sampling", help="gato eval output folder of the closed part "
                   "(episodes resume from it: remove it for a fresh run)")
    ARGS = p.parse_args(argv)
    samples = [int(s) for s in ARGS.samples.split(",")]
    print(f"mujoco {mujoco.__version__}, {os.cpu_count()} CPUs, threads {ARGS.threads}, load before {_load()}")
    if ARGS.part in ("all", "throughput"):
        print("\n| samples | method | steps/s median | min | max |\n|---|---|---|---|---|")
        for S in samples:
            res = throughput(S, ARGS.threads)
            raw = res["mujoco.rollout, one batched call (raw; white-noise controls)"][0]
            for name, (med, lo, hi) in res.items():
                if name.startswith(("share", "ratio")):
                    print(f"| {S} | {name} | {med:.3f} | {lo:.3f} | {hi:.3f} |", flush=True)
                    continue
                print(f"| {S} | {name} | {med:,.0f} ({med / raw:.2f}x raw) | {lo:,.0f} | {hi:,.0f} |", flush=True)
    if ARGS.part in ("all", "plan"):
        print("\n| samples | timestep [ms] | stage | plan time per tick [ms] median | min | max |\n"
              "|---|---|---|---|---|---|")
        for ts in (TIMESTEP, 0.005):
            for S in samples:
                for coarse in (False, True):
                    med, lo, hi = plan_time(S, ARGS.threads, coarse, ts)
                    st = "[(0.25, fine), (1.0, 4 dt)]" if coarse else "fine"
                    print(f"| {S} | {1e3 * ts:g} | {st} | {med:.1f} | {lo:.1f} | {hi:.1f} |", flush=True)
    if ARGS.part in ("all", "closed"):
        print()
        closed(ARGS.n_fig8, ARGS.n_pickplace, ARGS.n_box, ARGS.out)
    print(f"\nload after {_load()}")


ARGS = None

if __name__ == "__main__":
    sys.exit(main())
