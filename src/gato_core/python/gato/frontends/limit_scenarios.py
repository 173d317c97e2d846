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

The closed-loop joint-limit study of bench/bench_limits.py lives here too, so that
``gato eval`` workers can run it (gato.eval.studies): :func:`run_limits_pickplace` (a
step-reference pick-and-place on the pickplace_scenarios, each goal held ``goal_s``) and
:func:`run_limits_fig8` (a slow figure-8), both with an aggressive EE tracker
(:data:`LIMITS_SOLVER`) on gato.worlds.PinocchioWorld stepped ``substeps`` RK4 steps per
control period, the torque clamped to the URDF effort; peaks sampled after every substep.

Units: rad, rad/s, N·m, s, m.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["STEP_RANGE", "step_scenarios", "run_step_scenario", "LIMITS_N", "LIMITS_DT", "LIMITS_SUBSTEPS",
           "LIMITS_SOLVER", "GOAL_S", "REACH_TOL", "limits_pickplace_set", "limits_fig8_set", "run_limits_pickplace",
           "run_limits_fig8", "path_lag", "settle_time"]

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

    from ..robots.registry import resolve_robot
    from ..sim.scenarios import Q_READY, ee_frame_of

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
    from ..sim.loop import make_world, run_closed_loop, Simulation
    from ..sim.tasks import GoalTask
    from ..planners.bsqp_planner import BSQPPlanner, solver_params
    from ..planners.controller import MPCController
    from ..core.bsqp import BSQP
    from ..robots.registry import resolve_robot

    urdf, plant, _ = resolve_robot(scenario["plant"], None)
    extra = {} if integrator is None else {"integrator": integrator}
    solver = BSQP(urdf, 1, scenario["N"], scenario["dt"], solver_params(params), plant_type=plant, **extra)
    planner = BSQPPlanner.from_controller(MPCController(solver, limits=limits, limits_kw=limits_kw))
    qd_max = np.asarray(solver.limits["qd"], dtype=np.float64)
    u_max = np.asarray(solver.limits["u"], dtype=np.float64)
    qlo, qhi = (np.asarray(solver.limits[k], dtype=np.float64) for k in ("q_lo", "q_hi"))
    w = make_world(world, urdf, timestep=sim_dt if world == "mujoco" else None)
    peak = {"qd": np.zeros(qd_max.size), "q": np.zeros(qlo.size)}

    def observe(q, dq, u, qn, dqn, h):
        np.maximum(peak["qd"], np.abs(dqn) / qd_max, out=peak["qd"])
        np.maximum(peak["q"], np.maximum(qn - qhi, qlo - qn) / (qhi - qlo), out=peak["q"])

    sim = Simulation(w, scenario["q0"], sim_dt=sim_dt, ee_pos=solver.ee_pos, effort_limit=u_max,
                     observers=[observe])
    task = GoalTask(scenario["goals"], scenario["N"], scenario["dt"], timeout=goal_s, threshold=0.02,
                    velocity_threshold=math.inf, velocity_norm=np.inf, settle_time=0.1, ramp=0.0)
    rec_planner = _Recording(planner)
    rec = run_closed_loop(sim, rec_planner, task)
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


# ----------------------------------------------------------------- bench_limits' closed-loop study
LIMITS_N, LIMITS_DT = 32, 0.03125   # knots, knot spacing = control period [s]
LIMITS_SUBSTEPS = 4                 # RK4 substeps per control period (velocity sampled after each)
GOAL_S = 2.0                        # s per pick-and-place goal
REACH_TOL = 0.02                    # m: a goal is reached when the EE stays within this
LAG_GRID = np.arange(-0.1, 0.5, 0.001)  # s: candidate lags of the EE behind the figure-8 reference
#: The solver of both workloads: an aggressive EE tracker (SolverParams' q_cost 2 / N_cost 50 never
#: reaches the velocity limit on a 1 s horizon; at 150 / 750 a step reference asks for 2-3x the
#: limit) on the RK4 integrator, the discretization of the simulated plant: with the default
#: constant-acceleration step the plan's knot-1 velocity can sit on the bound while the plant,
#: integrated finely, overshoots it by ~0.1 rad/s during a hard acceleration.
LIMITS_SOLVER = dict(q_cost=150.0, N_cost=750.0, integrator="rk4")


def _limits_setup(plant):
    import pinocchio as pin

    from ..core.bsqp import robot_urdf

    urdf = robot_urdf(plant)
    return urdf, pin.buildModelFromUrdf(str(urdf))


def _limits_controller(urdf, limits, limits_kw=None, solver_kw=None):
    from ..planners.controller import MPCController
    from ..core.bsqp import BSQP

    s = BSQP(urdf, 1, LIMITS_N, LIMITS_DT, **(LIMITS_SOLVER if solver_kw is None else solver_kw))
    return s, MPCController(s, limits=limits, limits_kw=limits_kw)


def _limits_loop(scenario, limits, limits_kw, solver_kw, substeps):
    """(solver, controller, world, u_max, qd_max, q0, dq0, substeps) of one run, the
    controller reset at (q0, 0)."""
    from ..sim.pinocchio_world import PinocchioWorld

    substeps = _substeps(substeps)
    urdf, model = _limits_setup(scenario.get("plant", "iiwa14"))
    s, ctrl = _limits_controller(urdf, limits, limits_kw, solver_kw)
    world = PinocchioWorld(urdf, substeps=1)
    q, dq = np.array(scenario["q0"], dtype=np.float64), np.zeros(model.nv)
    ctrl.reset(np.concatenate([q, dq]))
    return s, ctrl, world, np.asarray(s.limits["u"]), np.asarray(s.limits["qd"]), q, dq, substeps


def settle_time(err, tol, dt):
    """Time [s] of the first sample after which err stays below tol (len*dt when it never does)."""
    above = np.flatnonzero(np.asarray(err) >= tol)
    return (above[-1] + 1) * dt if above.size else 0.0


def _substeps(substeps):
    if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) or substeps < 1:
        raise ValueError(f"substeps: expected an integer >= 1 (world steps per control period), got {substeps!r}")
    return int(substeps)


def _advance(world, q, dq, u, ratio, qd_max, substeps):
    """One control period as ``substeps`` RK4 steps, recording |qd| / limit after each."""
    for _ in range(substeps):
        q, dq = world.step(q, dq, u, LIMITS_DT / substeps)
        ratio.append(np.abs(dq) / qd_max)
    return q, dq


def run_limits_pickplace(scenario, limits=None, limits_kw=None, goal_s=GOAL_S, solver_kw=None,
                         substeps=LIMITS_SUBSTEPS) -> dict:
    """One closed-loop step-reference pick-and-place run of a gato.tasks.pickplace_scenarios
    scenario (its ``plant``, q0 (nq,) rad, goals (G, 3) m): the reference jumps to each goal and
    stays ``goal_s`` [s]. ``limits`` / ``limits_kw``: the MPCController's; ``solver_kw``: gato.BSQP
    keywords (default :data:`LIMITS_SOLVER`).

    Returns dict(peak_qd_ratio (max over joints and substeps of |qd_j| / URDF limit_j),
    peak_joint (0-based), qd_ratio (nv,) per joint, task_time [s] (sum over goals of the time
    until the EE stays within :data:`REACH_TOL`), mean_err [m] (mean EE distance to the goal
    over ticks), limits (mechanism or "off"), plan_viol (G,) max over ticks of the winning
    plan's row violation (q / qd / u), or None without limit rows)."""
    s, ctrl, world, u_max, qd_max, q, dq, substeps = _limits_loop(scenario, limits, limits_kw, solver_kw, substeps)
    ticks = int(round(goal_s / LIMITS_DT))
    qd_ratio, task_time, errs, viols = [], 0.0, [], []
    for goal in scenario["goals"]:
        ref = np.tile(np.concatenate([goal, np.zeros(3)]), LIMITS_N)
        goal_err = []
        for _ in range(ticks):
            r = ctrl.step(np.concatenate([q, dq]), ref)
            u = np.clip(np.asarray(r.u), -u_max, u_max)
            q, dq = _advance(world, q, dq, u, qd_ratio, qd_max, substeps)
            e = float(np.linalg.norm(s.ee_pos(q) - goal))
            goal_err.append(e)
            if r.row_viol is not None:
                viols.append(np.asarray(r.row_viol))
        task_time += settle_time(goal_err, REACH_TOL, LIMITS_DT)
        errs += goal_err
    qd_ratio = np.array(qd_ratio)
    return dict(peak_qd_ratio=float(qd_ratio.max()), peak_joint=int(np.argmax(qd_ratio.max(axis=0))),
                qd_ratio=qd_ratio.max(axis=0), task_time=task_time, mean_err=float(np.mean(errs)),
                limits=ctrl.limits or "off", plan_viol=np.max(viols, axis=0) if viols else None)


def path_lag(ee, ref_xyz, dt):
    """Lag [s] of the EE trace ee (T, 3) (sample t at time (t+1) dt) behind the reference samples
    ref_xyz (at times k dt): the shift in LAG_GRID minimizing the RMS distance between ee(t) and
    the linearly interpolated reference at t - lag, over the samples after the first 10 %."""
    t = (np.arange(len(ee)) + 1) * dt
    keep = slice(len(ee) // 10, None)
    tr = np.arange(len(ref_xyz)) * dt
    best, lag = np.inf, 0.0
    for tau in LAG_GRID:
        p = np.stack([np.interp(t[keep] - tau, tr, ref_xyz[:, i]) for i in range(3)], axis=1)
        e = float(np.mean(np.sum((ee[keep] - p) ** 2, axis=1)))
        if e < best:
            best, lag = e, round(float(tau), 6)
    return lag


def run_limits_fig8(scenario, limits=None, limits_kw=None, periods=1, solver_kw=None,
                    substeps=LIMITS_SUBSTEPS) -> dict:
    """One closed-loop figure-8 run of a gato.tasks.fig8_scenarios scenario (sampled at
    :data:`LIMITS_DT`), ``periods`` periods long; arguments as :func:`run_limits_pickplace`.

    Returns dict(rms_err [m] (EE to the reference sample of the tick's end), task_time [s]
    (the run's duration plus the EE's lag behind the path, :func:`path_lag`), lag [s],
    peak_qd_ratio, qd_ratio (nv,), limits, plan_viol)."""
    from ..sim.scenarios import fig8_reference

    s, ctrl, world, u_max, qd_max, q, dq, substeps = _limits_loop(scenario, limits, limits_kw, solver_kw, substeps)
    ref, sim_time = fig8_reference(dict(scenario, dt=LIMITS_DT), LIMITS_N, periods=periods)
    ref = ref.reshape(-1, 6)
    ticks = int(round(sim_time / LIMITS_DT))
    errs, ratio, viols, ee = [], [], [], []
    for t in range(ticks):
        r = ctrl.step(np.concatenate([q, dq]), ref[t:t + LIMITS_N].ravel())
        if r.row_viol is not None:
            viols.append(np.asarray(r.row_viol))
        u = np.clip(np.asarray(r.u), -u_max, u_max)
        q, dq = _advance(world, q, dq, u, ratio, qd_max, substeps)
        ee.append(s.ee_pos(q))
        errs.append(float(np.linalg.norm(ee[-1] - ref[t + 1, :3])))
    errs = np.array(errs)
    lag = path_lag(np.array(ee), ref[:, :3], LIMITS_DT)
    return dict(rms_err=float(np.sqrt(np.mean(errs ** 2))), task_time=ticks * LIMITS_DT + lag, lag=lag,
                peak_qd_ratio=float(np.max(ratio)), qd_ratio=np.max(ratio, axis=0), limits=ctrl.limits or "off",
                plan_viol=np.max(viols, axis=0) if viols else None)


def limits_pickplace_set(plant, n, seed=0) -> list:
    """bench_limits' pick-and-place scenarios: gato.tasks.pickplace_scenarios(seed, ramps=(0,))."""
    from ..sim.scenarios import pickplace_scenarios

    _, model = _limits_setup(plant)
    return pickplace_scenarios(model, plant, n, seed=seed, ramps=(0.0,))


def limits_fig8_set(plant, n, seed=0, ratio=0.5) -> list:
    """bench_limits' figure-8 scenarios: gato.tasks.fig8_scenarios at :data:`LIMITS_DT`, speed
    ``ratio`` of the velocity limit."""
    from ..sim.scenarios import fig8_scenarios

    _, model = _limits_setup(plant)
    return fig8_scenarios(model, plant, n, seed=seed, dt=LIMITS_DT, ratio_range=(ratio, ratio))
