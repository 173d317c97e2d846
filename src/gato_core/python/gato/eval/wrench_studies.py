"""The wrench-hypothesis study kinds of ``gato eval`` (issue 15's experiments, the reference's
Fig. 5 and Fig. 7 protocols): closed-loop runs of :class:`gato.mpc_gato.MPC_GATO` with a
hypothesis batch (gato.hypotheses over a gato.estimators sampler; the sensor-rate identifiers
fed every world substep, as MPC_GATO does) against an unmodelled disturbance.

Kinds (task.kind):

- ``disturbance_fig8``: iiwa14 tracks a y-z figure-8 (Figure8 around the EE position at
  ``q_start``, half-widths ``half_widths`` [m], ``period`` [s]) from ``q_start`` at rest for
  ``duration`` simulated seconds while a constant world force F * d acts on the EE frame origin
  from t = 0 (lockstep PinocchioWorld RK4 at world.sim_dt, torques clamped to the URDF effort).
  Scenarios: per seed, n directions d drawn uniformly on the sphere (one draw of n); the force
  magnitude F is the disturbance case: ``[{kind: ee_force, magnitude: F}]`` (N; optional
  ``direction`` [x, y, z] replaces the scenario's) or ``[]`` (F = 0). Metrics:
  mean / max tracking error ||ee - reference knot 0|| and its mean over t >= ``settled_s``.
  bench/bench_disturbance.py, bench/specs/disturbance_fig8_iiwa14.yaml.
- ``payload_pickplace``: gato.tasks.pickplace_scenarios (3 goals, start jittered around the
  ready pose, step or minimum-jerk ramps) run by MPC_GATO.run_mpc_goals (``goal_timeout`` s per
  goal, ``goal_threshold`` m / ``velocity_threshold`` rad/s (L1) gates) with an unmodelled
  payload, the disturbance case: ``[{kind: pendulum, mass, length[, damping]}]`` (a pendulum
  hanging from the EE), ``[{kind: constant_wrench, wrench}]`` (e.g. the weight alone),
  ``[{kind: rigid_payload, mass[, offset, radius]}]`` (a grasped object that does not swing:
  a solid sphere fixed to the EE at ``offset`` [m] in EE axes, PinocchioWorld's rigid_payload),
  or ``[]``; any of them with ``attach: [T0, T1]`` is picked up mid-run, at a time drawn
  uniformly from [T0, T1] s per scenario (numpy default_rng([seed, k]), as
  bench/bench_payload_kinds.py --attach; gato.sim.pinocchio_world.AttachedAt). Task option
  ``ramps``: the scenarios' reference ramps [s] (null: pickplace_scenarios' default mix; [0.0]:
  step references, issue 32's protocol).
  Success: every goal reached, no joint outside its URDF position or velocity limit at
  any recorded tick (``limit_check: tick``, the default) or after any physics substep
  (``limit_check: step``, 1 ms; the step_* metrics are measured either way), no planner
  fallback, no divergence; ``success_after_grace`` judges the limits from t >= ``grace`` s only; ``clamp_torques`` (default true): the world applies the
  command clamped to the URDF effort limits (false: as commanded, MPC_GATO(clamp_torques=False)).
  bench/bench_payload.py, bench/specs/payload_pickplace_iiwa14.yaml.

Planner entries: ``planner: bsqp`` with ``config``:

- ``hypotheses``: {``estimator``: none | fe | cem | wid | wrench_id | swing, ``batch_size``: B,
  ``seed``: base seed, ``mode``: wrench | weight (wrench_id only)}. fe / cem: ForceEstimator /
  CEMForceEstimator under a ForceHypothesisBatch (B > 1); wid: IdentifiedWrenchSampler (any B);
  ``inertial_rows: true`` (wid only) adds its full identified wrench and the weight / wrench
  blend as rows (:func:`make_mpc_gato`); wrench_id: the B = 1 IdentifiedWrenchBatch
  (OneStepWrenchIdentifier); swing (any B): the PendulumSwingEstimator under a
  SwingWrenchBatch (the identified payload's wrench predicted knot by knot along the planned
  motion; :func:`make_mpc_gato`; ``inertial_gain``: its share of the predicted inertial
  reaction in [0, 1], default the estimator's by B); ``centre``: weight | swing (fe only): the ForceEstimator
  sampling around that identifier's current wrench (gato.hypotheses.fe_centre, fed per
  substep; sphere radius within gato.hypotheses.FE_CENTRE_RADIUS; :func:`make_mpc_gato`;
  ``centre_knots`` (centre swing only, default true): each row the swing prediction knot by
  knot plus the row's residual, false: the rows constant over the horizon, see
  gato.hypotheses.ForceHypothesisBatch);
  none: no hypotheses
  (B identical entries). The sampler of scenario k (0-based, within its seed) is seeded
  ``seed + k``: runs are deterministic.
- ``solver``: SolverParams fields (absent: SolverParams() defaults); ``limits``: default |
  off | telemetry | al | barrier | admm (MPCController's; default = its None).
"""
from __future__ import annotations

import math

import numpy as np

from .spec import _number as _num

__all__ = ["HYPOTHESIS_ESTIMATORS", "WRENCH_STUDIES", "mpc_gato_kwargs", "run_disturbance", "run_payload",
           "force_directions"]

#: hypotheses.estimator values -> MPC_GATO's (estimator, wrench_id) arguments.
HYPOTHESIS_ESTIMATORS = ("none", "fe", "cem", "wid", "wrench_id", "swing")
_CONFIG = ("hypotheses", "solver", "limits", "feedback")
_HYP = ("estimator", "batch_size", "seed", "mode", "inertial_rows", "centre", "inertial_gain", "centre_knots")
_LIMITS = ("default", "off", "telemetry", "al", "barrier", "admm")
_Q_START = [0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0]  # bench/fig8_problem.Q_START: the figures' start pose

_DIST_METRICS = ("mean_tracking_error", "max_tracking_error", "mean_tracking_error_settled", "n_ticks")
_PAY_METRICS = ("success", "success_after_grace", "goals_reached", "diverged", "fallbacks", "tick_qd_ratio",
                "tick_qd_joint", "pos_excess", "median_ref_distance", "time_to_all_reached", "first_violation_t",
                "last_violation_t", "n_ticks", "step_qd_ratio", "step_qd_joint", "step_pos_excess",
                "step_first_violation_t", "step_last_violation_t")
#: Where run_payload judges the joint limits: "tick" (the recorded control ticks, the figures of
#: docs/benchmarks_hypotheses.md so far) or "step" (every physics substep, 1 ms).
LIMIT_CHECKS = ("tick", "step")


class StepLimits:
    """Joint limits checked after every physics substep (a gato.sim.loop.Simulation observer):
    ``qd_ratio`` (nv,) the peak |dq_j| / qd_max_j, ``pos_excess`` [rad] the peak distance outside
    [q_lo, q_hi], ``first_t`` / ``last_t`` [s] the simulated times of the first and last substep
    outside a limit (None: none). The state's first len(q_lo) / len(qd_max) entries are the
    robot's (a world may append its payload's)."""

    def __init__(self, q_lo, q_hi, qd_max):
        self.q_lo, self.q_hi, self.qd_max = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (q_lo, q_hi, qd_max))
        self.qd_ratio = np.zeros(self.qd_max.size)
        self.pos_excess, self.t, self.first_t, self.last_t = 0.0, 0.0, None, None

    def __call__(self, q, dq, u, q_next, dq_next, sim_dt):
        self.t += float(sim_dt)
        qn = np.asarray(q_next, dtype=np.float64)[:self.q_lo.size]
        ratio = np.abs(np.asarray(dq_next, dtype=np.float64)[:self.qd_max.size]) / self.qd_max
        np.maximum(self.qd_ratio, ratio, out=self.qd_ratio)
        excess = float(max(np.max(self.q_lo - qn), np.max(qn - self.q_hi), 0.0))
        self.pos_excess = max(self.pos_excess, excess)
        if excess > 1e-6 or np.any(ratio > 1.0 + 1e-6 / self.qd_max):
            self.first_t = self.t if self.first_t is None else self.first_t
            self.last_t = self.t


def _err(path, msg):
    return ValueError(f"{path}: {msg}")


# ----------------------------------------------------------------- the controller of an entry
def mpc_gato_kwargs(config: dict, k: int = 0) -> dict:
    """MPC_GATO keyword arguments (batch_size, estimator, wrench_id, fe_seed, params, limits)
    of a planner entry's validated ``config`` for the scenario of index ``k`` in its seed
    (``inertial_rows`` needs :func:`make_mpc_gato`: MPC_GATO has no option for it)."""
    h = {"estimator": "none", "batch_size": 1, "seed": 0, **(config.get("hypotheses") or {})}
    est = h["estimator"]
    kw = dict(batch_size=int(h["batch_size"]), fe_seed=int(h["seed"]) + int(k), estimator=None, wrench_id=None)
    if est == "wrench_id":
        kw["wrench_id"] = h.get("mode", "wrench")
    elif est not in ("none", "swing") and not h.get("inertial_rows"):
        kw["estimator"] = est
    kw["params"] = dict(config["solver"]) if config.get("solver") else None
    lim = config.get("limits", "default")
    kw["limits"] = None if lim == "default" else lim
    return kw


def make_mpc_gato(config: dict, k: int = 0, **kw):
    """The gato.MPC_GATO of a planner entry's ``config`` (scenario index k; ``kw``: its other
    keywords: N, dt, constant_f_ext, pendulum_config, clamp_torques, ...). ``inertial_rows``
    (wid only): the IdentifiedWrenchSampler(inertial_rows=True) batch (its full identified
    wrench and the weight / wrench blend as rows 2, 3) replaces the hypothesis-free controller
    MPC_GATO built at that B; ``estimator: swing``: the SwingWrenchBatch over a
    PendulumSwingEstimator (B rows, seeded like the others) replaces it likewise. MPC_GATO's
    substep observers feed its identifier (they take the controller's batch when a run starts).
    ``plan_inertia`` (swing only, default True): SwingWrenchBatch's (the rigid object in the
    solver's model while the rigid model is in force)."""
    from ..wrench.estimators import ForceEstimator
    from ..wrench.identifier import IdentifiedWrenchSampler
    from ..wrench.hypotheses import ForceHypothesisBatch
    from ..wrench.options import FE_CENTRE_RADIUS, fe_centre
    from ..wrench.swing import PendulumSwingEstimator
    from ..wrench.swing_batch import SwingWrenchBatch
    from ..core.bsqp import robot_urdf
    from ..frontends.mpc_gato import MPC_GATO

    m = MPC_GATO(None, robot_urdf("iiwa14"), verbose=False, **mpc_gato_kwargs(config, k), **kw)
    h = config.get("hypotheses") or {}
    if h.get("inertial_rows"):
        s = m.solver
        est = IdentifiedWrenchSampler(m.batch_size, s.model, s.ee_frame, seed=m.fe_seed, inertial_rows=True)
        m.controller.hypotheses = ForceHypothesisBatch(est, s.model, s.ee_frame)
    elif h.get("estimator") == "swing":
        s = m.solver
        est = PendulumSwingEstimator(m.batch_size, s.model, s.ee_frame, seed=m.fe_seed,
                                     inertial_gain=h.get("inertial_gain"))
        m.controller.hypotheses = SwingWrenchBatch(est, s.model, s.ee_frame, plan_inertia=h.get("plan_inertia", True))
    elif h.get("centre") is not None:  # fe centred on an identifier (ForceEstimator(centre=...))
        s = m.solver
        lo, hi = FE_CENTRE_RADIUS
        est = ForceEstimator(m.batch_size, seed=m.fe_seed, initial_radius=hi, min_radius=lo, max_radius=hi,
                             centre=fe_centre(h["centre"], s.model, s.ee_frame, seed=m.fe_seed))
        m.controller.hypotheses = ForceHypothesisBatch(est, s.model, s.ee_frame, centre_knots=h.get("centre_knots"))
    return m


def _check_planner(kind: str, pl: dict, path: str) -> None:
    if pl["planner"] != "bsqp":
        raise _err(f"{path}.planner", f"the {kind} study runs gato.MPC_GATO (bsqp); got {pl['planner']!r}")
    if pl["params"]:
        raise _err(f"{path}.params", f"the {kind} study builds MPC_GATO: give config {{{', '.join(_CONFIG)}}}")
    cfg = pl["config"]
    unknown = sorted(set(cfg) - set(_CONFIG))
    if unknown:
        raise _err(f"{path}.config.{unknown[0]}", f"unknown field; expected one of {list(_CONFIG)}")
    if cfg.get("feedback") is not None:  # how the payload runs execute each plan between plans
        from ..sim.commands import FEEDBACK_MODES

        if kind != "payload_pickplace":
            raise _err(f"{path}.config.feedback", f"the {kind} study plays its plans open loop; feedback is a "
                                                  "payload_pickplace setting")
        if cfg["feedback"] not in FEEDBACK_MODES:
            raise _err(f"{path}.config.feedback", f"expected one of {list(FEEDBACK_MODES)} or null, "
                                                  f"got {cfg['feedback']!r}")
    h = cfg.get("hypotheses", {}) or {}
    hp = f"{path}.config.hypotheses"
    if not isinstance(h, dict):
        raise _err(hp, f"expected a mapping {{{', '.join(_HYP)}}}, got {h!r}")
    bad = sorted(set(h) - set(_HYP))
    if bad:
        raise _err(f"{hp}.{bad[0]}", f"unknown field; expected one of {list(_HYP)}")
    est = h.get("estimator", "none")
    if est not in HYPOTHESIS_ESTIMATORS:
        raise _err(f"{hp}.estimator", f"expected one of {list(HYPOTHESIS_ESTIMATORS)}, got {est!r}")
    B = _num(h.get("batch_size", 1), f"{hp}.batch_size", lo=1, integer=True)
    _num(h.get("seed", 0), f"{hp}.seed", lo=0, integer=True)
    if est in ("fe", "cem") and B < 2:
        raise _err(f"{hp}.batch_size", f"the {est} sampler spreads B > 1 wrench guesses; got {B} "
                                       "(B = 1: estimator none, wid or wrench_id)")
    if est == "wrench_id" and B != 1:
        raise _err(f"{hp}.batch_size", f"wrench_id is one identified wrench (B = 1), got {B}; use wid for a batch")
    if "inertial_rows" in h:
        if est != "wid":
            raise _err(f"{hp}.inertial_rows", f"only the wid sampler has inertial rows, not {est!r}")
        if not isinstance(h["inertial_rows"], bool):
            raise _err(f"{hp}.inertial_rows", f"expected true or false, got {h['inertial_rows']!r}")
    if "centre" in h:
        from ..wrench.options import FE_CENTRES

        if est != "fe":
            raise _err(f"{hp}.centre", f"only the fe sampler is centred on an identifier, not {est!r}")
        if h["centre"] not in FE_CENTRES:
            raise _err(f"{hp}.centre", f"expected one of {list(FE_CENTRES)}, got {h['centre']!r}")
    if "centre_knots" in h:
        if est != "fe" or h.get("centre") != "swing":
            raise _err(f"{hp}.centre_knots", "only the fe sampler centred on swing predicts knot by knot, not "
                                             f"{est!r} with centre {h.get('centre')!r}")
        if not isinstance(h["centre_knots"], bool):
            raise _err(f"{hp}.centre_knots", f"expected true or false, got {h['centre_knots']!r}")
    if "inertial_gain" in h:
        if est != "swing":
            raise _err(f"{hp}.inertial_gain", f"only the swing estimator has an inertial gain, not {est!r}")
        _num(h["inertial_gain"], f"{hp}.inertial_gain", lo=0.0, hi=1.0)
    if "mode" in h:
        if est != "wrench_id":
            raise _err(f"{hp}.mode", f"only the wrench_id estimator takes a mode, not {est!r}")
        if h["mode"] not in ("wrench", "weight"):
            raise _err(f"{hp}.mode", f"expected 'wrench' or 'weight', got {h['mode']!r}")
    lim = cfg.get("limits", "default")
    if lim not in _LIMITS:
        raise _err(f"{path}.config.limits", f"expected one of {list(_LIMITS)}, got {lim!r}")
    from .studies import check_solver

    check_solver(cfg, path)


def _check_world(kind, world):
    if world["kind"] != "pinocchio":
        raise _err("world.kind", f"the {kind} study needs the pinocchio world (constant wrench, pendulum), "
                                 f"got {world['kind']!r}")


def _check_common(kind, o, world):
    _check_world(kind, world)
    _num(o["N"], "task.options.N", lo=2, integer=True)
    _num(o["dt"], "task.options.dt", lo=0.0, lo_open=True)
    if world["sim_dt"] > o["dt"] * (1 + 1e-9):
        raise _err("world.sim_dt", f"longer than the control period task.options.dt = {o['dt']} s")


# ----------------------------------------------------------------- disturbance (Fig. 5)
def force_directions(n: int, seed: int) -> np.ndarray:
    """(n, 3) unit vectors drawn uniformly on the sphere (one seeded draw of n)."""
    v = np.random.default_rng(seed).standard_normal((n, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _dist_scenarios(robot, o, seed, n):
    if robot != "iiwa14":
        raise ValueError(f"robots: the disturbance_fig8 study is iiwa14's (its q_start), got {robot!r}")
    return [dict(id=f"s{seed}_d{k}", k=k, direction=d.tolist()) for k, d in enumerate(force_directions(n, seed))]


def _check_dist(kind, o, world):
    _check_common(kind, o, world)
    _num(o["duration"], "task.options.duration", lo=0.0, lo_open=True)
    _num(o["settled_s"], "task.options.settled_s", lo=0.0)
    _num(o["period"], "task.options.period", lo=0.0, lo_open=True)
    for key, m in (("q_start", 7), ("half_widths", 2)):
        v = o[key]
        if not (isinstance(v, (list, tuple)) and len(v) == m):
            raise _err(f"task.options.{key}", f"expected a list of {m} numbers, got {v!r}")
        for i, x in enumerate(v):
            _num(x, f"task.options.{key}[{i}]")


def _check_ee_force(d, path):
    """A disturbance entry of the disturbance_fig8 study."""
    if not isinstance(d, dict) or d.get("kind") != "ee_force":
        raise _err(path, f"the disturbance_fig8 study takes [{{kind: ee_force, magnitude: F}}] or [], got {d!r}")
    bad = sorted(set(d) - {"kind", "magnitude", "direction"})
    if bad:
        raise _err(f"{path}.{bad[0]}", "unknown field; expected one of ['kind', 'magnitude', 'direction']")
    if "magnitude" not in d:
        raise _err(f"{path}.magnitude", "required field missing")
    out = dict(kind="ee_force", magnitude=_num(d["magnitude"], f"{path}.magnitude", lo=0.0))
    if "direction" in d:
        v = d["direction"]
        if not (isinstance(v, (list, tuple)) and len(v) == 3):
            raise _err(f"{path}.direction", f"expected [x, y, z], got {v!r}")
        v = np.array([_num(x, f"{path}.direction[{i}]") for i, x in enumerate(v)])
        if np.linalg.norm(v) == 0:
            raise _err(f"{path}.direction", "expected a non-zero vector")
        out["direction"] = (v / np.linalg.norm(v)).tolist()
    return out


def _check_dist_case(case: list, path: str) -> list:
    if len(case) > 1:
        raise _err(path, f"expected one ee_force entry or none, got {len(case)}")
    return [_check_ee_force(d, f"{path}[{j}]") for j, d in enumerate(case)]


def run_disturbance(force, direction, config: dict, k: int = 0, *, duration=5.0, settled_s=2.0, q_start=None,
                    half_widths=(0.15, 0.10), period=4.0, N=32, dt=0.03125, sim_dt=0.001) -> dict:
    """One figure-8 run of the disturbance study: MPC_GATO (config: a planner entry's config,
    :func:`mpc_gato_kwargs`; scenario index k) tracks the figure-8 for ``duration`` s under the
    world force ``force`` [N] * ``direction`` (3,) (unit) on the EE origin. Returns
    stop_reason, sim_time [s], mean_tracking_error / max_tracking_error over the run and
    mean_tracking_error_settled over t >= settled_s [m], n_ticks, force_estimate (3,) N (the
    hypothesis batch's smoothed estimate / full identified wrench / CEM mean; None without one)."""
    from ..core.references import Figure8

    q0 = np.asarray(_Q_START if q_start is None else q_start, dtype=np.float64)
    d = np.asarray(direction, dtype=np.float64)
    m = make_mpc_gato(config, k, N=int(N), dt=float(dt), constant_f_ext=np.r_[float(force) * d, 0, 0, 0])
    n = int(np.ceil(duration / dt)) + int(N) + 2
    traj = np.zeros((n, 6))
    curve = Figure8(m.solver.ee_pos(q0), half_widths[0], half_widths[1], theta=math.pi / 2, period=period)
    traj[:, :3] = curve.positions(dt * np.arange(n))
    _, st = m.run_mpc_fig8(np.r_[q0, np.zeros(7)], traj.reshape(-1), sim_dt=sim_dt, sim_time=duration,
                           pace_by_solve_time=False)
    e, t = np.asarray(st["goal_distances_knot0"]), np.asarray(st["timestamps"])
    est = None
    h = m.controller.hypotheses
    if h is not None:
        # fe: its smoothed estimate; the identifiers and wid: the full identified wrench (wid's
        # "estimate" is the weight alone); CEM: its mean.
        hs = h.get_stats()
        v = next((hs[k] for k in ("smoothed_estimate", "wrench", "estimate", "mu") if hs.get(k) is not None), None)
        est = None if v is None else np.asarray(v, dtype=np.float64)[:3].tolist()
    return dict(stop_reason=st["stop_reason"], sim_time=float(st["sim_time"]), mean_tracking_error=float(np.mean(e)),
                max_tracking_error=float(np.max(e)), mean_tracking_error_settled=float(np.mean(e[t >= settled_s])),
                n_ticks=int(st["n_ticks"]), force_estimate=est)


def _run_dist(ep):
    o, sc = ep["task_options"], ep["scenario"]
    case = ep["disturbances"]
    F = case[0]["magnitude"] if case else 0.0
    d = case[0].get("direction", sc["direction"]) if case else sc["direction"]
    r = run_disturbance(F, d, ep["planner"]["config"], sc["k"], duration=o["duration"], settled_s=o["settled_s"],
                        q_start=o["q_start"], half_widths=o["half_widths"], period=o["period"], N=o["N"],
                        dt=o["dt"], sim_dt=ep["world"]["sim_dt"])
    r.update(force=float(F), direction=list(d))
    return r


# ----------------------------------------------------------------- payload (Fig. 7)
def _pay_scenarios(robot, o, seed, n):
    import pinocchio as pin

    from ..sim import scenarios as tasks
    from ..core.bsqp import robot_urdf

    model = pin.buildModelFromUrdf(str(robot_urdf(robot)))
    kw = {} if o.get("ramps") is None else {"ramps": tuple(float(r) for r in o["ramps"])}
    out = tasks.pickplace_scenarios(model, robot, n, seed=seed, **kw)
    for k, s in enumerate(out):
        s["k"], s["seed"] = k, int(seed)
    return out


def _check_pay(kind, o, world):
    _check_common(kind, o, world)
    for key in ("goal_timeout", "goal_threshold", "velocity_threshold"):
        _num(o[key], f"task.options.{key}", lo=0.0, lo_open=True)
    _num(o["grace"], "task.options.grace", lo=0.0)
    if not isinstance(o["clamp_torques"], bool):
        raise _err("task.options.clamp_torques", f"expected true or false, got {o['clamp_torques']!r}")
    if o["limit_check"] not in LIMIT_CHECKS:
        raise _err("task.options.limit_check", f"expected one of {', '.join(LIMIT_CHECKS)}, got {o['limit_check']!r}")
    r = o.get("ramps")
    if r is not None:
        if not isinstance(r, (list, tuple)) or not r:
            raise _err("task.options.ramps", f"expected null or a list of ramp times >= 0 s, got {r!r}")
        for j, v in enumerate(r):
            _num(v, f"task.options.ramps[{j}]", lo=0.0)


def _check_pay_case(case: list, path: str) -> list:
    from .spec import _disturbance

    if len(case) > 1:
        raise _err(path, f"expected one payload (pendulum or constant_wrench) or none, got {len(case)}")
    out = []
    for j, d in enumerate(case):
        if not isinstance(d, dict) or d.get("kind") not in ("pendulum", "constant_wrench", "rigid_payload"):
            raise _err(f"{path}[{j}]", f"the payload_pickplace study takes a pendulum, a constant_wrench or a "
                                       f"rigid_payload, got {d!r}")
        attach = d.get("attach")
        if attach is not None:
            if not isinstance(attach, (list, tuple)) or len(attach) != 2:
                raise _err(f"{path}[{j}].attach", f"expected [T0, T1] s, got {attach!r}")
            t0 = _num(attach[0], f"{path}[{j}].attach[0]", lo=0.0)
            _num(attach[1], f"{path}[{j}].attach[1]", lo=float(t0))
        d = {key: v for key, v in d.items() if key != "attach"}
        if d["kind"] == "rigid_payload":
            from ..sim.pinocchio_world import PinocchioWorld

            try:
                PinocchioWorld._rigid_cfg({key: v for key, v in d.items() if key != "kind"})
            except ValueError as e:
                raise _err(f"{path}[{j}]", str(e)) from None
            out.append(dict(d, **({} if attach is None else {"attach": [float(a) for a in attach]})))
            continue
        if d["kind"] == "pendulum":  # named field by field here, before the payload's own check of them all
            for key, lo, opn in (("mass", 0.0, True), ("length", 0.0, True), ("damping", 0.0, False),
                                 ("radius", 0.0, True)):
                if key in d:
                    _num(d[key], f"{path}[{j}].{key}", lo=lo, lo_open=opn)
        d = _disturbance(d, f"{path}[{j}]")
        if d["kind"] == "constant_wrench" and d.get("via", "auto") != "auto":
            raise _err(f"{path}[{j}].via", "MPC_GATO installs the wrench on the world itself; remove via")
        out.append(d if attach is None else dict(d, attach=[float(a) for a in attach]))
    return out


def attach_time(attach, seed: int, k: int) -> float:
    """The pick-up time [s] of scenario k of ``seed`` for ``attach`` [T0, T1] (uniform, numpy
    default_rng([seed, k]); bench/bench_payload_kinds.py --attach draws the same)."""
    return float(np.random.default_rng([int(seed), int(k)]).uniform(float(attach[0]), float(attach[1])))


def _load_kwargs(case: list, robot="iiwa14", seed=0, k=0) -> dict:
    if not case:
        return {}
    d = dict(case[0])
    attach = d.pop("attach", None)
    kind = d.pop("kind")
    if kind == "constant_wrench":
        load = dict(constant_f_ext=list(d["wrench"]))
    elif kind == "rigid_payload":
        load = dict(rigid_payload=d)
    else:
        load = dict(pendulum=d) if attach is not None else dict(pendulum_config=d)
    if attach is None and kind != "rigid_payload":
        return load
    from ..core.bsqp import robot_urdf
    from ..sim.pinocchio_world import AttachedAt, PinocchioWorld

    urdf = robot_urdf(robot)
    if attach is None:
        return {"world": PinocchioWorld(urdf, **load)}
    return {"world": AttachedAt(PinocchioWorld(urdf), PinocchioWorld(urdf, **load), attach_time(attach, seed, k))}


def _effort(urdf) -> np.ndarray:
    """The URDF effort limits [N*m] of ``urdf`` (pinocchio's model)."""
    import pinocchio as pin

    return np.asarray(pin.buildModelFromUrdf(str(urdf)).effortLimit, dtype=np.float64)


def run_payload(sc: dict, config: dict, load: dict, k: int = 0, *, goal_timeout=5.0, goal_threshold=0.05,
                velocity_threshold=1.0, grace=0.1, N=32, dt=0.03125, sim_dt=0.001, clamp_torques=True,
                limit_check="tick") -> dict:
    """One pick-and-place run of the payload study: MPC_GATO (config: a planner entry's
    config, scenario index k) with ``load`` (MPC_GATO keywords: pendulum_config or
    constant_f_ext; {} for none) runs ``sc`` (a gato.tasks.pickplace_scenarios dict);
    ``clamp_torques``: the world applies the command clamped to the URDF effort (True) or as
    commanded (False; MPC_GATO's clamp_torques). Returns
    stop_reason, sim_time [s] and the columns: success / success_after_grace (1 | 0),
    goals_reached, diverged, fallbacks, tick_qd_ratio (max over recorded ticks and joints of
    |dq| / limit) and tick_qd_joint (0-based), pos_excess [rad], median_ref_distance [m],
    time_to_all_reached [s], first/last_violation_t [s] (None: no excursion), n_ticks, the same
    limits after every physics substep (``sim_dt``, 1 ms): step_qd_ratio, step_qd_joint,
    step_pos_excess [rad], step_first/last_violation_t [s], and reason (why it failed, "" on
    success). ``limit_check`` ("tick" | "step", :data:`LIMIT_CHECKS`): where success and
    success_after_grace judge the limits. ``config["feedback"]`` (None, the default | "pd" |
    "riccati" | "riccati+pd"): how each plan is executed over the substeps until the next one
    (gato.wrench.options.payload_feedback: MPC_GATO's feedback with the payload runs' PD damping;
    MPC_GATO keywords in ``load`` override it)."""
    from ..core.bsqp import robot_urdf
    from ..wrench.options import payload_feedback

    if limit_check not in LIMIT_CHECKS:
        raise ValueError(f"limit_check: expected one of {LIMIT_CHECKS}, got {limit_check!r}")
    fb = config.get("feedback")
    fb = {} if fb is None else payload_feedback(fb, _effort(robot_urdf("iiwa14")))
    m = make_mpc_gato(config, k, N=int(N), dt=float(dt), clamp_torques=bool(clamp_torques), **{**fb, **load})
    steps = StepLimits(m.solver.limits["q_lo"], m.solver.limits["q_hi"], m.solver.limits["qd"])
    m.substep_observers.append(steps)
    x0 = np.r_[np.asarray(sc["q0"], dtype=np.float64), np.zeros(7)]
    lim = m.solver.limits
    nan = float("nan")
    try:
        _, st = m.run_mpc_goals(x0, np.asarray(sc["goals"], dtype=np.float64), sim_dt=sim_dt,
                                goal_timeout=goal_timeout, goal_threshold=goal_threshold,
                                velocity_threshold=velocity_threshold, pace_by_solve_time=False,
                                goal_ramp=float(sc["ramp"]))
    except RuntimeError as e:  # the world diverged (MPC_GATO raises; its record has the ticks so far)
        rec = m.last_record
        return dict(stop_reason="diverged", sim_time=float(rec.sim_time) if rec is not None else nan, success=0,
                    success_after_grace=0, goals_reached=0, diverged=1, fallbacks=None, tick_qd_ratio=None,
                    tick_qd_joint=None, pos_excess=None, median_ref_distance=None, time_to_all_reached=None,
                    first_violation_t=None, last_violation_t=None, n_ticks=None, step_qd_ratio=None,
                    step_qd_joint=None, step_pos_excess=None, step_first_violation_t=None,
                    step_last_violation_t=None, reason="diverged", detail=str(e)[:80])
    q, dq = np.asarray(st["joint_positions"]), np.asarray(st["joint_velocities"])
    qlo, qhi, qdmax = (np.asarray(lim[key], dtype=float) for key in ("q_lo", "q_hi", "qd"))
    pos_excess = float(max(np.max(qlo - q), np.max(q - qhi), 0.0)) if len(q) else 0.0
    vel_ratio = np.max(np.abs(dq), axis=0) / qdmax if len(dq) else np.zeros(len(qdmax))
    judged_pos, judged_vel = (pos_excess, vel_ratio) if limit_check == "tick" else (steps.pos_excess, steps.qd_ratio)
    viol = []
    if judged_pos > 1e-6:
        viol.append(f"position +{judged_pos:.3f} rad")
    if np.any(judged_vel > 1.0 + 1e-6 / qdmax.min()):
        viol.append(f"velocity {judged_vel.max():.2f}x on joint {int(np.argmax(judged_vel)) + 1}"
                    + (" (1 ms steps)" if limit_check == "step" else ""))
    fallbacks = sum(1 for p in m.last_record.planner_stats if p.fallback)
    t = np.asarray(st["timestamps"])
    over = (np.any(q < qlo - 1e-6, axis=1) | np.any(q > qhi + 1e-6, axis=1)
            | np.any(np.abs(dq) > qdmax + 1e-6, axis=1)) if len(q) else np.zeros(0, dtype=bool)
    t_over = t[over] if len(t) == len(over) else np.zeros(0)
    runaway = m.last_record.results.get("runaway") if m.last_record.stop_reason == "runaway" else None
    ok = bool(st["all_reached"]) and not viol and fallbacks == 0 and runaway is None
    late = np.any(t_over >= grace) if limit_check == "tick" else (steps.last_t is not None and steps.last_t >= grace)
    ok_grace = bool(st["all_reached"]) and not late and fallbacks == 0 and runaway is None
    n_goals = len(sc["goals"])
    reason = "" if ok else ", ".join(([f"runaway: {runaway}"] if runaway else [])
                                      + ([] if st["all_reached"] else [f"{st['goals_reached']}/{n_goals} goals"]) + viol
                                      + ([f"{fallbacks} fallbacks"] if fallbacks else []))
    tta = st["time_to_all_reached"]
    return dict(stop_reason=st["stop_reason"], sim_time=float(st["sim_time"]), success=int(ok),
                success_after_grace=int(ok_grace), goals_reached=int(st["goals_reached"]), diverged=0,
                fallbacks=int(fallbacks), tick_qd_ratio=float(vel_ratio.max()), tick_qd_joint=int(np.argmax(vel_ratio)),
                pos_excess=pos_excess, median_ref_distance=float(np.median(st["goal_distances_knot0"])),
                time_to_all_reached=None if tta is None else float(tta),
                first_violation_t=float(t_over[0]) if len(t_over) else None,
                last_violation_t=float(t_over[-1]) if len(t_over) else None, n_ticks=int(st["n_ticks"]),
                step_qd_ratio=float(steps.qd_ratio.max()), step_qd_joint=int(np.argmax(steps.qd_ratio)),
                step_pos_excess=float(steps.pos_excess), step_first_violation_t=steps.first_t,
                step_last_violation_t=steps.last_t, reason=reason)


def _run_pay(ep):
    o, sc = ep["task_options"], ep["scenario"]
    load = _load_kwargs(ep["disturbances"], ep["robot"], sc.get("seed", 0), sc["k"])
    return run_payload(sc, ep["planner"]["config"], load, sc["k"],
                       goal_timeout=o["goal_timeout"], goal_threshold=o["goal_threshold"],
                       velocity_threshold=o["velocity_threshold"], grace=o["grace"], N=o["N"], dt=o["dt"],
                       sim_dt=ep["world"]["sim_dt"], clamp_torques=o["clamp_torques"], limit_check=o["limit_check"])


#: The study kinds of this module: gato.eval.studies.Study fields by kind (studies.py builds
#: the Study objects; a plain mapping here keeps this module importable on its own).
WRENCH_STUDIES = {
    "disturbance_fig8": dict(
        kind="disturbance_fig8",
        doc="iiwa14 figure-8 under a constant unmodelled EE force, wrench hypotheses (Fig. 5)",
        options=dict(duration=5.0, settled_s=2.0, q_start=list(_Q_START), half_widths=[0.15, 0.10], period=4.0,
                     N=32, dt=0.03125),
        metrics=_DIST_METRICS, scenarios=_dist_scenarios, run=_run_dist, check=_check_dist,
        planner_check=_check_planner, disturbance_check=_check_dist_case),
    "payload_pickplace": dict(
        kind="payload_pickplace",
        doc="iiwa14 pick-and-place with an unmodelled payload, wrench hypotheses (Fig. 7)",
        options=dict(goal_timeout=5.0, goal_threshold=0.05, velocity_threshold=1.0, grace=0.1, N=32, dt=0.03125,
                     clamp_torques=True, limit_check="tick", ramps=None),
        metrics=_PAY_METRICS, scenarios=_pay_scenarios, run=_run_pay, check=_check_pay,
        planner_check=_check_planner, disturbance_check=_check_pay_case),
}
