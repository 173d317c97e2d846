"""The go2 study kinds of ``gato eval`` (issue 34): the quadruped standing and pushed in MuJoCo
under the floating-base contact-force MPC (gato.sim.go2; docs/floating_solver.md).

Kinds (task.kind; ``robots: [go2]``, ``world: {kind: mujoco, sim_dt: 0.001}``):

- ``go2_stand``: gato.sim.go2.go2_stand_scenarios (n crouched starts per seed, scenario k seeded
  ``seed + k``) run by run_go2_stand for ``T`` s. Metrics: height_error_max [m] and tilt_max_deg
  after min(2, T / 2) s, min_foot_fn [N], foot_slip_max [m].
- ``go2_push``: gato.sim.go2.go2_push_scenarios (``impulse`` N s over ``duration`` s on the base
  at a seeded time in ``window``, a seeded horizontal direction; ``lateral``: the base's
  +-y +-15 deg) run by run_go2_push for ``T`` s. Metrics: up (1: the base stayed above 60 % of
  its height and no link but the feet touched the ground), hmin_rel, body_contact (links other
  than the feet that touched), trunk_contact (those above the calves), drift_m.

Planner entries: ``planner: "gato.sim.go2:Go2Balance"`` (the floating-base MPC controller; not
MPC_GATO, which drives the fixed-base BSQP only) with ``config``: Go2Balance's keywords (N, dt,
iters, first_iters, w_base_vel, follow_xy, feedback, standing). Spec: bench/specs/go2_push.yaml.
"""
from __future__ import annotations

import math

__all__ = ["GO2_STUDIES", "GO2_PLANNER"]

GO2_PLANNER = "gato.sim.go2:Go2Balance"
_STAND_METRICS = ("height_error_max", "tilt_max_deg", "min_foot_fn", "foot_slip_max")
_PUSH_METRICS = ("up", "hmin_rel", "body_contact", "trunk_contact", "drift_m")


def _err(path, msg):
    return ValueError(f"{path}: {msg}")


def _check_planner(kind, pl, path):
    if pl["planner"] != GO2_PLANNER:
        raise _err(f"{path}.planner", f"the {kind} study runs {GO2_PLANNER!r}; got {pl['planner']!r}")
    if pl.get("params"):
        raise _err(f"{path}.params", f"the {kind} study takes the controller's keywords under config")
    from ..sim.go2 import Go2Balance

    try:
        Go2Balance(**pl.get("config", {}))
    except (TypeError, ValueError) as e:
        raise _err(f"{path}.config", str(e)) from None


def _check(kind, o, world):
    if world["kind"] != "mujoco" or abs(world["sim_dt"] - 0.001) > 1e-12:
        raise _err("world", f"the {kind} study runs the MuJoCo world at sim_dt 0.001; got {world!r}")
    T = o["T"]
    if isinstance(T, bool) or not isinstance(T, (int, float)) or not math.isfinite(T) or T <= 0:
        raise _err("task.options.T", f"expected a duration > 0 s, got {T!r}")
    if kind == "go2_push":
        from ..sim.go2 import go2_push_scenarios

        try:
            go2_push_scenarios(0, 1, impulse=o["impulse"], duration=o["duration"], window=o["window"],
                               lateral=bool(o["lateral"]))
        except (TypeError, ValueError) as e:
            raise _err("task.options", str(e)) from None
        if o["window"][1] + o["duration"] >= T:
            raise _err("task.options.T", f"the run must outlast the push window; got T {T}, window {o['window']}")


def _robot(robot):
    if robot != "go2":
        raise _err("robots", f"the go2 studies run go2 only, got {robot!r}")


def _stand_scenarios(robot, o, seed, n):
    from ..sim.go2 import go2_stand_scenarios

    _robot(robot)
    return go2_stand_scenarios(seed, n)


def _push_scenarios(robot, o, seed, n):
    from ..sim.go2 import go2_push_scenarios

    _robot(robot)
    return go2_push_scenarios(seed, n, impulse=o["impulse"], duration=o["duration"], window=tuple(o["window"]),
                              lateral=bool(o["lateral"]))


def _run_stand(ep):
    from ..sim.go2 import run_go2_stand

    r = run_go2_stand(ep["scenario"], T=ep["task_options"]["T"], controller=ep["planner"]["config"])
    return dict(stop_reason="sim_time", sim_time=r["sim_time"], height_error_max=r["h_err_max_after2s"],
                tilt_max_deg=r["tilt_max_after2s"], min_foot_fn=r["min_foot_fn_after2s"],
                foot_slip_max=r["slip_max_m"])


def _run_push(ep):
    from ..sim.go2 import run_go2_push

    r = run_go2_push(ep["scenario"], T=ep["task_options"]["T"], controller=ep["planner"]["config"])
    return dict(stop_reason="sim_time", sim_time=r["sim_time"], up=int(r["up"]), hmin_rel=r["hmin_rel"],
                body_contact=len(r["body_contact"]), trunk_contact=len(r["trunk_contact"]), drift_m=r["drift_m"])


#: gato.eval.studies.Study fields by kind (studies.py builds the Study objects).
GO2_STUDIES = {
    "go2_stand": dict(kind="go2_stand", doc="go2 stands up from a perturbed crouch under the floating-base MPC",
                      options=dict(T=10.0), metrics=_STAND_METRICS, scenarios=_stand_scenarios, run=_run_stand,
                      check=_check, planner_check=_check_planner, robots=("go2",)),
    "go2_push": dict(kind="go2_push", doc="go2 standing, pushed on the base (issue 34's push recovery)",
                     options=dict(T=3.0, impulse=20.0, duration=0.05, window=[1.0, 1.5], lateral=False),
                     metrics=_PUSH_METRICS, scenarios=_push_scenarios, run=_run_push, check=_check,
                     planner_check=_check_planner, robots=("go2",)),
}
