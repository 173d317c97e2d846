"""Study kinds of ``gato eval`` for bench/bench_sampling.py's closed loop: the sampling planner
(gato.sampling.SimMPC) against the BSQP controller on the same seeded scenarios in MuJoCo.

The episode functions here are the ones bench_sampling.py ran in its own loop (moved, not
rewritten: the numbers are unchanged); the bench now builds a spec and calls gato.eval.

Kinds (task.kind), all on ``world: {kind: mujoco}`` (the episodes set their own steps):

- ``sampling_fig8``: gato.tasks.fig8_scenarios(dt 0.03125) at task.options.ratio of the
  velocity limit, task.options.periods periods. ``sampling``: SimMPC on scenes.fig8_task
  (5 ms MuJoCo steps); ``bsqp``: MPCController (gato.limit_scenarios LIMITS_N, LIMITS_DT,
  LIMITS_SOLVER) on gato.worlds.MuJoCoWorld at LIMITS_DT / 4, torque clamped to the effort
  limits. Metrics: rms_tracking_error and mean_tracking_error [m] (RMS / mean over the run's
  steps of the EE distance to the path: :func:`path_errors`), solve_time_ms (mean wall time
  per plan / controller step).
- ``sampling_pickplace``: gato.tasks.pickplace_scenarios(ramps (0,)), task.options.goal_s per
  goal; the planner knows only the current goal. Metrics: end_goal_error_max [m] (worst EE
  distance to a goal at the end of its goal_s), mean_goal_error [m] (mean over the run's steps
  of the EE distance to the current goal: :func:`goal_errors`), success (1 when
  end_goal_error_max is < task.options.tol), solve_time_ms.
- ``sampling_box_push``: scenes.box_push_scenarios, sampling only; metrics box_error [m]
  (final box distance to its goal), box_error_open_loop [m] (the scripted IK path played open
  loop), success (box_error < task.options.tol). task.options.steps (null: the task's own
  length) truncates the episode (tests).

Planner entries: ``planner: sampling`` with ``config: {threads}`` (MuJoCo rollout threads,
default 2; fig8 and pickplace also take ``method``, ``iterations`` and ``node_steps``) or
``planner: bsqp`` with no config / params (fig8 and pickplace only).
"""
from __future__ import annotations

import numpy as np

from .spec import _number as _num

__all__ = ["PLANNER_STUDIES", "fig8_sampling", "fig8_bsqp", "pickplace_sampling", "pickplace_bsqp", "box_push",
           "fig8_sampling_metrics", "fig8_bsqp_metrics", "pickplace_sampling_metrics", "pickplace_bsqp_metrics",
           "path_errors", "goal_errors"]

PLANT = "iiwa14"
#: sampling planner config: rollout threads; method "mppi" | "cem" | "ilqr" (SimMPCConfig.planner),
#: iterations per plan (SimMPCConfig.max_iterations; None: the scenes' 2) and node_steps (sim steps
#: between nodes / of each held iLQR command; None: the scenes' 20) of the figure-8 / pick-and-place studies.
_SAMPLING_CONFIG = ("threads", "method", "iterations", "node_steps")


def _err(path, msg):
    return ValueError(f"{path}: {msg}")


def path_errors(ee, ref) -> dict:
    """rms_tracking_error and mean_tracking_error [m] of EE positions ee (n, 3) against the path
    ref (n, 3), row k against row k."""
    e = np.linalg.norm(np.asarray(ee, dtype=float) - np.asarray(ref, dtype=float), axis=1)
    return dict(rms_tracking_error=float(np.sqrt(np.mean(e ** 2))), mean_tracking_error=float(np.mean(e)))


def goal_errors(ee_per_goal, goals) -> dict:
    """end_goal_error_max and mean_goal_error [m] of the EE positions ee_per_goal[i] (n_i, 3) held
    toward goals[i] (3,): the worst distance at the end of a goal, the mean over every step."""
    d = [np.linalg.norm(np.asarray(e, dtype=float) - np.asarray(g, dtype=float), axis=1)
         for e, g in zip(ee_per_goal, goals)]
    return dict(end_goal_error_max=float(max(x[-1] for x in d)), mean_goal_error=float(np.mean(np.concatenate(d))))


# ------------------------------------------------------------------ episode functions
def _method(cfg, method=None, iterations=None, node_steps=None):
    """The scenes' SimMPCConfig with the planner ``method``, ``iterations`` and ``node_steps`` (None:
    unchanged); iLQR plans at the fine step (no stages)."""
    from dataclasses import replace

    if node_steps is not None:
        cfg = replace(cfg, node_steps=int(node_steps))
    its = cfg.max_iterations if iterations is None else int(iterations)
    if method == "ilqr":
        return replace(cfg, planner="ilqr", stages=None, max_iterations=its)
    cfg = replace(cfg, planner=method or cfg.planner)
    return replace(cfg, stages=[replace(cfg.stages[0], iters=its)]) if cfg.stages else replace(cfg, max_iterations=its)


def _sampling_run(config, ctrl_ref, model_spec, q0, num_steps, threads):
    import mujoco

    from ..sampling import MjSim, SimMPC

    mpc = SimMPC(config, MjSim(model_spec, 1, nthread=threads), ctrl_ref)
    ex = MjSim(mpc.model, 1)
    d = ex.data[0]
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    mujoco.mj_forward(mpc.model, d)
    (rows,), (plans,) = mpc.execute(ex, num_steps)
    mpc.close()
    return rows, plans, mpc.model


def fig8_sampling_metrics(sc, threads=2, periods=1, method=None, iterations=None, node_steps=None) -> dict:
    """rms_tracking_error / mean_tracking_error [m] (EE sensor vs the path after every 5 ms MuJoCo
    step, :func:`path_errors`) and solve_time_ms (mean wall time per plan) of SimMPC on a figure-8
    scenario."""
    from ..sampling import scenes

    cfg, qs, xyz, n = scenes.fig8_task(sc, timestep=0.005, periods=periods)
    cfg = _method(cfg, method, iterations, node_steps)
    rows, plans, m = _sampling_run(cfg, qs, scenes.robot_spec(PLANT, timestep=0.005), sc["q0"], n, threads)
    lay = m.sensor_adr[m.sensor(scenes.ee_sensor(PLANT)).id]
    out = path_errors(rows["sensordata"][:, lay:lay + 3], xyz[1:n + 1])
    return dict(out, solve_time_ms=1e3 * float(np.mean([p["wall_s"] for p in plans])))


def fig8_sampling(sc, threads=2, periods=1, method=None, iterations=None, node_steps=None):
    """RMS EE tracking error [m] of SimMPC on a figure-8 scenario (5 ms MuJoCo steps)."""
    return fig8_sampling_metrics(sc, threads, periods, method, iterations, node_steps)["rms_tracking_error"]


def _bsqp(urdf):
    from ..core.bsqp import BSQP
    from ..planners.controller import MPCController
    from ..frontends.limit_scenarios import LIMITS_DT as DT, LIMITS_N as N, LIMITS_SOLVER as SOLVER

    s = BSQP(str(urdf), 1, N, DT, **SOLVER)
    return s, MPCController(s), N, DT


def fig8_bsqp(sc, periods=1):
    """RMS EE tracking error [m] of the BSQP controller on a figure-8 scenario."""
    return fig8_bsqp_metrics(sc, periods)["rms_tracking_error"]


def fig8_bsqp_metrics(sc, periods=1) -> dict:
    """rms_tracking_error / mean_tracking_error [m] (EE vs the reference after every controller
    step) and solve_time_ms (mean wall time per controller step) of the BSQP controller on a
    figure-8 scenario."""
    import time

    from ..core.bsqp import robot_urdf
    from ..sim.scenarios import fig8_reference
    from ..sim.mujoco_world import MuJoCoWorld

    urdf = robot_urdf(PLANT)
    s, ctrl, N, DT = _bsqp(urdf)
    world = MuJoCoWorld(urdf, timestep=DT / 4)
    ref, sim_time = fig8_reference(dict(sc, dt=DT), N, periods=periods)
    ref = ref.reshape(-1, 6)
    u_max = np.asarray(s.limits["u"])
    q, dq = np.array(sc["q0"]), np.zeros(7)
    ctrl.reset(np.concatenate([q, dq]))
    ee, path, walls = [], [], []
    for t in range(int(round(sim_time / DT))):
        tic = time.perf_counter()
        u = np.clip(np.asarray(ctrl.step(np.concatenate([q, dq]), ref[t:t + N].ravel()).u), -u_max, u_max)
        walls.append(time.perf_counter() - tic)
        for _ in range(4):
            q, dq = world.step(q, dq, u, DT / 4)
        ee.append(s.ee_pos(q))
        path.append(ref[t + 1, :3])
    return dict(path_errors(ee, path), solve_time_ms=1e3 * float(np.mean(walls)))


def pickplace_sampling(sc, goal_s=2.0, threads=2, method=None, iterations=None, node_steps=None):
    """Worst end-of-goal EE error [m] of SimMPC. Like the bsqp run, the planner knows only the
    current goal: per goal, the EE term's target, the control term's and ctrl_ref's joint targets
    are that goal (its IK solution) held."""
    return pickplace_sampling_metrics(sc, goal_s, threads, method, iterations, node_steps)["end_goal_error_max"]


def pickplace_sampling_metrics(sc, goal_s=2.0, threads=2, method=None, iterations=None, node_steps=None) -> dict:
    """end_goal_error_max / mean_goal_error [m] (:func:`goal_errors` of the EE sensor after every
    5 ms MuJoCo step) and solve_time_ms (mean wall time per plan) of SimMPC on a pick-and-place
    scenario (:func:`pickplace_sampling`)."""
    ee, walls = _pickplace_run(sc, goal_s, threads, method, iterations, node_steps)
    return dict(goal_errors(ee, sc["goals"]), solve_time_ms=1e3 * float(np.mean(walls)))


def _pickplace_run(sc, goal_s, threads, method, iterations, node_steps):
    """(per goal the EE positions (goal_s / 5 ms, 3) after every step, every plan's wall time [s])."""
    import mujoco

    from ..sampling import MjSim, SimMPC, scenes

    cfg, qs, ee_ref, n = scenes.pickplace_task(sc, timestep=0.005, goal_s=goal_s)
    cfg = _method(cfg, method, iterations, node_steps)
    mpc = SimMPC(cfg, MjSim(scenes.robot_spec(PLANT, timestep=0.005), 1, nthread=threads), qs)
    m = mpc.model
    ex = MjSim(m, 1)
    d = ex.data[0]
    d.qpos[:7] = sc["q0"]
    d.ctrl[:] = sc["q0"]
    mujoco.mj_forward(m, d)
    lay = m.sensor_adr[m.sensor(scenes.ee_sensor(PLANT)).id]
    per = int(round(goal_s / 0.005))
    ee_term, ctrl_term = cfg.task("ee"), cfg.task("ctrl")
    ee, walls = [], []
    for i, (g, qg) in enumerate(zip(sc["goals"], sc["q_goals"])):
        ee_term.sensor_ref = g[None]
        ctrl_term.ctrl_ref = qg[None]
        for term in (ee_term, ctrl_term):
            term.resolve(m)
        mpc.set_ctrl_ref(qg[None])
        (rows,), (plans,) = mpc.execute(ex, per, t0=i * per)
        ee.append(rows["sensordata"][:, lay:lay + 3].copy())
        walls += [p["wall_s"] for p in plans]
    mpc.close()
    return ee, walls


def pickplace_bsqp(sc, goal_s=2.0):
    """Worst end-of-goal EE error [m] of the BSQP controller (step reference per goal)."""
    return pickplace_bsqp_metrics(sc, goal_s)["end_goal_error_max"]


def pickplace_bsqp_metrics(sc, goal_s=2.0) -> dict:
    """end_goal_error_max / mean_goal_error [m] (:func:`goal_errors` of the EE after every
    controller step) and solve_time_ms (mean wall time per step) of the BSQP controller."""
    import time

    from ..core.bsqp import robot_urdf
    from ..sim.mujoco_world import MuJoCoWorld

    urdf = robot_urdf(PLANT)
    s, ctrl, N, DT = _bsqp(urdf)
    world = MuJoCoWorld(urdf, timestep=DT / 4)
    u_max = np.asarray(s.limits["u"])
    q, dq = np.array(sc["q0"]), np.zeros(7)
    ctrl.reset(np.concatenate([q, dq]))
    ee, walls = [], []
    for goal in sc["goals"]:
        ref = np.tile(np.concatenate([goal, np.zeros(3)]), N)
        ee.append([])
        for _ in range(int(round(goal_s / DT))):
            tic = time.perf_counter()
            u = np.clip(np.asarray(ctrl.step(np.concatenate([q, dq]), ref).u), -u_max, u_max)
            walls.append(time.perf_counter() - tic)
            for _ in range(4):
                q, dq = world.step(q, dq, u, DT / 4)
            ee[-1].append(s.ee_pos(q))
    return dict(goal_errors(ee, sc["goals"]), solve_time_ms=1e3 * float(np.mean(walls)))


def box_push(sc, threads=2, steps=None):
    """(final box error, open-loop scripted path's final box error) [m] of a box push; ``steps``
    (None: the task's length) truncates both runs."""
    import mujoco

    from ..sampling import scenes

    spec, cfg, qs, q0, n = scenes.box_push_task(sc)
    if steps is not None:
        n = min(n, int(steps))
    rows, plans, m = _sampling_run(cfg, qs, spec, q0, n, threads)
    d = mujoco.MjData(m)
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    for k in range(n):
        d.ctrl[:] = qs[k]
        mujoco.mj_step(m, d)
    return float(np.linalg.norm(rows["qpos"][-1, 7:9] - sc["goal"])), float(np.linalg.norm(d.qpos[7:9] - sc["goal"]))


# ------------------------------------------------------------------ study plumbing
def _arrays(v):
    """A scenario back from its JSON-able episode form: numeric lists -> float arrays (exact:
    the floats round-trip), recursively through dicts."""
    if isinstance(v, dict):
        return {k: _arrays(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(isinstance(x, (int, float, list)) and not isinstance(x, bool) for x in v):
        try:
            return np.asarray(v, dtype=float)
        except ValueError:
            return v
    return v


def _threads(ep):
    return int(ep["planner"]["config"].get("threads", 2))


def _check_planner_for(planners):
    def check(kind, pl, path):
        if pl["planner"] not in planners:
            raise _err(f"{path}.planner", f"the {kind} study runs {list(planners)}; got {pl['planner']!r}")
        if pl["params"]:
            raise _err(f"{path}.params", f"the {kind} study builds its own planners; remove params")
        cfg = pl["config"]
        allowed = _SAMPLING_CONFIG if pl["planner"] == "sampling" else ()
        unknown = sorted(set(cfg) - set(allowed))
        if unknown:
            raise _err(f"{path}.config.{unknown[0]}", f"unknown field of the {pl['planner']} planner in the {kind} "
                                                      f"study; expected one of {list(allowed)}")
        if "threads" in cfg:
            _num(cfg["threads"], f"{path}.config.threads", lo=1, integer=True)
        if "iterations" in cfg:
            _num(cfg["iterations"], f"{path}.config.iterations", lo=1, integer=True)
        if "node_steps" in cfg:  # the scenes' horizon is 100 steps (0.5 s at 5 ms)
            _num(cfg["node_steps"], f"{path}.config.node_steps", lo=1, hi=100, integer=True)
        if "method" in cfg and cfg["method"] not in ("mppi", "cem", "ilqr"):
            raise _err(f"{path}.config.method", f"expected one of ['mppi', 'cem', 'ilqr'], got {cfg['method']!r}")
        if kind == "sampling_box_push" and ("method" in cfg or "iterations" in cfg or "node_steps" in cfg):
            raise _err(f"{path}.config", "the box-push study takes threads only")
    return check


def _check_opts(kind, o, world):
    if world["kind"] != "mujoco":
        raise _err("world.kind", f"the {kind} study runs in MuJoCo, got {world['kind']!r}")
    for k in ("ratio", "periods", "goal_s", "tol"):
        if k in o:
            _num(o[k], f"task.options.{k}", lo=0.0, lo_open=True)
    if "n_goals" in o:
        _num(o["n_goals"], "task.options.n_goals", lo=1, integer=True)
    if o.get("steps") is not None:
        _num(o["steps"], "task.options.steps", lo=1, integer=True)


def _pin_model():
    import pinocchio as pin

    from ..core.bsqp import robot_urdf

    return pin.buildModelFromUrdf(str(robot_urdf(PLANT)))


def _robot_check(robot):
    if robot != PLANT:
        raise _err("robots", f"the sampling studies run the {PLANT} scenes, got {robot!r}")


def _f8_scenarios(robot, o, seed, n):
    from ..sim.scenarios import fig8_scenarios

    _robot_check(robot)
    return fig8_scenarios(_pin_model(), PLANT, n, seed=seed, dt=0.03125, ratio_range=(o["ratio"], o["ratio"]))


def _pp_scenarios(robot, o, seed, n):
    from ..sim.scenarios import pickplace_scenarios

    _robot_check(robot)
    return pickplace_scenarios(_pin_model(), PLANT, n, seed=seed, ramps=(0.0,), n_goals=o["n_goals"])


def _box_scenarios(robot, o, seed, n):
    from ..sampling import scenes

    _robot_check(robot)
    return scenes.box_push_scenarios(n, seed=seed)


def _run_f8(ep):
    sc, o = _arrays(ep["scenario"]), ep["task_options"]
    if ep["planner"]["planner"] == "sampling":
        c = ep["planner"]["config"]
        r = fig8_sampling_metrics(sc, threads=_threads(ep), periods=o["periods"], method=c.get("method"),
                                  iterations=c.get("iterations"), node_steps=c.get("node_steps"))
    else:
        r = fig8_bsqp_metrics(sc, periods=o["periods"])
    return dict(r, stop_reason="reference_end", sim_time=float(o["periods"] * sc["params"]["period"]))


def _run_pp(ep):
    sc, o = _arrays(ep["scenario"]), ep["task_options"]
    if ep["planner"]["planner"] == "sampling":
        c = ep["planner"]["config"]
        r = pickplace_sampling_metrics(sc, goal_s=o["goal_s"], threads=_threads(ep), method=c.get("method"),
                                       iterations=c.get("iterations"), node_steps=c.get("node_steps"))
    else:
        r = pickplace_bsqp_metrics(sc, goal_s=o["goal_s"])
    return dict(r, stop_reason="goals_done", sim_time=float(len(sc["goals"]) * o["goal_s"]),
                success=int(r["end_goal_error_max"] < o["tol"]))


def _run_box(ep):
    sc, o = _arrays(ep["scenario"]), ep["task_options"]
    e, e0 = box_push(sc, threads=_threads(ep), steps=o["steps"])
    return dict(stop_reason="steps_done", sim_time=float("nan"), box_error=e, box_error_open_loop=e0,
                success=int(e < o["tol"]))


PLANNER_STUDIES = {
    "sampling_fig8": dict(kind="sampling_fig8", doc="bench_sampling's figure-8: sampling vs bsqp in MuJoCo",
                          options=dict(ratio=0.5, periods=1),
                          metrics=("rms_tracking_error", "mean_tracking_error", "solve_time_ms"),
                          scenarios=_f8_scenarios, run=_run_f8, check=_check_opts,
                          planner_check=_check_planner_for(("sampling", "bsqp"))),
    "sampling_pickplace": dict(kind="sampling_pickplace",
                               doc="bench_sampling's step pick-and-place: sampling vs bsqp in MuJoCo",
                               options=dict(goal_s=2.0, n_goals=3, tol=0.02),
                               metrics=("end_goal_error_max", "success", "mean_goal_error", "solve_time_ms"),
                               scenarios=_pp_scenarios, run=_run_pp, check=_check_opts,
                               planner_check=_check_planner_for(("sampling", "bsqp"))),
    "sampling_box_push": dict(kind="sampling_box_push", doc="bench_sampling's box pushing (sampling)",
                              options=dict(tol=0.03, steps=None),
                              metrics=("box_error", "box_error_open_loop", "success"),
                              scenarios=_box_scenarios, run=_run_box, check=_check_opts,
                              planner_check=_check_planner_for(("sampling",))),
}
