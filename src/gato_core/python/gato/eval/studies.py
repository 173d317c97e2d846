"""Study task kinds of ``gato eval``: closed-loop studies that bring their own scenario
generator, controller construction and metrics. An episode of a study kind calls the study's
run function (the same code a benchmark script calls directly) instead of the generic
build-world / planner / task path of gato.eval.episode, and its row carries the study's metric
columns (gato.eval.spec.METRICS).

Kinds (task.kind):

- ``step``: gato.limit_scenarios.step_scenarios (seeded step pick-and-place, default
  SolverParams weights) run by gato.limit_scenarios.run_step_scenario through
  gato.simloop.run_closed_loop on the spec's world (mujoco | pinocchio at world.sim_dt).
  Options: n_goals, step_range [rad], N, dt [s] (the solver's), goal_s [s] per goal.
  bench/bench_limit_sweep.py, bench/specs/limits_step_sweep_iiwa14.yaml.
- ``limits_pickplace`` / ``limits_fig8``: bench/bench_limits.py's workloads,
  gato.limit_scenarios.run_limits_pickplace / run_limits_fig8 (an aggressive EE tracker on
  PinocchioWorld RK4, ``control period / world.sim_dt`` substeps; world.sim_dt must divide
  the 0.03125 s period). Options: goal_s (pickplace), ratio and periods (fig8).
  bench/specs/limits_pickplace_iiwa14.yaml, limits_fig8_iiwa14.yaml.

A study's planner entries are ``planner: bsqp`` with ``config`` (no ``params``):
``limits`` (default | off | telemetry | al | barrier | admm; default = the controller's
None, i.e. LIMIT_DEFAULTS["admm"]), ``limits_kw`` (keyword overrides of the enable call,
e.g. {iters: 10, rho_qd: 0.03}), ``integrator`` (euler | semi_implicit | rk4; absent = the
study's default), ``solver`` (SolverParams fields: q_cost, N_cost, ...; absent = the
study's default). Studies take no disturbances and set their own length (no ``episode``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .spec import BSQP_COST_SOLVER_KEYS, _number as _num

__all__ = ["STUDIES", "Study", "study_metrics", "check_study", "generate_study_scenarios", "run_study"]

_LIMITS = ("default", "off", "telemetry", "al", "barrier", "admm")
_INTEGRATORS = ("euler", "semi_implicit", "rk4")
_CONFIG = ("limits", "limits_kw", "integrator", "solver")

_STEP_METRICS = ("peak_qd_ratio", "peak_joint", "qd_ratio", "q_excess", "u_excess", "task_time", "mean_goal_error",
                 "goals_reached")
_PP_METRICS = ("peak_qd_ratio", "peak_joint", "qd_ratio", "task_time", "mean_goal_error", "plan_viol_q",
               "plan_viol_qd", "plan_viol_u")
_F8_METRICS = ("rms_tracking_error", "task_time", "path_lag", "peak_qd_ratio", "peak_joint", "qd_ratio",
               "plan_viol_q", "plan_viol_qd", "plan_viol_u")


@dataclass(frozen=True)
class Study:
    """A study kind. ``options``: {name: default} of task.options; ``metrics``: the metric
    columns its rows carry (names of gato.eval.spec.METRICS); ``scenarios(robot, options,
    seed, n)`` -> list of scenario dicts (each with an ``id``); ``run(ep)`` -> dict of
    stop_reason, sim_time [s] and the metric columns of one episode (gato.eval.spec episode
    dict; its planner entry's ``config`` holds the controller settings of the module
    docstring); ``check(kind, options, world)`` (optional) raises ValueError naming the
    field. The functions must live in an importable module: workers look the study up by
    its kind in :data:`STUDIES`."""

    kind: str
    doc: str
    options: dict = field(default_factory=dict)
    metrics: tuple = ()
    scenarios: object = None
    run: object = None
    check: object = None
    #: ``planner_check(kind, entry, path)``: validates a planner entry (default: the limit
    #: studies' config keys of the module docstring).
    planner_check: object = None
    #: ``disturbance_check(case_list, path)`` -> the validated list: the study takes
    #: disturbance cases (default None: it takes none).
    disturbance_check: object = None
    #: The robots the study runs, e.g. ("go2",) (empty: those with task tables, gato.tasks.Q_READY).
    robots: tuple = ()


def study_metrics(kind: str) -> tuple:
    """The metric columns a study kind's rows carry."""
    return STUDIES[kind].metrics


def _err(path, msg):
    return ValueError(f"{path}: {msg}")


def _check_options(kind: str, options: dict) -> dict:
    """task.options of a study, completed with its defaults; ValueError naming task.options.X."""
    st = STUDIES[kind]
    unknown = sorted(set(options) - set(st.options))
    if unknown:
        raise _err(f"task.options.{unknown[0]}", f"unknown option of the {kind} study; expected one of "
                                                 f"{list(st.options)}")
    return {**st.options, **options}


def _check_planner(kind: str, pl: dict, path: str) -> None:
    if pl["planner"] != "bsqp":
        raise _err(f"{path}.planner", f"the {kind} study runs the bsqp controller; got {pl['planner']!r}")
    if pl["params"]:
        raise _err(f"{path}.params", f"the {kind} study builds its own controller: give config "
                                     f"{{{', '.join(_CONFIG)}}} instead of controller-schema params")
    cfg = pl["config"]
    unknown = sorted(set(cfg) - set(_CONFIG))
    if unknown:
        raise _err(f"{path}.config.{unknown[0]}", f"unknown field; expected one of {list(_CONFIG)}")
    mech = cfg.get("limits", "default")
    if mech not in _LIMITS:
        raise _err(f"{path}.config.limits", f"expected one of {list(_LIMITS)}, got {mech!r}")
    kw = cfg.get("limits_kw", {}) or {}
    if not isinstance(kw, dict):
        raise _err(f"{path}.config.limits_kw", f"expected a mapping of keyword overrides, got {kw!r}")
    if kw and mech == "off":
        raise _err(f"{path}.config.limits_kw", "given, but limits 'off' installs no mechanism to pass them to")
    if mech in ("default", "admm"):
        from ..planners.controller import MPCController

        known = MPCController.LIMIT_DEFAULTS["admm"]
        bad = sorted(set(kw) - set(known))
        if bad:
            raise _err(f"{path}.config.limits_kw.{bad[0]}", f"not an ADMM limit setting; expected one of {list(known)}")
    for k, v in kw.items():
        _num(v, f"{path}.config.limits_kw.{k}", lo=0.0, integer=k == "iters")
    integ = cfg.get("integrator")
    if integ is not None and integ not in _INTEGRATORS:
        raise _err(f"{path}.config.integrator", f"expected one of {list(_INTEGRATORS)}, got {integ!r}")
    check_solver(cfg, path)


def check_solver(cfg: dict, path: str) -> None:
    """A study planner entry's ``config.solver`` (SolverParams fields); ValueError naming it."""
    solver = cfg.get("solver", {}) or {}
    if not isinstance(solver, dict):
        raise _err(f"{path}.config.solver", f"expected a mapping of SolverParams fields, got {solver!r}")
    for k, v in solver.items():
        if k not in BSQP_COST_SOLVER_KEYS:
            raise _err(f"{path}.config.solver.{k}", f"unknown field; expected one of {list(BSQP_COST_SOLVER_KEYS)}")
        _num(v, f"{path}.config.solver.{k}", lo=0.0, integer=k in ("max_sqp_iters", "max_pcg_iters"))


def check_study(kind: str, task_options: dict, planners: list, world: dict, raw: dict) -> dict:
    """Validate a spec of a study kind (its task.options, planner entries, world, and that it
    has no disturbances or episode block); returns the completed task.options."""
    opts = _check_options(kind, task_options)
    for i, pl in enumerate(planners):
        (STUDIES[kind].planner_check or _check_planner)(kind, pl, f"planners[{i}]")
    dist = raw.get("disturbances")
    if dist and any(v for v in dist.values()) and STUDIES[kind].disturbance_check is None:
        raise _err("disturbances", f"the {kind} study takes no disturbances")
    if raw.get("episode"):
        raise _err("episode", f"the {kind} study sets its own length ("
                              + {"limits_fig8": "task.options.periods", "disturbance_fig8": "task.options.duration",
                                 "payload_pickplace": "task.options.goal_timeout x goals",
                                 "sampling_fig8": "task.options.periods",
                                 "sampling_box_push": "the task's steps"}.get(
                                  kind, "task.options.goal_s x goals") + "); remove episode")
    if STUDIES[kind].check is not None:
        STUDIES[kind].check(kind, opts, world)
    return opts


_P = "task.options"


def _check_step(kind, o, world):
    _num(o["n_goals"], f"{_P}.n_goals", lo=1, integer=True)
    _num(o["N"], f"{_P}.N", lo=2, integer=True)
    _num(o["dt"], f"{_P}.dt", lo=0.0, lo_open=True)
    _num(o["goal_s"], f"{_P}.goal_s", lo=0.0, lo_open=True)
    r = o["step_range"]
    if not (isinstance(r, (list, tuple)) and len(r) == 2):
        raise _err(f"{_P}.step_range", f"expected [min, max] rad, got {r!r}")
    lo, hi = (_num(x, f"{_P}.step_range[{i}]", lo=0.0, lo_open=True) for i, x in enumerate(r))
    if lo > hi:
        raise _err(f"{_P}.step_range", f"expected min <= max, got {r!r}")


def _check_limits(kind, o, world):
    from ..frontends.limit_scenarios import LIMITS_DT

    for k in ("goal_s", "ratio", "periods"):
        if k in o:
            _num(o[k], f"{_P}.{k}", lo=0.0, lo_open=True)
    if world["kind"] != "pinocchio":
        raise _err("world.kind", f"the {kind} study runs on the pinocchio world, got {world['kind']!r}")
    k = LIMITS_DT / world["sim_dt"]
    if abs(k - round(k)) > 1e-9 or round(k) < 1:
        raise _err("world.sim_dt", f"the {kind} study steps the world {LIMITS_DT} s / k (k = 1, 2, ...); "
                                   f"got {world['sim_dt']!r}")


def generate_study_scenarios(robot: str, kind: str, options: dict, seed: int, n: int) -> list:
    """The study's scenarios for one seed."""
    return STUDIES[kind].scenarios(robot, options, seed, n)


def _step_scenarios(robot, o, seed, n):
    from ..frontends.limit_scenarios import step_scenarios

    return step_scenarios(robot, n, seed=seed, n_goals=o["n_goals"], step_range=tuple(o["step_range"]), N=o["N"],
                          dt=o["dt"])


def _pp_scenarios(robot, o, seed, n):
    from ..frontends.limit_scenarios import limits_pickplace_set

    return limits_pickplace_set(robot, n, seed=seed)


def _f8_scenarios(robot, o, seed, n):
    from ..frontends.limit_scenarios import limits_fig8_set

    return limits_fig8_set(robot, n, seed=seed, ratio=o["ratio"])


def _plan_viol(pv) -> dict:
    v = [math.nan] * 3 if pv is None else [float(x) for x in np.asarray(pv).ravel()[:3]]
    return dict(plan_viol_q=v[0], plan_viol_qd=v[1], plan_viol_u=v[2])


def run_study(ep: dict) -> dict:
    """Run one episode of a study kind; returns its stop_reason, sim_time [s] and metric columns."""
    return STUDIES[ep["task_kind"]].run(ep)


def _controller_args(ep):
    """(limits, limits_kw, solver, integrator) of a study episode's planner config."""
    cfg = ep["planner"]["config"]
    mech = cfg.get("limits", "default")
    return None if mech == "default" else mech, cfg.get("limits_kw") or None, cfg.get("solver") or None, \
        cfg.get("integrator")


def _run_step(ep):
    from ..frontends import limit_scenarios as ls

    sc, o = ep["scenario"], ep["task_options"]
    limits, kw, solver, integ = _controller_args(ep)
    r = ls.run_step_scenario(sc, limits=limits, limits_kw=kw, integrator=integ, world=ep["world"]["kind"],
                             goal_s=o["goal_s"], params=solver, sim_dt=ep["world"]["sim_dt"])
    return dict(stop_reason="goals_done", sim_time=float(len(sc["goals"]) * o["goal_s"]),
                peak_qd_ratio=r["peak_qd_ratio"], peak_joint=r["peak_joint"], qd_ratio=r["qd_ratio"].tolist(),
                q_excess=float(r["q_excess"].max()), u_excess=float(r["u_excess"].max()),
                task_time=r["task_time"], mean_goal_error=r["mean_err"], goals_reached=r["reached"])


def _limits_args(ep):
    """(limits, limits_kw, solver_kw (gato.BSQP keywords or None: LIMITS_SOLVER), substeps)."""
    from ..frontends.limit_scenarios import LIMITS_DT

    limits, kw, solver, integ = _controller_args(ep)
    solver_kw = None
    if solver is not None or integ is not None:
        solver_kw = dict(solver or {})
        if integ is not None:
            solver_kw["integrator"] = integ
    return limits, kw, solver_kw, int(round(LIMITS_DT / ep["world"]["sim_dt"]))


def _run_pp(ep):
    from ..frontends import limit_scenarios as ls

    sc, o = ep["scenario"], ep["task_options"]
    limits, kw, solver_kw, substeps = _limits_args(ep)
    r = ls.run_limits_pickplace(sc, limits, kw, goal_s=o["goal_s"], solver_kw=solver_kw, substeps=substeps)
    ticks = int(round(o["goal_s"] / ls.LIMITS_DT))
    return dict(stop_reason="goals_done", sim_time=len(sc["goals"]) * ticks * ls.LIMITS_DT,
                peak_qd_ratio=r["peak_qd_ratio"], peak_joint=r["peak_joint"], qd_ratio=r["qd_ratio"].tolist(),
                task_time=float(r["task_time"]), mean_goal_error=r["mean_err"], **_plan_viol(r["plan_viol"]))


def _run_f8(ep):
    from ..frontends import limit_scenarios as ls

    sc, o = ep["scenario"], ep["task_options"]
    limits, kw, solver_kw, substeps = _limits_args(ep)
    r = ls.run_limits_fig8(sc, limits, kw, periods=o["periods"], solver_kw=solver_kw, substeps=substeps)
    qd = r["qd_ratio"]
    return dict(stop_reason="reference_end", sim_time=float(r["task_time"] - r["lag"]),
                rms_tracking_error=r["rms_err"], task_time=float(r["task_time"]), path_lag=float(r["lag"]),
                peak_qd_ratio=r["peak_qd_ratio"], peak_joint=int(np.argmax(qd)), qd_ratio=qd.tolist(),
                **_plan_viol(r["plan_viol"]))


STUDIES = {
    "step": Study("step", "gato.limit_scenarios step scenarios through gato.simloop (bench_limit_sweep)",
                  dict(n_goals=2, step_range=[0.3, 1.2], N=32, dt=0.01, goal_s=2.0), _STEP_METRICS,
                  _step_scenarios, _run_step, _check_step),
    "limits_pickplace": Study("limits_pickplace", "bench_limits' step-reference pick-and-place",
                              dict(goal_s=2.0), _PP_METRICS, _pp_scenarios, _run_pp, _check_limits),
    "limits_fig8": Study("limits_fig8", "bench_limits' slow figure-8", dict(ratio=0.5, periods=1), _F8_METRICS,
                         _f8_scenarios, _run_f8, _check_limits),
}

# The wrench-hypothesis studies (issue 15's disturbance and payload experiments) live in their
# own module (gato.eval.wrench_studies).
from .wrench_studies import WRENCH_STUDIES  # noqa: E402

STUDIES.update({kind: Study(**fields) for kind, fields in WRENCH_STUDIES.items()})

# bench_sampling's closed loop (sampling vs bsqp in MuJoCo) lives in gato.eval.planner_studies.
from .planner_studies import PLANNER_STUDIES  # noqa: E402

STUDIES.update({kind: Study(**fields) for kind, fields in PLANNER_STUDIES.items()})

# go2 standing and pushed under the floating-base MPC (issue 34) live in gato.eval.go2_studies.
from .go2_studies import GO2_STUDIES  # noqa: E402

STUDIES.update({kind: Study(**fields) for kind, fields in GO2_STUDIES.items()})
