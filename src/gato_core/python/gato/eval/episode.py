"""One episode of a sweep: build the world, the planner and the task from an episode dict
(gato.eval.spec), run them through :func:`gato.simloop.run_closed_loop` (lockstep: the
same numbers on any machine and process), and reduce the record to one result row.

:func:`run_episode` never raises for a failing episode: the row carries ``status="error"``
and the traceback, so a sweep goes on. This module is what Ray / the process pool ship to
a worker (by reference: workers import it from the installed gato package).
"""
from __future__ import annotations

import math
import time
import traceback

import numpy as np

__all__ = ["NODE_DEFAULTS", "node_defaults", "generate_scenarios", "make_disturbance", "bsqp_config", "make_planner",
           "run_episode", "episode_metrics", "identity"]

#: The controller node's robot-independent defaults of the controller-schema parameters a bsqp
#: configuration takes (gato_ros.params.CONTROLLER for a robot without shipped weights; the arms'
#: own: :func:`node_defaults`; test/test_eval.py checks they agree). A bsqp episode builds exactly
#: what the controller node would build from the same parameter file.
NODE_DEFAULTS = dict(N=32, dt=0.03125, batch_size=1, warm_start="shift", linsys="bdsv", limits="admm",
                     reseed_threshold=0.0, q_cost=2.0, qd_cost=0.01, u_cost=2e-6, N_cost=50.0, q_lim_cost=0.01,
                     vel_lim_cost=0.0, ctrl_lim_cost=0.0, mu=10.0, rho=0.01, max_sqp_iters=1, max_pcg_iters=200,
                     pcg_tol=1e-4, u_ref="zero")

_PICKPLACE_TASK = dict(timeout=2.0, threshold=0.02, velocity_threshold=0.1, settle_time=0.1)


def _jsonable(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def generate_scenarios(robot: str, task: dict, seeds, n: int) -> list:
    """Scenario dicts (JSON-able) of ``task`` (the spec's validated task block) for ``robot``:
    n per seed, in seed order, from gato.tasks.fig8_scenarios / pickplace_scenarios. Each
    carries its ``seed`` and ``id``."""
    import pinocchio as pin

    from ..sim import scenarios as tasks
    from ..core.bsqp import robot_urdf
    from .studies import STUDIES, generate_study_scenarios

    model = pin.buildModelFromUrdf(str(robot_urdf(robot)))
    opts = dict(task.get("options", {}))
    out = []
    for seed in seeds:
        if task["kind"] in STUDIES:
            scen = generate_study_scenarios(robot, task["kind"], opts, int(seed), n)
        elif task["kind"] == "fig8":
            kw = {k: (tuple(v) if k == "ratio_range" else v) for k, v in opts.items()}
            scen = tasks.fig8_scenarios(model, robot, n, seed=int(seed), **kw)
        else:
            kw = {k: (tuple(v) if k == "ramps" else v) for k, v in opts.items() if k not in _PICKPLACE_TASK
                  and k != "dt"}
            scen = tasks.pickplace_scenarios(model, robot, n, seed=int(seed), **kw)
        for s in scen:
            s = _jsonable(s)
            s["seed"] = int(seed)
            out.append(s)
    return out


def make_disturbance(d: dict):
    """A gato.simloop.Disturbance from its spec mapping ({kind, ...}); ValueError naming the value."""
    from ..sim.disturbances import ConstantWrench, Impulse, LinkMassError, PendulumPayload, PointPayload

    kind = d["kind"]
    if kind == "constant_wrench":
        return ConstantWrench(d["wrench"], via=d.get("via", "auto"))
    if kind == "point_payload":
        return PointPayload(d["mass"])
    if kind == "impulse":
        return Impulse(d["t_start"], d["duration"], d["wrench"])
    if kind == "link_mass_error":
        return LinkMassError(d["mass_scale"])
    if kind == "pendulum":
        return PendulumPayload.from_config({k: v for k, v in d.items() if k != "kind"})
    raise ValueError(f"kind: unknown disturbance {kind!r}")


def node_defaults(robot: str) -> dict:
    """The controller node's defaults for ``robot`` of the parameters in :data:`NODE_DEFAULTS`:
    those, with the arm's shipped weights over them (gato.planners.shipped_weights) when it has some."""
    from ..planners.shipped_weights import SHIPPED_WEIGHTS

    return dict(NODE_DEFAULTS, **SHIPPED_WEIGHTS.get(robot, {}))


def bsqp_config(robot: str, params: dict) -> dict:
    """The controller configuration (gato.controller_setup.build_controller's keys) of a bsqp
    entry: ``params`` over :func:`node_defaults` of the robot, with the robot."""
    return dict(node_defaults(robot), **params, robot=robot)


def make_planner(robot: str, entry: dict):
    """The planner of a spec entry ({label, planner, config, params}) for ``robot``. bsqp: the
    controller node's construction (gato.controller_setup.build_controller over the node
    defaults, then ``config`` keys of MPCController are not used); others: gato.planner.make."""
    from ..planners import planner as registry

    name = entry["planner"]
    if name == "bsqp":
        from ..planners.bsqp_planner import BSQPPlanner
        from ..planners.controller_setup import build_controller

        if entry.get("config"):
            raise ValueError("config: the bsqp planner of gato eval takes controller-schema params, not config "
                             f"(got {sorted(entry['config'])})")
        return BSQPPlanner.from_controller(build_controller(bsqp_config(robot, entry.get("params", {}))))
    if name not in registry.planners():
        registry.register_planner(name, name)  # "module:Class"
    return registry.make(name, robot, dict(entry.get("config", {})) or None)


def _build(ep: dict):
    """(sim, planner, task, limits, feedback) of an episode: feedback is None (plans played
    open loop) or the gato.sim.commands.FeedbackLaw of the planner entry's ``feedback``."""
    from ..robots.frames import EEKinematics
    from ..sim.loop import make_world, Simulation
    from ..sim.tasks import GoalTask, TrackingTask
    from ..core.bsqp import robot_info, robot_urdf
    from ..core.references import Figure8

    robot, sc = ep["robot"], ep["scenario"]
    urdf = robot_urdf(robot)
    ee_frame = robot_info(robot)["ee_frame"]
    planner = make_planner(robot, ep["planner"])
    mode = ep["planner"].get("feedback")
    if mode in ("riccati", "riccati+pd"):
        planner.plan_gains = True  # the winning row's gains on each plan (BSQPPlanner)
    dists = [make_disturbance(d) for d in ep["disturbances"]]
    sim_dt = float(ep["world"]["sim_dt"])
    world = make_world(ep["world"]["kind"], urdf, ee_frame=ee_frame,
                       timestep=sim_dt if ep["world"]["kind"] == "mujoco" else None, disturbances=dists)
    kin = EEKinematics(urdf, ee_frame)
    from ..sim.scenarios import urdf_limits

    limits = urdf_limits(kin.model)
    sim = Simulation(world, np.asarray(sc["q0"], dtype=np.float64), sim_dt=sim_dt, kinematics=kin,
                     disturbances=dists, effort_limit=limits["u"])
    duration = float(ep["episode"]["duration"])
    if ep["task_kind"] == "fig8":
        p = sc["params"]
        ref = Figure8(p["offset"], p["A_x"], p["A_z"], p["theta"], p["period"])
        task = TrackingTask(ref, planner.N, planner.dt, duration)
    else:
        opts = {**_PICKPLACE_TASK, **{k: v for k, v in ep.get("task_options", {}).items() if k in _PICKPLACE_TASK}}
        task = GoalTask(np.asarray(sc["goals"]), planner.N, planner.dt, timeout=opts["timeout"],
                        threshold=opts["threshold"], velocity_threshold=opts["velocity_threshold"],
                        velocity_norm=2, settle_time=opts["settle_time"], ramp=float(sc["ramp"]))
        task.t_end = min(task.t_end, duration)
    law = None
    if mode is not None:
        from ..sim.commands import FeedbackLaw

        law = FeedbackLaw(mode, limits["u"])
    return sim, planner, task, limits, law


def _excess(x, lo, hi):
    """(T, n) how far x leaves [lo, hi], normalised by max(|lo|, |hi|) (0 inside)."""
    scale = np.maximum(np.maximum(np.abs(lo), np.abs(hi)), 1e-9)
    return (np.maximum(x - hi, 0.0) + np.maximum(lo - x, 0.0)) / scale


def episode_metrics(stats: dict, limits: dict) -> dict:
    """The metric columns (gato.eval.spec.METRICS) of a RunRecord.stats() dict and the URDF
    ``limits`` (gato.tasks.urdf_limits)."""
    q = np.asarray(stats["joint_positions"], dtype=np.float64)
    dq = np.asarray(stats["joint_velocities"], dtype=np.float64)
    u = np.asarray(stats["torques"], dtype=np.float64)
    nan = float("nan")
    viol = np.zeros(len(q))
    if len(q):
        ex = [_excess(q, limits["q_lo"], limits["q_hi"]), _excess(dq, -limits["qd"], limits["qd"]),
              _excess(u, -limits["u"], limits["u"])]
        viol = sum(e.sum(axis=1) for e in ex)
    st = np.asarray(stats["solve_times"], dtype=np.float64)
    gd = np.asarray(stats.get("goal_distances", []), dtype=np.float64)
    return dict(mean_tracking_error=stats["mean_tracking_error"], max_tracking_error=stats["max_tracking_error"],
                final_goal_distance=float(gd[-1]) if gd.size else nan,
                goals_reached=int(stats.get("goals_reached", 0)),
                limit_violation=float(viol.sum()), limit_violation_ticks=int(np.count_nonzero(viol > 0)),
                effort=float(np.mean(np.sum((u / np.maximum(limits["u"], 1e-9)) ** 2, axis=1))) if len(u) else nan,
                solve_time_ms=float(st.mean()) if st.size else nan,
                solve_time_p95_ms=float(np.percentile(st, 95)) if st.size else nan,
                diverged=int(stats["stop_reason"] == "diverged"), n_ticks=int(stats["n_ticks"]))


def identity(ep: dict, status="ok", error="") -> dict:
    """The identity columns of an episode's row (and status, error, stop_reason, sim_time)."""
    sc = ep["scenario"]
    return dict(index=int(ep["index"]), key=ep["key"], robot=ep["robot"], label=ep["planner"]["label"],
                planner=ep["planner"]["planner"], disturbance_case=ep["disturbance_case"], scenario_id=sc["id"],
                seed=int(sc["seed"]), status=status, error=error, stop_reason="", sim_time=float("nan"))


def run_episode(ep: dict) -> dict:
    """Run one episode (a dict of gato.eval.spec.Spec.episodes) and return its row: identity
    columns (index, key, robot, label, planner, disturbance_case, scenario_id, seed), status
    ("ok" | "error"), error (the traceback, "" when ok), stop_reason, sim_time [s], the
    metric columns, wall_s [s] (wall clock of the episode, not deterministic). Never raises for
    a failing episode (KeyboardInterrupt / SystemExit pass through)."""
    from ..sim.loop import run_closed_loop
    from .studies import STUDIES, run_study

    row = identity(ep)
    t0 = time.perf_counter()
    try:
        if ep["task_kind"] in STUDIES:  # a study runs its own closed loop and reports its own metrics
            row.update(run_study(ep))
        else:
            sim, planner, task, limits, law = _build(ep)
            rec = run_closed_loop(sim, planner, task, paced=False, feedback=law)
            stats = rec.stats()
            row.update(stop_reason=rec.stop_reason, sim_time=float(rec.sim_time))
            row.update(episode_metrics(stats, limits))
    except Exception:  # a failing episode is a result, not the end of the sweep
        row.update(status="error", error=traceback.format_exc())
    row["wall_s"] = time.perf_counter() - t0
    for k, v in list(row.items()):
        if isinstance(v, float) and not math.isfinite(v):
            row[k] = float("nan")
    return row
