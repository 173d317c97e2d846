"""Conversions between gato_msgs / common ROS messages and the Python types.

Python side: ``gato.SolverStats``, ``gato.SolveResult``, ``gato.StepResult``
(numpy arrays), :class:`gato_ros.types.ReferenceWindow`, :class:`gato_ros.types.Plan`,
:class:`gato_ros.types.JointStateSample`. Message side: the gato_msgs messages
(see src/gato_msgs/README.md for shapes), sensor_msgs/JointState,
std_msgs/Float64MultiArray.

Conventions: 2-D arrays travel flattened row-major with their dimensions; an
optional array that is None in Python travels empty; a dict travels as JSON
("" for None). Every ``*_from_msg`` returns fresh numpy arrays (float64, int32 or
bool), so ``x_from_msg(x_to_msg(v))`` equals ``v`` field for field, except for what
a message cannot carry (noted per function).
"""
from __future__ import annotations

import array
import json

import numpy as np

from gato.core.references import rotvec_to_quat
from gato.core.results import SolveResult as GatoSolveResult, SolverStats as GatoSolverStats
from gato.planners.controller import StepResult as GatoStepResult

from .inputs import plan_gains
from .types import JointStateSample, Plan, ReferenceWindow, SolveInput, NS_PER_S

__all__ = [
    "ns_to_time", "time_to_ns", "solver_stats_to_msg", "solver_stats_from_msg", "solve_result_to_msg",
    "solve_result_from_msg", "step_result_to_msg", "step_result_from_msg", "reference_to_msg",
    "reference_from_msg", "plan_to_msg", "plan_from_msg", "plan_from_step", "joint_state_to_msg",
    "joint_state_from_msg", "effort_to_multiarray", "effort_command_to_msg", "solve_input_to_msg",
    "solve_input_from_msg", "planner_step_to_msgs",
]


# ------------------------------------------------------------------ primitives
def _f64(a) -> array.array:
    """float64[] field value from anything array-like (fast path through bytes)."""
    return array.array("d", np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1)).tobytes())


def _i32(a) -> array.array:
    return array.array("i", np.ascontiguousarray(np.asarray(a, dtype=np.int32).reshape(-1)).tobytes())


def _np(field, dtype) -> np.ndarray:
    return np.array(field, dtype=dtype).reshape(-1)


def _opt(a):
    """None -> empty float64[] (the message convention for an absent optional array)."""
    return _f64(np.zeros(0) if a is None else a)


def ns_to_time(t_ns: int):
    """builtin_interfaces/Time from integer nanoseconds (>= 0)."""
    from builtin_interfaces.msg import Time

    t_ns = int(t_ns)
    if t_ns < 0:
        raise ValueError(f"t_ns: a ROS Time cannot be negative, got {t_ns}")
    return Time(sec=t_ns // NS_PER_S, nanosec=t_ns % NS_PER_S)


def time_to_ns(t) -> int:
    """Integer nanoseconds of a builtin_interfaces/Time."""
    return int(t.sec) * NS_PER_S + int(t.nanosec)


def _header(stamp_ns: int, frame_id: str = ""):
    from std_msgs.msg import Header

    return Header(stamp=ns_to_time(stamp_ns), frame_id=frame_id)


# ------------------------------------------------------------------ SolverStats
def solver_stats_to_msg(stats, stamp_ns: int = 0):
    """gato.SolverStats -> gato_msgs/SolverStats. B from ``sqp_iters``, I from
    ``pcg_iters.shape[1]``, G from ``row_max_violation.shape[1]`` (0 when None)."""
    from gato_msgs.msg import SolverStats

    sqp = np.asarray(stats.sqp_iters).reshape(-1)
    B = int(sqp.size)
    pcg = np.asarray(stats.pcg_iters).reshape(B, -1) if B else np.zeros((0, 0))
    m = SolverStats()
    m.header = _header(stamp_ns)
    m.batch_size = B
    m.n_iters = int(pcg.shape[1]) if B else 0
    m.solve_time_us = int(stats.solve_time_us)
    m.sqp_iters = _i32(sqp)
    m.kkt_converged = [bool(v) for v in np.asarray(stats.kkt_converged).reshape(-1)]
    m.final_merit = _f64(stats.final_merit)
    m.initial_merit = _f64(stats.initial_merit)
    m.ls_num_iters = int(stats.ls_num_iters)
    m.pcg_iters = _i32(pcg)
    m.pcg_times_us = _f64(stats.pcg_times_us)
    m.min_merit = _f64(stats.min_merit)
    m.step_size = _f64(stats.step_size)
    m.linsys = str(stats.linsys)
    m.budget_hit = bool(stats.budget_hit)
    rmax = getattr(stats, "row_max_violation", None)
    m.has_row_stats = rmax is not None
    m.n_row_groups = int(np.asarray(rmax).reshape(B, -1).shape[1]) if (rmax is not None and B) else 0
    m.row_max_violation = _opt(rmax)
    m.row_sum_violation = _opt(getattr(stats, "row_sum_violation", None))
    m.admm_r_prim = _opt(getattr(stats, "admm_r_prim", None))
    m.admm_r_dual = _opt(getattr(stats, "admm_r_dual", None))
    admm_iters = getattr(stats, "admm_iters", None)
    m.admm_iters = _i32(np.zeros(0) if admm_iters is None else admm_iters)
    admm_ls = getattr(stats, "admm_linsys_iters", None)
    m.admm_linsys_iters = _i32(np.zeros(0) if admm_ls is None else admm_ls)
    return m


def solver_stats_from_msg(m) -> GatoSolverStats:
    """gato_msgs/SolverStats -> gato.SolverStats (per-iteration arrays reshaped (B, I); row
    arrays (B, G) when ``has_row_stats``, else None; empty ADMM arrays -> None)."""
    B, I, G = int(m.batch_size), int(m.n_iters), int(m.n_row_groups)

    def bi(field, dtype):
        return _np(field, dtype).reshape(B, I)

    def opt(field, dtype):
        a = _np(field, dtype)
        return a if a.size else None

    rows = m.has_row_stats
    return GatoSolverStats(
        solve_time_us=int(m.solve_time_us),
        sqp_iters=_np(m.sqp_iters, np.int32),
        kkt_converged=_np(m.kkt_converged, bool),
        final_merit=_np(m.final_merit, np.float64),
        initial_merit=_np(m.initial_merit, np.float64),
        ls_num_iters=int(m.ls_num_iters),
        pcg_iters=bi(m.pcg_iters, np.int32),
        pcg_times_us=_np(m.pcg_times_us, np.float64),
        min_merit=bi(m.min_merit, np.float64),
        step_size=bi(m.step_size, np.float64),
        linsys=str(m.linsys),
        budget_hit=bool(m.budget_hit),
        row_max_violation=_np(m.row_max_violation, np.float64).reshape(B, G) if rows else None,
        row_sum_violation=_np(m.row_sum_violation, np.float64).reshape(B, G) if rows else None,
        admm_r_prim=opt(m.admm_r_prim, np.float64),
        admm_r_dual=opt(m.admm_r_dual, np.float64),
        admm_iters=opt(m.admm_iters, np.int32),
        admm_linsys_iters=opt(m.admm_linsys_iters, np.int32),
    )


# ------------------------------------------------------------------ SolveResult
def solve_result_to_msg(res, stamp_ns: int = 0):
    """gato.SolveResult (numpy ``xu`` (B, S)) -> gato_msgs/SolveResult; ``stamp_ns`` goes to
    the embedded SolverStats header."""
    from gato_msgs.msg import SolveResult

    xu = np.asarray(res.xu, dtype=np.float64)
    xu = xu.reshape(1, -1) if xu.ndim == 1 else xu
    m = SolveResult()
    m.xu = _f64(xu)
    m.batch_size, m.xu_size = int(xu.shape[0]), int(xu.shape[1])
    m.solve_time_us = int(res.solve_time_us)
    m.stats = solver_stats_to_msg(res.stats, stamp_ns)
    m.nx, m.nu, m.n_knots, m.n_actuated = int(res.nx), int(res.nu), int(res.N), int(res.n_actuated)
    return m


def solve_result_from_msg(m) -> GatoSolveResult:
    """gato_msgs/SolveResult -> gato.SolveResult with ``xu`` (B, S) float64."""
    xu = _np(m.xu, np.float64).reshape(int(m.batch_size), int(m.xu_size))
    return GatoSolveResult(xu=xu, solve_time_us=int(m.solve_time_us), stats=solver_stats_from_msg(m.stats),
                           nx=int(m.nx), nu=int(m.nu), N=int(m.n_knots), n_actuated=int(m.n_actuated))


# ------------------------------------------------------------------ StepResult
def step_result_to_msg(step, stamp_ns: int = 0):
    """gato.StepResult -> gato_msgs/StepResult; ``stamp_ns``: the measured state's time.

    Not carried (the message predates them): ``diverged`` and ``fallback``; the
    controller node reports those in gato_msgs/EffortCommand.source and ControllerStatus.
    """
    from gato_msgs.msg import StepResult

    m = StepResult()
    m.header = _header(stamp_ns)
    m.u = _f64(step.u)
    m.best_id = int(step.best_id)
    m.xu_best = _f64(step.xu_best)
    m.solve = solve_result_to_msg(step.solve, stamp_ns)
    m.hypo_stats_json = "" if step.hypo_stats is None else json.dumps(step.hypo_stats, default=_json_default)
    m.pred_err = float(step.pred_err)
    m.reseeded = bool(step.reseeded)
    m.fc = _opt(step.fc)
    m.iterations = int(step.iterations)
    m.budget_hit = bool(step.budget_hit)
    m.wall_s = float(step.wall_s)
    m.admm_linsys = str(step.admm_linsys or "")
    m.limits = str(step.limits or "")
    m.row_viol = _opt(step.row_viol)
    return m


def planner_step_to_msgs(step, planner: str, stamp_ns: int = 0):
    """A :class:`gato.planner.StepResult` of a planner other than bsqp (sampling, osc, the OSC
    fallback) -> (gato_msgs/StepResult, gato_msgs/SolverStats), the messages a bsqp tick publishes.

    Filled: ``u``, ``best_id`` (0), ``xu_best`` and ``solve.xu`` (the plan, one row: sampling;
    empty for osc, which has no plan) with ``nx`` / ``nu`` / ``n_knots`` / ``n_actuated``,
    ``iterations`` (sampling iterations; 0 for osc), ``budget_hit``, ``wall_s``, solve time
    (``PlannerStats.solve_s``), ``hypo_stats_json`` = the planner's ``PlannerStats.extra`` (JSON;
    sampling: plan_cost, best_cost, rollout_steps, ...). SolverStats: ``batch_size`` 1,
    ``sqp_iters`` [iterations], ``linsys`` = the planner's name. Not applicable, left empty / 0:
    the SQP arrays (pcg_*, merits, step sizes: n_iters 0), row-group and ADMM statistics,
    ``pred_err``, ``reseeded``, ``fc``, ``limits``, ``admm_linsys``.
    """
    from gato_msgs.msg import SolveResult, SolverStats, StepResult

    st = step.stats
    solve_us = int(round(float(st.solve_s) * 1e6))
    ss = SolverStats()
    ss.header = _header(stamp_ns)
    ss.batch_size, ss.n_iters, ss.solve_time_us = 1, 0, solve_us
    ss.sqp_iters = _i32([int(st.iterations)])
    ss.linsys = str(planner)
    ss.budget_hit = bool(st.budget_hit)
    p = step.plan
    sr = SolveResult()
    sr.solve_time_us, sr.stats = solve_us, ss
    if p is not None:
        sr.xu = _f64(p.xu)
        sr.batch_size, sr.xu_size = 1, int(np.asarray(p.xu).size)
        sr.nx, sr.nu, sr.n_knots, sr.n_actuated = int(p.nx), int(p.nu), int(p.N), int(p.nu_act)
    m = StepResult()
    m.header = _header(stamp_ns)
    m.u = _f64(step.u)
    m.best_id = int(st.best_id)
    m.xu_best = _f64(p.xu) if p is not None else _f64([])
    m.solve = sr
    m.hypo_stats_json = json.dumps(st.extra, default=_json_default) if st.extra else ""
    m.iterations = int(st.iterations)
    m.budget_hit = bool(st.budget_hit)
    m.wall_s = float(st.wall_s)
    return m, ss


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def step_result_from_msg(m) -> GatoStepResult:
    """gato_msgs/StepResult -> gato.StepResult (``diverged=False``, ``fallback=""``: not
    carried by the message). Empty ``fc`` / ``row_viol`` -> None; "" hypo stats -> None."""
    fc = _np(m.fc, np.float64)
    rv = _np(m.row_viol, np.float64)
    return GatoStepResult(
        u=_np(m.u, np.float64), best_id=int(m.best_id), xu_best=_np(m.xu_best, np.float64),
        solve=solve_result_from_msg(m.solve),
        hypo_stats=json.loads(m.hypo_stats_json) if m.hypo_stats_json else None,
        pred_err=float(m.pred_err), reseeded=bool(m.reseeded), fc=fc if fc.size else None,
        iterations=int(m.iterations), budget_hit=bool(m.budget_hit), wall_s=float(m.wall_s),
        admm_linsys=str(m.admm_linsys), limits=str(m.limits), row_viol=rv if rv.size else None)


# ------------------------------------------------------------------ references and plans
def reference_to_msg(w: ReferenceWindow):
    """ReferenceWindow -> gato_msgs/EEReference."""
    from gato_msgs.msg import EEReference

    m = EEReference()
    m.header = _header(w.stamp_ns, w.frame_id)
    m.n_knots = w.n_knots
    m.knot_dt = float(w.knot_dt)
    m.positions = _f64(w.positions)
    if w.orientations is not None:   # issue 30: unit quaternions (x, y, z, w) per knot; empty = position only
        m.orientations = _f64(rotvec_to_quat(w.orientations))
    return m


def reference_from_msg(m) -> ReferenceWindow:
    """gato_msgs/EEReference -> ReferenceWindow. Raises ValueError when ``positions`` does not
    hold ``n_knots * 3`` finite values, ``knot_dt`` is not > 0, or ``orientations`` (optional,
    absent in older messages) is neither empty nor ``n_knots`` unit quaternions."""
    p = _np(m.positions, np.float64)
    n = int(m.n_knots)
    if n < 1 or p.size != 3 * n:
        raise ValueError(f"EEReference: positions holds {p.size} values, expected n_knots*3 = {3 * n} (n_knots >= 1)")
    o = _np(getattr(m, "orientations", []), np.float64)
    if o.size and o.size != 4 * n:
        raise ValueError(f"EEReference.orientations: holds {o.size} values, expected n_knots*4 = {4 * n} or none")
    return ReferenceWindow(stamp_ns=time_to_ns(m.header.stamp), knot_dt=float(m.knot_dt),
                           positions=p.reshape(n, 3), frame_id=str(m.header.frame_id),
                           orientations=o.reshape(n, 4) if o.size else None)


def plan_to_msg(p: Plan):
    """Plan -> gato_msgs/Plan; the plan's feedback gains ``K`` ((n_knots - 1, nu, nx), or None)
    into ``gains`` row-major (empty without them)."""
    from gato_msgs.msg import Plan as PlanMsg

    m = PlanMsg()
    m.header = _header(p.stamp_ns)
    m.knot_dt = float(p.knot_dt)
    m.nx, m.nu, m.n_knots = p.nx, p.nu, p.n_knots
    m.joint_names = list(p.joint_names)
    m.xu = _f64(p.xu)
    m.seq, m.reset_epoch, m.integrator = int(p.seq), int(p.reset_epoch), str(p.integrator)
    K = getattr(p, "K", None)
    if K is not None:
        m.gains = _f64(np.asarray(K, dtype=np.float64).reshape(-1))
    return m


def plan_from_msg(m) -> Plan:
    """gato_msgs/Plan -> Plan (validates the xu length); ``K`` the gains (None when the message
    has none, or when they are not (n_knots - 1, nu, nx) values)."""
    p = Plan(stamp_ns=time_to_ns(m.header.stamp), knot_dt=float(m.knot_dt), nx=int(m.nx), nu=int(m.nu),
             n_knots=int(m.n_knots), joint_names=list(m.joint_names), xu=_np(m.xu, np.float64),
             seq=int(getattr(m, "seq", 0)), reset_epoch=int(getattr(m, "reset_epoch", 0)),
             integrator=str(getattr(m, "integrator", "") or "euler"))
    p.K = plan_gains(m, p.n_knots, p.nx, p.nu)
    return p


def plan_from_step(step, stamp_ns: int, knot_dt: float, joint_names) -> Plan:
    """The winning plan of a gato.StepResult as a Plan stamped ``stamp_ns``."""
    s = step.solve
    return Plan(stamp_ns=stamp_ns, knot_dt=knot_dt, nx=s.nx, nu=s.nu, n_knots=s.N, joint_names=list(joint_names),
                xu=np.asarray(step.xu_best, dtype=np.float64))


# ------------------------------------------------------------------ joint states and commands
def joint_state_to_msg(js: JointStateSample):
    """JointStateSample -> sensor_msgs/JointState."""
    from sensor_msgs.msg import JointState

    m = JointState()
    m.header = _header(js.stamp_ns)
    m.name = [str(n) for n in js.names]
    m.position = _f64(js.position)
    m.velocity = _f64(js.velocity)
    m.effort = _f64(js.effort)
    return m


def joint_state_from_msg(m) -> JointStateSample:
    """sensor_msgs/JointState -> JointStateSample (arrays as sent; no validation)."""
    return JointStateSample(stamp_ns=time_to_ns(m.header.stamp), names=list(m.name),
                            position=_np(m.position, np.float64), velocity=_np(m.velocity, np.float64),
                            effort=_np(m.effort, np.float64))


def effort_to_multiarray(effort):
    """(n,) torques [N*m] -> std_msgs/Float64MultiArray (no layout: the forward-command
    controller's convention, joints in its configured order)."""
    from std_msgs.msg import Float64MultiArray

    m = Float64MultiArray()
    m.data = _f64(effort)
    return m


def effort_command_to_msg(effort, joint_names, stamp_ns: int, source: str, tick: int):
    """gato_msgs/EffortCommand: ``effort`` (n,) N*m in ``joint_names`` order, stamped with the
    joint state it answers."""
    from gato_msgs.msg import EffortCommand

    m = EffortCommand()
    m.header = _header(stamp_ns)
    m.joint_names = [str(n) for n in joint_names]
    m.effort = _f64(effort)
    m.source = str(source)
    m.tick = int(tick)
    return m


def solve_input_to_msg(si: SolveInput):
    """SolveInput -> gato_msgs/SolveInput (xu_warm flattened row-major, warm_rows rows)."""
    from gato_msgs.msg import SolveInput as SolveInputMsg

    m = SolveInputMsg()
    m.header = _header(si.stamp_ns)
    m.tick = int(si.tick)
    m.joint_names = list(si.joint_names)
    m.x_measured = _f64(si.x_measured)
    m.reference = _f64(si.reference)
    m.warm_rows = int(si.xu_warm.shape[0])
    m.xu_warm = _f64(si.xu_warm.reshape(-1))
    m.dt_elapsed = float(si.dt_elapsed)
    m.budget_s = float(si.budget_s)
    m.reset = bool(si.reset)
    m.config_json = si.config_json
    if si.solver_state is not None:
        m.solver_state_rows = int(si.solver_state.shape[0])
        m.solver_state = _f64(si.solver_state)
    m.capped_out, m.force_reseed = bool(si.capped_out), bool(si.force_reseed)
    if si.wrench_hypotheses is not None:
        m.wrench_rows = int(si.wrench_hypotheses.shape[0])
        m.wrench_hypotheses = _f64(si.wrench_hypotheses.reshape(-1))
    m.orientation_weight = float(si.orientation_weight)
    if si.posture_q is not None:
        m.posture_rows = int(si.posture_q.shape[0])
        m.posture_q = _f64(si.posture_q.reshape(-1))
        m.posture_weight = _f64(si.posture_weight.reshape(-1))
    return m


def solve_input_from_msg(m) -> SolveInput:
    """gato_msgs/SolveInput -> SolveInput. Raises ValueError when xu_warm is not warm_rows
    whole rows, solver_state not solver_state_rows whole rows, wrench_hypotheses not
    wrench_rows rows of 6, or posture_q / posture_weight not posture_rows equal whole rows. Fields
    an older message lacks read as not carried."""
    w = _np(m.xu_warm, np.float64)
    rows = int(m.warm_rows)
    if rows < 1 or w.size % rows:
        raise ValueError(f"SolveInput.xu_warm: {w.size} values are not {rows} whole rows")
    st, srows = _np(getattr(m, "solver_state", []), np.float64), int(getattr(m, "solver_state_rows", 0))
    if srows < 0 or (srows and st.size % srows) or (not srows and st.size):
        raise ValueError(f"SolveInput.solver_state: {st.size} values are not {srows} whole rows")
    wr, wrows = _np(getattr(m, "wrench_hypotheses", []), np.float64), int(getattr(m, "wrench_rows", 0))
    if wrows < 0 or wr.size != 6 * wrows:
        raise ValueError(f"SolveInput.wrench_hypotheses: {wr.size} values are not {wrows} rows of 6")
    pq, pw = _np(getattr(m, "posture_q", []), np.float64), _np(getattr(m, "posture_weight", []), np.float64)
    prows = int(getattr(m, "posture_rows", 0))
    if prows < 0 or pq.size != pw.size or (prows and (not pq.size or pq.size % prows)) or (not prows and pq.size):
        raise ValueError(f"SolveInput.posture_q: {pq.size} targets and {pw.size} weights are not {prows} equal "
                         "whole rows")
    return SolveInput(stamp_ns=time_to_ns(m.header.stamp), tick=int(m.tick), joint_names=list(m.joint_names),
                      x_measured=_np(m.x_measured, np.float64), reference=_np(m.reference, np.float64),
                      xu_warm=w.reshape(rows, -1), dt_elapsed=float(m.dt_elapsed), budget_s=float(m.budget_s),
                      reset=bool(m.reset), config_json=str(m.config_json),
                      solver_state=st.reshape(srows, -1) if srows else None,
                      capped_out=bool(getattr(m, "capped_out", False)),
                      force_reseed=bool(getattr(m, "force_reseed", False)),
                      wrench_hypotheses=wr.reshape(wrows, 6) if wrows else None,
                      orientation_weight=float(getattr(m, "orientation_weight", 0.0)),
                      posture_q=pq.reshape(prows, -1) if prows else None,
                      posture_weight=pw.reshape(prows, -1) if prows else None)
