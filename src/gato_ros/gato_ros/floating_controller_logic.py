"""ROS-free logic of the floating-base controller node (go2; issue 34).

State: the joint states (sensor_msgs/JointState) plus the base pose / twist from odometry
(nav_msgs/Odometry: pose in ``odom_frame``, twist in ``base_frame``, the child frame; the
consumer contract's schema 2: q = [p, quat xyzw, joints], v = [v_lin, omega] in the base frame,
joint rates). The solver: :class:`gato.floating.FloatingMPC` (the standing task, ``set_standing``),
replanned every ``replan_s`` of stamp time with ``step``; between replans each joint state gets
the plan's torques at its time plus the plan's Riccati gains on the state error
(bench/go2_stand.py's loop), clamped to the URDF effort limits.

Odometry is checked before it is used; a refused message is counted under its reason's name
(``refusals``) and never used:

- ``non_finite``: a NaN / inf in the pose or twist;
- ``non_unit_quaternion``: | |quat| - 1 | > 1e-3;
- ``frame``: header.frame_id / child_frame_id other than ``odom_frame`` / ``base_frame``;
- ``stale``: stamped more than ``odom_timeout_s`` before the latest joint state;
- ``out_of_order``: stamped before the odometry accepted last (a repeat of the same stamp is a
  re-send: ignored, not counted).

Each joint state (stamp t) is answered when the odometry stamped t has arrived (the lockstep
world publishes both each tick). While the latest good odometry is older than t by no more than
``odom_timeout_s`` the answer waits (:meth:`on_joint_state` returns None; the node gives up after
``odom_wait_s`` of wall clock and calls :meth:`hold_for`; 2 s: longer than the world's 0.5 s re-send, so
an odometry message lost while DDS matches the endpoints at start-up comes again before that);
odometry older than that, or none: the answer is the safe fallback at once, a damped joint hold (``hold_kp`` (q_hold - q) - ``hold_kd`` dq,
q_hold the joint positions where the hold began), counted in ``holds`` under its reason
(``stale_odometry``, ``no_odometry``, ``non_finite_joint_state``, ``solver_non_finite``). When
good odometry returns the MPC cold-starts.

The base-pose reference: ``base_height`` [m] (0: the registry's stand pose height), roll / pitch /
yaw (``base_rpy``; with ``yaw_from_odometry`` the yaw at the first odometry instead), xy at the first odometry; or a full
pose from :meth:`set_reference` (the node's ``~/base_reference`` topic, geometry_msgs/PoseStamped).
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .floating_sim_logic import effort_limits, quat_to_R, rpy_to_quat_xyzw

__all__ = ["Odometry", "FloatingCommand", "FloatingControllerLogic", "DEFAULTS"]

DEFAULTS = dict(robot="go2", horizon=20, knot_dt=0.02, max_iters=3, first_iters=30, replan_s=0.02,
                odom_timeout_s=0.05, odom_wait_s=2.0, hold_kp=60.0, hold_kd=2.0, base_height=0.0,
                base_rpy=[0.0, 0.0, 0.0], yaw_from_odometry=True, odom_frame="odom", base_frame="base")


@dataclass
class Odometry:
    stamp_ns: int
    frame_id: str
    child_frame_id: str
    position: np.ndarray
    quat_xyzw: np.ndarray
    linear: np.ndarray
    angular: np.ndarray


@dataclass
class FloatingCommand:
    stamp_ns: int
    effort: np.ndarray          # URDF joint order, N m
    source: str                 # "mpc" | "hold"
    reason: str = ""            # the hold's reason


class FloatingControllerLogic:
    """Args: config (keys of :data:`DEFAULTS`; missing ones take the default). ValueError on a bad value."""

    def __init__(self, config: dict | None = None):
        from gato.core.floating_mpc import FloatingMPC
        from gato.robots.registry import robot_info, robot_urdf

        cfg = dict(DEFAULTS)
        unknown = set(config or {}) - set(cfg)
        if unknown:
            raise ValueError(f"unknown configuration: {sorted(unknown)}")
        cfg.update(config or {})
        for k in ("odom_timeout_s", "odom_wait_s", "replan_s", "knot_dt"):
            if not (isinstance(cfg[k], (int, float)) and math.isfinite(cfg[k]) and cfg[k] > 0):
                raise ValueError(f"{k}: expected a finite value > 0, got {cfg[k]!r}")
        for k in ("hold_kp", "hold_kd", "base_height"):
            if not (isinstance(cfg[k], (int, float)) and math.isfinite(cfg[k]) and cfg[k] >= 0):
                raise ValueError(f"{k}: expected a finite value >= 0, got {cfg[k]!r}")
        rpy = [float(v) for v in cfg["base_rpy"]]
        if len(rpy) != 3 or not all(math.isfinite(v) for v in rpy):
            raise ValueError(f"base_rpy: expected finite [roll, pitch, yaw] rad, got {cfg['base_rpy']!r}")
        self.cfg = cfg
        info = robot_info(cfg["robot"])
        if not info or not info.get("floating_base", False):
            raise ValueError(f"robot: {cfg['robot']!r} is not a floating-base robot of the registry")
        self.mpc = FloatingMPC(cfg["robot"], N=int(cfg["horizon"]), dt=float(cfg["knot_dt"]),
                               max_iters=int(cfg["max_iters"]))
        self.joint_names = [j for j in info["joints"] if j != "root_joint"]
        self.effort_limit = effort_limits(robot_urdf(cfg["robot"]), self.joint_names)
        self.q_stand = np.asarray(info["q_stand"], float)
        self.base_height = float(cfg["base_height"])
        if self.base_height == 0.0:
            from gato.sim.mujoco_world import MuJoCoWorld
            self.base_height = float(MuJoCoWorld(str(robot_urdf(cfg["robot"])), floating=True)
                                     .standing_state("stand")[0][2])
        self.rpy = rpy
        self.odom: Odometry | None = None
        self.refusals: Counter = Counter()
        self.holds: Counter = Counter()
        self.ticks = 0
        self.mpc_ticks = 0
        self.solves = 0
        self.solve_s: list = []
        self._ref_pose = None          # (position (3,), quat (4,)) from set_reference
        self._x_ref = None
        self._res = None
        self._t_plan = None
        self._last_js_ns = None
        self._last: FloatingCommand | None = None
        self._hold_q = None
        self.odom_lost = False

    # ------------------------------------------------------------------ inputs
    def on_odometry(self, od: Odometry) -> str | None:
        """Check and keep ``od``; returns the refusal reason's name, or None (accepted or a re-send)."""
        vals = np.concatenate([od.position, od.quat_xyzw, od.linear, od.angular])
        reason = None
        if vals.shape != (13,) or not np.all(np.isfinite(vals)):
            reason = "non_finite"
        elif abs(np.linalg.norm(od.quat_xyzw) - 1.0) > 1e-3:
            reason = "non_unit_quaternion"
        elif od.frame_id != self.cfg["odom_frame"] or od.child_frame_id != self.cfg["base_frame"]:
            reason = "frame"
        elif self._last_js_ns is not None and self._last_js_ns - od.stamp_ns > self.cfg["odom_timeout_s"] * 1e9:
            reason = "stale"
        elif self.odom is not None and od.stamp_ns < self.odom.stamp_ns:
            reason = "out_of_order"
        if reason is not None:
            self.refusals[reason] += 1
            return reason
        if self.odom is not None and od.stamp_ns == self.odom.stamp_ns:
            return None                 # a re-send of the accepted one
        self.odom = od
        self.odom_lost = False
        return None

    def set_reference(self, position, quat_xyzw) -> None:
        """A full base-pose reference (world frame); ValueError when not finite / not a unit quaternion.
        A new pose re-sets the standing task at the next MPC tick (cold start); the same pose again: nothing."""
        p, qq = np.asarray(position, float), np.asarray(quat_xyzw, float)
        if p.shape != (3,) or qq.shape != (4,) or not (np.all(np.isfinite(p)) and np.all(np.isfinite(qq))):
            raise ValueError("base reference: expected a finite position (3,) and quaternion (4,)")
        if abs(np.linalg.norm(qq) - 1.0) > 1e-3:
            raise ValueError("base reference: the quaternion is not a unit one")
        qq = qq / np.linalg.norm(qq)
        if self._ref_pose is not None and np.array_equal(p, self._ref_pose[0]) and np.array_equal(qq, self._ref_pose[1]):
            return                      # the same pose again (a re-sent reference): the plan stays
        self._ref_pose = (p, qq)
        self._x_ref = None              # rebuilt (set_standing) at the next MPC tick

    # ------------------------------------------------------------------ ticks
    def on_joint_state(self, stamp_ns: int, names, position, velocity) -> FloatingCommand | None:
        """The command answering the joint state stamped ``stamp_ns``, or None: wait for its odometry."""
        if self._last is not None and stamp_ns == self._last.stamp_ns:
            return self._last           # a re-sent joint state: the same answer
        names = list(names)
        position, velocity = np.asarray(position, float), np.asarray(velocity, float)
        if sorted(names) != sorted(self.joint_names) or position.shape != (len(names),) \
                or velocity.shape != (len(names),):
            self.refusals["joint_names"] += 1
            return None
        idx = [names.index(n) for n in self.joint_names]
        qj, dqj = position[idx], velocity[idx]
        self._last_js_ns = stamp_ns
        self._js = (stamp_ns, qj, dqj)
        if not (np.all(np.isfinite(qj)) and np.all(np.isfinite(dqj))):
            return self._answer(self._hold(stamp_ns, None, None, "non_finite_joint_state"))
        od = self.odom
        if od is not None and od.stamp_ns == stamp_ns:
            return self._answer(self._mpc(stamp_ns, qj, dqj, od))
        if od is None and self.odom_lost or od is not None and (
                self.odom_lost or stamp_ns - od.stamp_ns > self.cfg["odom_timeout_s"] * 1e9):
            return self._answer(self._hold(stamp_ns, qj, dqj, "no_odometry" if od is None else "stale_odometry"))
        return None

    def on_odometry_for_pending(self) -> FloatingCommand | None:
        """After accepted odometry: the answer to the joint state that waited for it (or None)."""
        js = getattr(self, "_js", None)
        if js is None or self.odom is None or self.odom.stamp_ns != js[0] or \
                (self._last is not None and self._last.stamp_ns == js[0]):
            return None
        return self._answer(self._mpc(js[0], js[1], js[2], self.odom))

    def hold_for(self, stamp_ns: int) -> FloatingCommand | None:
        """The waited-for odometry did not come (``odom_wait_s``): hold, and stop waiting until odometry returns."""
        js = getattr(self, "_js", None)
        if js is None or js[0] != stamp_ns or (self._last is not None and self._last.stamp_ns == stamp_ns):
            return None
        self.odom_lost = True
        return self._answer(self._hold(stamp_ns, js[1], js[2], "no_odometry" if self.odom is None else "stale_odometry"))

    def _answer(self, cmd: FloatingCommand) -> FloatingCommand:
        self._last = cmd
        self.ticks += 1
        return cmd

    def _hold(self, stamp_ns, qj, dqj, reason) -> FloatingCommand:
        self.holds[reason] += 1
        self._res = None                # the MPC cold-starts when good input returns
        self.mpc.reset()
        if qj is None:                  # non-finite joint state: zero torque is all that is safe
            return FloatingCommand(stamp_ns, np.zeros(len(self.joint_names)), "hold", reason)
        if self._hold_q is None:
            self._hold_q = qj.copy()
        u = self.cfg["hold_kp"] * (self._hold_q - qj) - self.cfg["hold_kd"] * dqj
        return FloatingCommand(stamp_ns, np.clip(u, -self.effort_limit, self.effort_limit), "hold", reason)

    def _standing(self, x):
        od = self.odom
        if self._ref_pose is not None:
            p, qq = self._ref_pose
        else:
            R = quat_to_R(od.quat_xyzw)
            yaw = math.atan2(R[1, 0], R[0, 0]) if self.cfg["yaw_from_odometry"] else self.rpy[2]
            p = np.array([od.position[0], od.position[1], self.base_height])
            qq = rpy_to_quat_xyzw(self.rpy[0], self.rpy[1], yaw)
            self._ref_pose = (p, qq)
        nv = len(self.joint_names) + 6
        self._x_ref = np.concatenate([p, qq, self.q_stand, np.zeros(nv)])
        self.mpc.set_standing(self._x_ref, self.mpc.contact_positions(x[:7 + len(self.joint_names)]))
        self._res = None

    def _mpc(self, stamp_ns, qj, dqj, od: Odometry) -> FloatingCommand:
        quat = od.quat_xyzw / np.linalg.norm(od.quat_xyzw)
        x = np.concatenate([od.position, quat, qj, od.linear, od.angular, dqj])
        nq = 7 + len(self.joint_names)
        if self._x_ref is None:
            self._standing(x)
        t = stamp_ns * 1e-9
        if self._res is None or t - self._t_plan >= self.cfg["replan_s"] - 1e-9:
            first = self._res is None
            if not first:
                self.mpc.set_feet(self.mpc.contact_positions(x[:nq]))
            t0 = time.perf_counter()
            self._res = self.mpc.step(x, max_iters=int(self.cfg["first_iters"]) if first else None)
            self.solve_s.append(time.perf_counter() - t0)
            self.solves += 1
            self._t_plan = t
        res, plant, dt = self._res, self.mpc.plant, self.cfg["knot_dt"]
        s = (t - self._t_plan) / dt
        kk = min(int(s), self.mpc.N - 2)
        xp = plant.integrate(res.X[kk], (s - kk) * plant.difference(res.X[kk], res.X[kk + 1]))
        u = res.control_at(kk) + res.K[kk][:len(self.joint_names)] @ plant.difference(xp, x)
        if not np.all(np.isfinite(u)):
            return self._hold(stamp_ns, qj, dqj, "solver_non_finite")
        self._hold_q = None
        self.mpc_ticks += 1
        return FloatingCommand(stamp_ns, np.clip(u, -self.effort_limit, self.effort_limit), "mpc")

    # ------------------------------------------------------------------ status
    def status(self) -> dict:
        """Counters and figures for ~/status: ticks, mpc ticks, holds and refusals by name, solve times."""
        st = np.array(self.solve_s[-200:]) * 1e3 if self.solve_s else np.zeros(1)
        out = {"ticks": self.ticks, "mpc_ticks": self.mpc_ticks, "solves": self.solves,
               "solve_ms_p50": float(np.median(st)), "solve_ms_max": float(st.max()),
               "holds": dict(self.holds), "refusals": dict(self.refusals),
               "base_height_ref": float(self._ref_pose[0][2]) if self._ref_pose else self.base_height}
        if self._res is not None:
            fc = self._res.fc_at(0)
            out["foot_fz"] = [float(fc[6 * c + 5]) for c in range(len(self.mpc.frames))]
        return out
