"""ROS-free logic of the controller node's joint-space targets: a FollowJointTrajectory goal
(control_msgs, the action MoveIt's simple controller manager sends) or a
trajectory_msgs/JointTrajectory message, validated, sampled at the MPC's knots, and judged
against its path and goal tolerances.

- **Validation** (:func:`parse_trajectory`, raises :class:`InvalidTrajectory` with the
  control_msgs error code and a text naming what was wrong): joint names unique and exactly the
  controlled joints (any order); at least one point; every point's positions of the names'
  length, velocities empty or of that length; finite values; ``time_from_start`` strictly
  increasing and >= 0; every position within the URDF limits; tolerances only for known joints,
  finite. The error code is ``INVALID_GOAL`` for every refusal (the reason says which rule).
- **Sampling** (:class:`TrajectoryTracker`): the trajectory starts at the measured state when
  its first point lies in the future (the point at t = 0 is the state at acceptance, as
  ros2_controllers' joint_trajectory_controller does); between points a cubic Hermite in
  position and velocity (velocities not given: zero at the ends, the centred difference of
  the neighbours inside), the last point held after the end.
- **Outcome** (:meth:`TrajectoryTracker.check`): while the trajectory runs, a joint further than
  its path tolerance from the sampled position aborts with ``PATH_TOLERANCE_VIOLATED``; after
  the last point, every joint within its goal tolerance (and velocity tolerance, when given)
  succeeds (``SUCCESSFUL``); not within ``goal_time_tolerance`` after the end aborts with
  ``GOAL_TOLERANCE_VIOLATED``. A tolerance of 0 takes the default (``traj_path_tolerance_rad``,
  ``traj_goal_tolerance_rad``, ``traj_goal_time_s``), -1 means none (control_msgs' rules).

Times: ``t_ns`` is the tick's joint-state stamp (simulated time in simulation), like the
Cartesian targets (:mod:`gato_ros.target_logic`). Joint arrays here are in the controller's
SOLVER order (``joint_order``), radians.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SUCCESSFUL", "INVALID_GOAL", "INVALID_JOINTS", "PATH_TOLERANCE_VIOLATED", "GOAL_TOLERANCE_VIOLATED",
           "InvalidTrajectory", "Trajectory", "TrajectoryTracker", "parse_trajectory", "points_from_msg",
           "knot_posture_supported"]

# control_msgs/action/FollowJointTrajectory Result.error_code
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP = 0, -1, -2, -3
PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -4, -5


class InvalidTrajectory(ValueError):
    """A refused trajectory: ``code`` (control_msgs error code) and the reason (str(e))."""

    def __init__(self, text: str, code: int = INVALID_GOAL):
        super().__init__(text)
        self.code = code


@dataclass
class Trajectory:
    """A validated trajectory in solver order: ``t`` (P,) s from its start, ``q`` (P, n) rad,
    ``qd`` (P, n) rad/s or None (not given); tolerances (n,) rad [, rad/s], inf = none;
    ``goal_time_s`` the settle time allowed after the last point."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray | None
    path_tol: np.ndarray
    goal_tol: np.ndarray
    goal_vel_tol: np.ndarray
    goal_time_s: float
    joints: list
    lower: np.ndarray | None = None    # (n,) rad position limits the samples are clipped to
    upper: np.ndarray | None = None


def _tol(value: float, default: float) -> float:
    """control_msgs' rule: 0 = the default, -1 (any negative) = no tolerance."""
    if value < 0:
        return np.inf
    return default if value == 0 else float(value)


def points_from_msg(msg_points) -> list:
    """[(time_from_start s, positions, velocities)] of trajectory_msgs/JointTrajectoryPoint
    messages (duck-typed: no ROS import), the form :func:`parse_trajectory` takes."""
    return [((int(p.time_from_start.sec) * 1_000_000_000 + int(p.time_from_start.nanosec)) * 1e-9,
             list(p.positions), list(p.velocities)) for p in msg_points]


def parse_trajectory(names, points, joints, lower, upper, *, path_tolerance=(), goal_tolerance=(),
                     goal_time_tolerance_s: float = 0.0, defaults: dict, velocity_limit=None) -> Trajectory:
    """Validate a trajectory and reorder it into ``joints`` (the solver order).

    ``names``: the trajectory's joint names; ``points``: [(time_from_start s, positions,
    velocities)]; ``lower`` / ``upper`` (n,) URDF position limits [rad] in ``joints`` order;
    ``velocity_limit`` (n,) rad/s URDF velocity limits (None: not checked): a point's given
    velocity beyond it is refused (finite but absurd velocities would make the Hermite segments
    through them leave the joint limits, or overflow);
    ``path_tolerance`` / ``goal_tolerance``: [(joint name, position tol, velocity tol)];
    ``defaults``: ``traj_path_tolerance_rad``, ``traj_goal_tolerance_rad``, ``traj_goal_time_s``.
    Raises :class:`InvalidTrajectory`."""
    names, joints = [str(n) for n in names], list(joints)
    n = len(joints)
    vlim = None if velocity_limit is None else np.asarray(velocity_limit, dtype=np.float64).reshape(n)
    if vlim is not None:
        vlim = np.where(vlim > 0, vlim, np.inf)      # a URDF without a velocity limit (0): not checked
    if len(set(names)) != len(names):
        raise InvalidTrajectory(f"joint_names: repeated names in {names}")
    unknown = [x for x in names if x not in joints]
    if unknown:
        raise InvalidTrajectory(f"joint_names: {unknown} not controlled by this controller (joints {joints})")
    missing = [j for j in joints if j not in names]
    if missing:
        raise InvalidTrajectory(f"joint_names: {missing} missing; a trajectory must name every controlled joint "
                                f"{joints}")
    if not points:
        raise InvalidTrajectory("points: empty trajectory")
    order = [names.index(j) for j in joints]
    ts, qs, qds = [], [], []
    have_v = None
    for i, (t, pos, vel) in enumerate(points):
        pos, vel = np.asarray(pos, dtype=np.float64).reshape(-1), np.asarray(vel, dtype=np.float64).reshape(-1)
        if pos.size != n:
            raise InvalidTrajectory(f"points[{i}].positions: {pos.size} values for {n} joint names")
        if vel.size not in (0, n):
            raise InvalidTrajectory(f"points[{i}].velocities: {vel.size} values for {n} joint names (or none)")
        if have_v is None:
            have_v = vel.size == n
        elif have_v != (vel.size == n):
            raise InvalidTrajectory(f"points[{i}].velocities: given for some points only")
        if not (np.isfinite(t) and np.all(np.isfinite(pos)) and np.all(np.isfinite(vel))):
            raise InvalidTrajectory(f"points[{i}]: non-finite time, position or velocity")
        if t < 0 or (ts and t <= ts[-1]):
            raise InvalidTrajectory(f"points[{i}].time_from_start: {t:g} s, must be >= 0 and after the previous "
                                    f"point's ({ts[-1] if ts else 0:g} s)")
        q = pos[order]
        bad = np.flatnonzero((q < lower) | (q > upper))
        if bad.size:
            j = int(bad[0])
            raise InvalidTrajectory(f"points[{i}]: {joints[j]} = {q[j]:.4f} rad is beyond its URDF limits "
                                    f"[{lower[j]:.4f}, {upper[j]:.4f}]")
        if have_v and vlim is not None:
            over = np.flatnonzero(np.abs(vel[order]) > vlim)
            if over.size:
                j = int(over[0])
                raise InvalidTrajectory(f"points[{i}].velocities: {joints[j]} = {vel[order][j]:.4g} rad/s is beyond "
                                        f"its URDF velocity limit {vlim[j]:.4f}")
        ts.append(float(t))
        qs.append(q)
        qds.append(vel[order] if have_v else None)

    def tol_table(entries, default, what, vel=False):
        out = np.full(n, _tol(0.0, default))
        for name, p_tol, v_tol in entries:
            if name not in joints:
                raise InvalidTrajectory(f"{what}: joint {name!r} is not controlled (joints {joints})")
            v = v_tol if vel else p_tol
            if not np.isfinite(v):
                raise InvalidTrajectory(f"{what}: non-finite tolerance for {name}")
            out[joints.index(name)] = _tol(v, default)
        return out

    path_tol = tol_table(path_tolerance, defaults["traj_path_tolerance_rad"], "path_tolerance")
    goal_tol = tol_table(goal_tolerance, defaults["traj_goal_tolerance_rad"], "goal_tolerance")
    goal_vel_tol = tol_table(goal_tolerance, np.inf, "goal_tolerance", vel=True)   # velocity: none unless given
    gt = float(goal_time_tolerance_s)
    if not np.isfinite(gt):
        raise InvalidTrajectory("goal_time_tolerance: non-finite")
    return Trajectory(np.array(ts), np.array(qs), np.array(qds) if have_v else None, path_tol, goal_tol,
                      goal_vel_tol, _tol(gt, defaults["traj_goal_time_s"]), joints,
                      np.asarray(lower, dtype=np.float64).copy(), np.asarray(upper, dtype=np.float64).copy())


class TrajectoryTracker:
    """One accepted trajectory, started at tick time ``t0_ns`` from the measured state
    ``q0`` / ``qd0`` (n,) (solver order)."""

    def __init__(self, traj: Trajectory, t0_ns: int, q0, qd0):
        q0, qd0 = np.asarray(q0, dtype=np.float64), np.asarray(qd0, dtype=np.float64)
        t, q = traj.t, traj.q
        qd = traj.qd
        if t[0] > 0:                         # starts at the state at acceptance
            t = np.r_[0.0, t]
            q = np.vstack([q0, q])
            qd = None if qd is None else np.vstack([qd0, qd])
        if qd is None:                       # zero at the ends, centred differences inside
            qd = np.zeros_like(q)
            if len(t) > 2:
                qd[1:-1] = (q[2:] - q[:-2]) / (t[2:] - t[:-2])[:, None]
        self.traj, self.t0_ns = traj, int(t0_ns)
        self.t, self.q, self.qd = t, q, qd
        self.duration_s = float(t[-1])

    def sample(self, t_ns) -> tuple[np.ndarray, np.ndarray]:
        """(q (T, n), qd (T, n)) at tick times ``t_ns`` (T,) ns."""
        s = (np.asarray(t_ns, dtype=np.int64).reshape(-1) - self.t0_ns) * 1e-9
        s = np.clip(s, 0.0, self.duration_s)
        if len(self.t) == 1:
            return np.repeat(self.q, len(s), 0), np.zeros((len(s), self.q.shape[1]))
        i = np.clip(np.searchsorted(self.t, s, side="right") - 1, 0, len(self.t) - 2)
        h = (self.t[i + 1] - self.t[i])[:, None]
        u = (s[:, None] - self.t[i][:, None]) / h
        p0, p1, v0, v1 = self.q[i], self.q[i + 1], self.qd[i] * h, self.qd[i + 1] * h
        h00, h10, h01, h11 = 2 * u**3 - 3 * u**2 + 1, u**3 - 2 * u**2 + u, -2 * u**3 + 3 * u**2, u**3 - u**2
        q = h00 * p0 + h10 * v0 + h01 * p1 + h11 * v1
        dq = ((6 * u**2 - 6 * u) * p0 + (3 * u**2 - 4 * u + 1) * v0 + (-6 * u**2 + 6 * u) * p1
              + (3 * u**2 - 2 * u) * v1) / h
        dq[s >= self.duration_s] = 0.0
        tr = self.traj
        if tr.lower is not None:
            # a Hermite segment overshoots its points by up to ~v h / 4: the posture target never
            # leaves the joint limits (where clipped, its velocity is 0)
            clipped = (q < tr.lower) | (q > tr.upper)
            q = np.clip(q, tr.lower, tr.upper)
            dq[clipped] = 0.0
        return q, dq

    def check(self, t_ns: int, q, qd) -> tuple[int | None, str]:
        """(None, "") while running; (code, text) when it ended: SUCCESSFUL,
        PATH_TOLERANCE_VIOLATED or GOAL_TOLERANCE_VIOLATED."""
        q, qd = np.asarray(q, dtype=np.float64), np.asarray(qd, dtype=np.float64)
        s = (int(t_ns) - self.t0_ns) * 1e-9
        tr = self.traj
        if s < self.duration_s:
            qdes = self.sample([t_ns])[0][0]
            err = np.abs(q - qdes)
            bad = np.flatnonzero(err > tr.path_tol)
            if bad.size:
                j = int(bad[0])
                return PATH_TOLERANCE_VIOLATED, (f"{tr.joints[j]} off the path by {err[j]:.4f} rad at {s:.3f} s "
                                                 f"(path tolerance {tr.path_tol[j]:.4f})")
            return None, ""
        err = np.abs(q - self.q[-1])
        ok = np.all(err <= tr.goal_tol) and np.all(np.abs(qd) <= tr.goal_vel_tol)
        if ok:
            return SUCCESSFUL, f"reached within {err.max():.4f} rad {s - self.duration_s:.3f} s after the last point"
        if s > self.duration_s + tr.goal_time_s:
            j = int(np.argmax(err - tr.goal_tol))
            return GOAL_TOLERANCE_VIOLATED, (f"{tr.joints[j]} {err[j]:.4f} rad from the goal {tr.goal_time_s:g} s after "
                                             f"the last point (goal tolerance {tr.goal_tol[j]:.4f})")
        return None, ""


def knot_posture_supported(solver) -> bool:
    """The solver takes per-knot posture targets and weights ((N, nq) arrays: gato.BSQP.set_q_nom /
    set_q_pos_cost), which joint trajectories are tracked through."""
    try:
        solver.set_q_nom(np.zeros((solver.N, solver.nq)))
    except (ValueError, TypeError):
        return False
    solver.set_q_nom(None)
    return True
