"""ROS-free logic of the controller node's Cartesian target interfaces: a goal pose
(geometry_msgs/PoseStamped) reached on a minimum-jerk path, and servo-style velocity
commands (geometry_msgs/TwistStamped), both turned into the EE reference window the
controller already tracks (:class:`gato_ros.types.ReferenceWindow`, N knots ``dt`` apart,
positions in the controller's base frame [m]).

Times: ``t_ns`` is the stamp of the joint state the controller is about to solve from (the
tick's time; simulated time in the simulation bringups). Every target interface works on that
clock, so a lockstep run is reproducible and a paused simulation pauses the targets too.

- **Goal** (:meth:`TargetLogic.on_pose`): the path starts at the current target (the one the
  controller tracks at the goal's arrival: the running goal path's or servo target's position,
  or the measured EE when none is active) and reaches the goal after
  T = max(distance / ``goal_speed_mps``, ``goal_min_duration_s``) on the minimum-jerk profile
  10 s^3 - 15 s^4 + 6 s^5; the goal is then held. A new goal preempts the running one from the
  point the path had reached.
- **Servo** (:meth:`TargetLogic.on_twist`): the target moves at the commanded linear velocity
  (rotated into the base frame; a twist is a free vector, so only the rotation of its frame
  applies), scaled down to ``servo_max_speed_mps`` when faster (counted in ``twists_clamped``).
  The angular velocity (base frame, scaled down to ``servo_max_angular_rps``, counted the same
  way) turns an orientation target R(t) = exp(w (t - t0)) R0: from the first twist that turns,
  R0 is the orientation being tracked (a running servo's or tracked goal's), else the measured
  EE orientation the caller passes (``ee_rot_now``); from then the servo's windows carry the
  orientation (held by twists without an angular part). Without a measured orientation the
  angular part is ignored (counted in ``angular_ignored``). A twist is in force for
  ``servo_timeout_s`` after the tick at which it arrived; then the target stops where it is
  (``servo_stops`` counts the stops). The window predicts the motion up to that timeout only,
  so the MPC brakes in time for a stream that ends.
- **Frames**: a target in another frame than ``target_frame`` (the base frame: the URDF root
  link when empty) is transformed with the frame tree (:class:`gato_ros.frames.FrameTree`, fed
  from /tf and /tf_static); an unknown or unconnected frame is refused and counted
  (``unknown_frame``); an empty frame_id means the base frame.
- **Bad input** (each refused with its reason, counted, and the running target kept): a
  non-finite position / orientation / twist, a goal farther than ``target_max_distance_m``
  from the measured EE, an unknown frame.

- **Joint trajectory** (:meth:`TargetLogic.on_trajectory`, from the FollowJointTrajectory
  action or a JointTrajectory message, validated by :mod:`gato_ros.trajectory_logic`): the
  MPC tracks it through per-knot joint posture targets (:meth:`TargetLogic.posture`: the
  trajectory sampled at the knots, weight ``traj_posture_weight`` per joint) with the EE term
  blended in (the window is the forward kinematics of the same samples, so both terms agree);
  :meth:`TargetLogic.hold_joints` (a cancelled goal) holds the measured joint positions the same
  way. A new goal, pose or twist preempts the trajectory.

Orientation: a goal's orientation is validated, transformed and kept
(:attr:`TargetLogic.goal_orientation`, a base-frame rotation matrix). With ``goal_orientation``
(issue 30; off by default: a PoseStamped always carries an orientation, and an unset identity
one would turn the tool over) the goal's windows carry an orientation target per knot (the
controller weighs it with ``orientation_weight``): the slerp R0 exp(s log(R0^T R1)) from the
start orientation R0 to the goal's R1 on the position's minimum-jerk profile s (the same
duration T), then R1 held. R0 is the running tracked goal's orientation at the goal's arrival,
else the measured EE orientation the caller passes (``ee_rot_now``: the EE frame's rotation,
what the solver's orientation term compares), else R1 itself (a constant target from the
goal's acceptance). The goal's quaternion must then be a unit one (|norm - 1| <= 1e-3;
refused otherwise, counted in ``goals_rejected``). A goal that follows a turning servo starts
its slerp from the servo's orientation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from gato.core.references import QUAT_UNIT_TOL

from .frames import FrameTree, quat_to_matrix
from .reference_logic import min_jerk
from .types import ReferenceWindow, ns_to_sec, sec_to_ns

__all__ = ["TargetLogic", "TargetCounters", "TARGET_KEYS"]

#: the controller-schema parameters this module reads (gato_ros.params, group "targets")
TARGET_KEYS = ("target_frame", "goal_speed_mps", "goal_min_duration_s", "target_max_distance_m",
               "servo_max_speed_mps", "servo_timeout_s", "traj_posture_weight", "servo_max_angular_rps")


@dataclass
class TargetCounters:
    """What the target interfaces accepted and refused (the node logs and reports them)."""

    goals_accepted: int = 0
    goals_rejected: int = 0
    twists_accepted: int = 0
    twists_rejected: int = 0
    twists_clamped: int = 0
    servo_stops: int = 0
    unknown_frame: int = 0
    angular_ignored: int = 0


class TargetLogic:
    """Cartesian targets -> EE reference windows; no ROS.

    Args:
        config: the controller configuration (the names of :data:`TARGET_KEYS`, ``N``, ``dt``).
        base_frame: the frame the controller's EE positions are in (the URDF root link), used
            when ``target_frame`` is empty.
        frames: the frame tree the node feeds from /tf and /tf_static (a new empty one if None).
    """

    def __init__(self, config: dict, base_frame: str, frames: FrameTree | None = None, ee_pos=None):
        self.cfg = {k: config[k] for k in (*TARGET_KEYS[:-1], "N", "dt")}
        self.cfg["goal_orientation"] = bool(config.get("goal_orientation", False))
        self.cfg["servo_max_angular_rps"] = float(config.get("servo_max_angular_rps", 0.5))
        self._ee_pos = ee_pos            # q (nq,) solver order -> (3,) m: joint targets' EE window
        self.base_frame = (self.cfg["target_frame"] or base_frame).lstrip("/")
        self.frames = frames if frames is not None else FrameTree()
        self.counters = TargetCounters()
        self.mode = "none"              # "none" | "goal" | "servo" | "trajectory" | "joint_hold"
        self.tracker = None             # trajectory: gato_ros.trajectory_logic.TrajectoryTracker
        self._q_hold = None             # joint_hold: (nq,) rad
        self.last_reason = ""           # why the latest refused input was refused
        self.goal_orientation = None    # (3, 3) base-frame rotation of the latest goal
        self._goal_rot = None           # goal_orientation: (R0 (3, 3), w (3,) rad) with R1 = R0 exp3(w); else None
        # goal path: p(t) = p0 + min_jerk((t - t0) / T) (p1 - p0)
        self._goal = None               # (t0_ns, p0 (3,), p1 (3,), T s)
        # servo: the target at _servo_t_ns, the velocity in force and when it expires
        self._servo_p = None
        self._servo_t_ns = 0
        self._servo_v = np.zeros(3)
        self._servo_until_ns = 0
        self._servo_moving = False
        self._servo_R = None            # (3, 3) servo orientation target at _servo_t_ns (None: position only)
        self._servo_w = np.zeros(3)     # rad/s, base frame: the angular velocity in force

    def update_config(self, changes: dict) -> None:
        """Apply tunable changes (the names of :data:`TARGET_KEYS` other than target_frame)."""
        self.cfg.update({k: v for k, v in changes.items() if k in self.cfg and k != "target_frame"})

    # ------------------------------------------------------------------ inputs
    def _refuse(self, counter: str, reason: str) -> str:
        setattr(self.counters, counter, getattr(self.counters, counter) + 1)
        self.last_reason = reason
        return reason

    def _frame(self, frame_id: str):
        """(R, t) base <- frame_id, or None (unknown frame: counted)."""
        f = str(frame_id or self.base_frame).lstrip("/")
        tf = self.frames.lookup(self.base_frame, f)
        if tf is None:
            self.counters.unknown_frame += 1
        return tf

    def on_pose(self, frame_id: str, position, orientation_xyzw, t_ns: int, ee_now,
                ee_rot_now=None) -> str | None:
        """A goal pose arrived while the controller is at tick time ``t_ns`` with the EE measured
        at ``ee_now`` (3,) m and, optionally, oriented ``ee_rot_now`` (3, 3) (base frame: where
        a tracked orientation's slerp starts). Returns None when accepted, else the reason."""
        p = np.asarray(position, dtype=np.float64).reshape(3)
        if not np.all(np.isfinite(p)):
            return self._refuse("goals_rejected", f"pose goal refused: non-finite position {p.tolist()}")
        try:
            Rg = quat_to_matrix(orientation_xyzw)
        except ValueError as e:
            return self._refuse("goals_rejected", f"pose goal refused: orientation {e}")
        track = self.cfg["goal_orientation"]
        if track:       # tracked: a unit quaternion, as gato.core.references.orientations_of asks
            qn = float(np.linalg.norm(np.asarray(orientation_xyzw, dtype=np.float64)))
            if abs(qn - 1.0) > QUAT_UNIT_TOL:
                return self._refuse("goals_rejected", f"pose goal refused: orientation quaternion norm {qn:.6g} "
                                    f"is not 1 (|norm - 1| > {QUAT_UNIT_TOL:g}; goal_orientation tracks it)")
        tf = self._frame(frame_id)
        if tf is None:
            return self._refuse("goals_rejected", f"pose goal refused: frame {frame_id!r} is unknown or not "
                                f"connected to {self.base_frame!r} (no transform on /tf or /tf_static)")
        R, t = tf
        goal = R @ p + t
        ee_now = np.asarray(ee_now, dtype=np.float64).reshape(3)
        dist_ee = float(np.linalg.norm(goal - ee_now))
        if dist_ee > self.cfg["target_max_distance_m"]:
            return self._refuse("goals_rejected", f"pose goal refused: {dist_ee:.3f} m from the measured EE "
                                f"(target_max_distance_m = {self.cfg['target_max_distance_m']:g})")
        R1 = R @ Rg
        R0 = None
        if track:       # where the orientation's slerp starts: the running tracked goal's, else the measured EE's
            if ee_rot_now is not None:
                R0 = np.asarray(ee_rot_now, dtype=np.float64).reshape(3, 3)
                if not np.all(np.isfinite(R0)):
                    raise ValueError("ee_rot_now: contains NaN or Inf")
            if self.mode in ("goal", "servo") and self.orientation_at([t_ns]) is not None:
                R0 = self.orientation_at([t_ns])[0]
            R0 = R1 if R0 is None else R0
        start = self.current_target(t_ns, ee_now)
        dist = float(np.linalg.norm(goal - start))
        T = max(dist / self.cfg["goal_speed_mps"], self.cfg["goal_min_duration_s"])
        self._goal = (int(t_ns), start, goal, T)
        self.goal_orientation = R1
        self._goal_rot = None if R0 is None else (R0, np.asarray(pin.log3(R0.T @ R1), dtype=np.float64))
        self.mode, self.tracker = "goal", None
        self.counters.goals_accepted += 1
        return None

    def on_twist(self, frame_id: str, linear, angular, t_ns: int, ee_now, ee_rot_now=None) -> str | None:
        """A servo twist arrived at tick time ``t_ns``; ``linear`` (3,) m/s, ``angular`` (3,)
        rad/s, the EE measured at ``ee_now`` (3,) m and oriented ``ee_rot_now`` (3, 3) (where a
        turn starts when no orientation is tracked yet; None: the angular part is ignored,
        counted). Returns None when accepted, else the reason; a clamped twist is accepted (and
        counted)."""
        v = np.asarray(linear, dtype=np.float64).reshape(3)
        w = np.asarray(angular, dtype=np.float64).reshape(3)
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(w))):
            return self._refuse("twists_rejected", f"twist refused: non-finite linear {v.tolist()} / angular "
                                f"{w.tolist()}")
        tf = self._frame(frame_id)
        if tf is None:
            return self._refuse("twists_rejected", f"twist refused: frame {frame_id!r} is unknown or not connected "
                                f"to {self.base_frame!r} (no transform on /tf or /tf_static)")
        v, clamped_v = self._clamp(tf[0] @ v, self.cfg["servo_max_speed_mps"], "twist", "servo_max_speed_mps", "m/s")
        w, clamped_w = self._clamp(tf[0] @ w, self.cfg["servo_max_angular_rps"], "angular twist",
                                   "servo_max_angular_rps", "rad/s")
        self.counters.twists_clamped += int(clamped_v or clamped_w)
        # the orientation being tracked now (a running servo's or tracked goal's), before the mode changes
        R_now = self.orientation_at([t_ns]) if self.mode in ("goal", "servo") else None
        R_now = None if R_now is None else R_now[0]
        if np.any(w != 0.0) and R_now is None:
            if ee_rot_now is None:
                self.counters.angular_ignored += 1
                w = np.zeros(3)
            else:
                R_now = np.asarray(ee_rot_now, dtype=np.float64).reshape(3, 3)
                if not np.all(np.isfinite(R_now)):
                    raise ValueError("ee_rot_now: contains NaN or Inf")
        start = self.current_target(t_ns, ee_now)   # before the mode changes: where the target is now
        self.mode, self.tracker = "servo", None
        self._goal = None
        self._servo_p, self._servo_t_ns = start, int(t_ns)
        self._servo_v, self._servo_R, self._servo_w = v, R_now, (w if R_now is not None else np.zeros(3))
        self._servo_until_ns = int(t_ns) + sec_to_ns(self.cfg["servo_timeout_s"])
        self._servo_moving = bool(np.any(v != 0.0) or np.any(self._servo_w != 0.0))
        self.counters.twists_accepted += 1
        return None

    def _clamp(self, v, vmax: float, what: str, name: str, unit: str):
        """(v scaled down to norm ``vmax`` when above it, whether it was). The norm of the
        direction, then its scale: |v| of a finite 1e308 twist overflows, and v * (vmax / inf)
        would stop the arm instead of moving it at vmax in that direction."""
        scale = float(np.abs(v).max())
        unit_v = v / scale if scale > 0 else v
        speed = scale * float(np.linalg.norm(unit_v))
        if speed <= vmax:
            return v, False
        self.last_reason = f"{what} of {speed:.3f} {unit} clamped to {name} = {vmax:g}"
        return unit_v * (vmax / float(np.linalg.norm(unit_v))), True

    # ------------------------------------------------------------------ outputs
    @property
    def active(self) -> bool:
        """A Cartesian target owns the controller's reference (a goal or the servo target)."""
        return self.mode != "none"

    def _servo_at(self, t_ns) -> np.ndarray:
        """(T, 3) servo targets at times ``t_ns`` (T,) ns: moving until the twist expires."""
        t = np.minimum(np.asarray(t_ns, dtype=np.int64), self._servo_until_ns)
        dt = np.maximum(t - self._servo_t_ns, 0) * 1e-9
        return self._servo_p[None, :] + dt[:, None] * self._servo_v[None, :]

    def _goal_at(self, t_ns) -> np.ndarray:
        t0, p0, p1, T = self._goal
        s = min_jerk((np.asarray(t_ns, dtype=np.int64) - t0) * 1e-9 / T)
        return p0[None, :] + np.asarray(s)[:, None] * (p1 - p0)[None, :]

    def orientation_at(self, t_ns):
        """(T, 3, 3) tracked orientations at times ``t_ns`` (T,) ns: a goal's (the slerp on its
        minimum-jerk profile, then the goal's) or a turning servo's (exp(w dt) R0 until its twist
        expires), or None when no orientation is tracked."""
        if self.mode == "servo" and self._servo_R is not None:
            t = np.minimum(np.atleast_1d(np.asarray(t_ns, dtype=np.int64)), self._servo_until_ns)
            dt = np.maximum(t - self._servo_t_ns, 0) * 1e-9
            return np.array([pin.exp3(float(d) * self._servo_w) @ self._servo_R for d in dt])
        if self.mode != "goal" or self._goal_rot is None:
            return None
        t0, _, _, T = self._goal
        R0, w = self._goal_rot
        s = np.atleast_1d(min_jerk((np.asarray(t_ns, dtype=np.int64) - t0) * 1e-9 / T))
        return np.array([R0 @ pin.exp3(float(si) * w) for si in s])

    def current_target(self, t_ns: int, ee_now) -> np.ndarray:
        """(3,) m: the target at tick time ``t_ns`` (the measured EE ``ee_now`` when none)."""
        if self.mode == "goal":
            return self._goal_at([t_ns])[0]
        if self.mode == "servo":
            return self._servo_at([t_ns])[0]
        if self.mode in ("trajectory", "joint_hold"):
            return self._ee_pos(self._joint_targets([t_ns])[0])
        return np.asarray(ee_now, dtype=np.float64).reshape(3).copy()

    def goal_reached(self, t_ns: int) -> bool:
        """The goal path has ended (the goal is held from here); False outside goal mode."""
        return self.mode == "goal" and ns_to_sec(int(t_ns) - self._goal[0]) >= self._goal[3]

    def window(self, t_ns: int) -> ReferenceWindow | None:
        """The reference window stamped ``t_ns`` (N knots ``dt`` apart), or None when no
        target is active. Servo: the target is advanced to ``t_ns`` first (a stop after the
        twist expired is counted once)."""
        if self.mode == "none":
            return None
        N, dt = self.cfg["N"], self.cfg["dt"]
        tk = int(t_ns) + np.round(np.arange(N) * dt * 1e9).astype(np.int64)
        if self.mode == "goal":
            Rk = self.orientation_at(tk)
            r = None if Rk is None else np.array([pin.log3(R) for R in Rk], dtype=np.float64)
            return ReferenceWindow(int(t_ns), dt, self._goal_at(tk), orientations=r)
        if self.mode in ("trajectory", "joint_hold"):
            return ReferenceWindow(int(t_ns), dt, np.array([self._ee_pos(q) for q in self._joint_targets(tk)]))
        if self._servo_moving and int(t_ns) >= self._servo_until_ns:
            self._servo_moving = False
            self.counters.servo_stops += 1
        pos = self._servo_at(tk)
        Rk = self.orientation_at(tk)
        if int(t_ns) > self._servo_t_ns:      # re-base: the integration restarts from here
            self._servo_p = pos[0].copy()
            if Rk is not None:
                self._servo_R = Rk[0].copy()
            self._servo_t_ns = int(t_ns)
            if self._servo_t_ns >= self._servo_until_ns:
                self._servo_v, self._servo_w = np.zeros(3), np.zeros(3)
        r = None if Rk is None else np.array([pin.log3(R) for R in Rk], dtype=np.float64)
        return ReferenceWindow(int(t_ns), dt, pos, orientations=r)

    # ------------------------------------------------------------------ joint targets
    def on_trajectory(self, tracker) -> None:
        """Track ``tracker`` (a :class:`gato_ros.trajectory_logic.TrajectoryTracker`, started at
        the tick time it was accepted) from now on; preempts any target."""
        if self._ee_pos is None:
            raise RuntimeError("TargetLogic: joint targets need ee_pos (the controller's EE kinematics)")
        self.mode, self.tracker, self._goal = "trajectory", tracker, None

    def hold_joints(self, q) -> None:
        """Hold the joint positions ``q`` (nq,) rad solver order (a cancelled trajectory)."""
        if self._ee_pos is None:
            raise RuntimeError("TargetLogic: joint targets need ee_pos (the controller's EE kinematics)")
        self.mode, self.tracker, self._goal = "joint_hold", None, None
        self._q_hold = np.asarray(q, dtype=np.float64).copy()

    def _joint_targets(self, t_ns) -> np.ndarray:
        if self.mode == "trajectory":
            return self.tracker.sample(t_ns)[0]
        return np.repeat(self._q_hold[None, :], len(np.atleast_1d(t_ns)), 0)

    def posture(self, t_ns: int):
        """Per-knot posture targets of the window stamped ``t_ns``: (q (N, nq) rad, weights
        (N, nq)), or None outside the joint-target modes (the solver's posture term off)."""
        if self.mode not in ("trajectory", "joint_hold"):
            return None
        N, dt = self.cfg["N"], self.cfg["dt"]
        tk = int(t_ns) + np.round(np.arange(N) * dt * 1e9).astype(np.int64)
        q = self._joint_targets(tk)
        return q, np.full(q.shape, float(self.cfg["traj_posture_weight"]))
