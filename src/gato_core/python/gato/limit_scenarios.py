"""Seeded step pick-and-place scenarios for the joint-limit layer, and their closed-loop run.

A *step scenario* is what a new user tries first: the default solver weights
(``gato.SolverParams()``), the ready pose, and a few step goals — EE positions of joint
configurations offset from the ready pose by up to ``step`` rad per joint — that the
reference jumps to (ramp 0). A step of a radian or more asks the unconstrained controller
for several times the URDF velocity limit, so the limit rows must bind.

:func:`step_scenarios` draws them (``np.random.default_rng(seed)``: the same seed gives the
same scenarios); :func:`run_step_scenario` closes the loop through :mod:`gato.simloop`
(world, zero-order hold, GoalTask with a step reference, the ``bsqp`` planner) and returns
the peaks the limit layer promises to hold, per joint, sampled after EVERY world substep:

- ``qd_ratio`` (nv,): max |qd_j| / URDF velocity limit_j;
- ``q_excess`` (nq,): max over time of the position's distance outside the URDF range,
  as a fraction of the range (0 inside);
- ``u_excess`` (nu,): max over ticks of the controller's (unclamped) command outside the
  URDF effort box, as a fraction of the range 2 effort_j (0 inside).

Units: rad, rad/s, N·m, s, m.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["STEP_RANGE", "step_scenarios", "run_step_scenario"]

#: (min, max) per-joint step size [rad] that the scenarios draw from (the issue-22 user: up to 1.2 rad).
STEP_RANGE = (0.3, 1.2)

_Q_CLEAR = 0.2     # rad: goal configurations keep this distance from the URDF position limits
_MIN_EE_MOVE = 0.1  # m: a goal at least this far (EE) from the previous one


def _fk(model, data, fid, q):
    import pinocchio as pin

    pin.framesForwardKinematics(model, data, q)
    return np.array(data.oMf[fid].translation)


def step_scenarios(plant, n, *, seed, n_goals=2, step_range=STEP_RANGE, N=32, dt=0.01) -> list:
    """n seeded step pick-and-place scenarios for a registered fixed-base ``plant``.

    Per scenario: a step size ``s`` [rad] drawn uniformly in ``step_range``; ``n_goals`` goal
    configurations ``q_ready + U(-s, s)`` per joint (redrawn until they are ``_Q_CLEAR`` rad
    inside the URDF position limits and their EE moves >= 0.1 m from the previous goal's);
    each goal is the EE position of that configuration. The start is ``q_ready`` at rest.

    Returns a list of dicts: id, plant, q0 (nq,) rad, q_goals (n_goals, nq) rad, goals
    (n_goals, 3) m, step [rad], N, dt [s] (the solver's knots and knot spacing).
    """
    import pinocchio as pin

    from .robots import resolve_robot
    from .tasks import Q_READY, ee_frame_of

    if plant not in Q_READY:
        raise ValueError(f"plant: no ready pose for {plant!r}; expected one of {sorted(Q_READY)}")
    if int(n) < 0 or int(n_goals) < 1:
        raise ValueError(f"n, n_goals: expected n >= 0 and n_goals >= 1, got {n}, {n_goals}")
    lo_s, hi_s = (float(v) for v in step_range)
    if not 0 < lo_s <= hi_s:
        raise ValueError(f"step_range: expected 0 < min <= max [rad], got {step_range!r}")
    urdf, _, _ = resolve_robot(plant, None)
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId(ee_frame_of(plant))
    lo, hi = model.lowerPositionLimit + _Q_CLEAR, model.upperPositionLimit - _Q_CLEAR
    q_ready = Q_READY[plant]
    rng = np.random.default_rng(seed)
    out = []
    for i in range(int(n)):
        s = float(rng.uniform(lo_s, hi_s))
        qs, goals, prev = [], [], _fk(model, data, fid, q_ready)
        draws = 0
        while len(qs) < n_goals:
            draws += 1
            if draws > 200 * n_goals:
                raise RuntimeError(f"step_scenarios: no {n_goals} goals within the limits for {plant!r}")
            qg = q_ready + rng.uniform(-s, s, model.nq)
            if np.any(qg < lo) or np.any(qg > hi):
                continue
            g = _fk(model, data, fid, qg)
            if np.linalg.norm(g - prev) < _MIN_EE_MOVE:
                continue
            qs.append(qg)
            goals.append(g)
            prev = g
        out.append(dict(id=f"{plant}/step/{seed}/{i}", plant=plant, q0=q_ready.copy(), q_goals=np.array(qs),
                        goals=np.array(goals), step=s, N=int(N), dt=float(dt)))
    return out


class _Recording:
    """Planner proxy that keeps every command the planner returns (before the world's clamp)."""

    def __init__(self, planner):
        self._p, self.u = planner, []

    def __getattr__(self, name):
        return getattr(self._p, name)

    def warmup(self, x, reference):
        return self._p.warmup(x, reference)

    def step(self, x, reference, dt_elapsed=None, budget_s=None):
        r = self._p.step(x, reference, dt_elapsed=dt_elapsed, budget_s=budget_s)
        self.u.append(np.array(r.u, dtype=np.float64))
        return r


def run_step_scenario(scenario, *, limits=None, limits_kw=None, integrator=None, world="mujoco",
                      goal_s=2.0, params=None, sim_dt=0.001) -> dict:
    """Run one :func:`step_scenario <step_scenarios>` in closed loop and measure the limit peaks.

    ``limits`` / ``limits_kw``: the MPCController's (None = the default ADMM rows, "off",
    "telemetry", "al", "barrier", "admm"). ``integrator``: the solver's (None = SolverParams'
    default). ``params``: extra SolverParams fields (default weights otherwise). ``world``:
    "mujoco" | "pinocchio", stepped every ``sim_dt`` [s], the command held over the control
    period (zero-order hold) and clamped to the URDF effort. Each goal gets ``goal_s`` [s]
    (GoalTask: reached once the EE stays within 2 cm for 0.1 s; a timeout moves on).

    Returns dict(qd_ratio (nv,), q_excess (nq,), u_excess (nu,), peak_qd_ratio, peak_joint,
    task_time [s] (sum of the per-goal times to reach, goal_s for a timeout), reached (int),
    mean_err [m] (mean EE distance to the active goal), limits (mechanism or "off")).
    """
    from . import simloop
    from .bsqp_planner import BSQPPlanner, solver_params
    from .controller import MPCController
    from .interface import BSQP
    from .robots import resolve_robot

    urdf, plant, _ = resolve_robot(scenario["plant"], None)
    extra = {} if integrator is None else {"integrator": integrator}
    solver = BSQP(urdf, 1, scenario["N"], scenario["dt"], solver_params(params), plant_type=plant, **extra)
    planner = BSQPPlanner.from_controller(MPCController(solver, limits=limits, limits_kw=limits_kw))
    qd_max = np.asarray(solver.limits["qd"], dtype=np.float64)
    u_max = np.asarray(solver.limits["u"], dtype=np.float64)
    qlo, qhi = (np.asarray(solver.limits[k], dtype=np.float64) for k in ("q_lo", "q_hi"))
    w = simloop.make_world(world, urdf, timestep=sim_dt if world == "mujoco" else None)
    peak = {"qd": np.zeros(qd_max.size), "q": np.zeros(qlo.size)}

    def observe(q, dq, u, qn, dqn, h):
        np.maximum(peak["qd"], np.abs(dqn) / qd_max, out=peak["qd"])
        np.maximum(peak["q"], np.maximum(qn - qhi, qlo - qn) / (qhi - qlo), out=peak["q"])

    sim = simloop.Simulation(w, scenario["q0"], sim_dt=sim_dt, ee_pos=solver.ee_pos, effort_limit=u_max,
                             observers=[observe])
    task = simloop.GoalTask(scenario["goals"], scenario["N"], scenario["dt"], timeout=goal_s, threshold=0.02,
                            velocity_threshold=math.inf, velocity_norm=np.inf, settle_time=0.1, ramp=0.0)
    rec_planner = _Recording(planner)
    rec = simloop.run_closed_loop(sim, rec_planner, task)
    u = np.array(rec_planner.u) if rec_planner.u else np.zeros((1, u_max.size))
    u_exc = np.max(np.maximum(np.abs(u) - u_max, 0.0) / (2 * u_max), axis=0)
    res = rec.results if isinstance(getattr(rec, "results", None), dict) else task.results()
    dur = [d if o == "reached" else goal_s for d, o in zip(res["goal_durations"], res["goal_outcomes"])]
    dist = np.asarray(rec.columns.get("goal_distances", [np.nan]), dtype=np.float64)
    return dict(qd_ratio=peak["qd"].copy(), q_excess=np.maximum(peak["q"], 0.0), u_excess=u_exc,
                peak_qd_ratio=float(peak["qd"].max()), peak_joint=int(np.argmax(peak["qd"])),
                task_time=float(sum(d if d is not None else goal_s for d in dur)),
                reached=int(res["goals_reached"]), mean_err=float(np.nanmean(dist)),
                limits=planner.controller.limits or "off")
