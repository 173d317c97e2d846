"""ROS-free logic of the floating-base simulation world (go2 in MuJoCo; issue 34).

:class:`FloatingSimLogic` holds a ``MuJoCoWorld(floating=True)`` (the consumer contract's schema-2
states: q = [p (3) m world, quat xyzw (4), joints], v = [v_lin, omega] both in the base frame, then
the joint rates) and advances it one control period (``period_s``, physics 1 ms steps) per
command, the command (the joint torques, URDF joint order) held over the period and clamped to
the URDF effort limits. What the world gives the graph each tick:

- the joint state of the actuated joints (names, q, dq, the torques applied last);
- the base's odometry (:meth:`odometry`): pose in the world (``odom`` frame) and the twist in the
  base frame (``base``), as nav_msgs/Odometry carries them (the twist in child_frame_id).

Start: the registry's ``crouch`` pose on the ground, optionally perturbed with a seed (base xy
+-5 cm, yaw +-0.3 rad, roll / pitch +-0.05 rad, joints +-0.05 rad: bench/go2_stand.py's start),
then ``settle_s`` of a joint PD holding the crouch to land it (before t = 0: the graph sees the
landed robot). The world clock starts at 0 after that.

Metrics of the run for the bringup's summary (:meth:`record`, :meth:`summary`): base height,
tilt, yaw, each foot's normal force (``last_contact["fn_by_body"]``) and its horizontal travel
from the start, every ``record_every`` ticks.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

__all__ = ["FloatingSimLogic", "effort_limits", "quat_to_R", "rpy_to_quat_xyzw"]

FEET = {"go2": ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]}
SETTLE_KP, SETTLE_KD = 60.0, 2.0


def quat_to_R(q_xyzw) -> np.ndarray:
    x, y, z, w = (float(v) for v in q_xyzw)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def rpy_to_quat_xyzw(roll, pitch, yaw) -> np.ndarray:
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return np.array([sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
                     cr * cp * cy + sr * sp * sy])


def effort_limits(urdf_path, joint_names) -> np.ndarray:
    """The URDF's ``<limit effort>`` of each joint in ``joint_names`` [N m] (inf where none)."""
    root = ET.parse(str(urdf_path)).getroot()
    lim = {}
    for j in root.iter("joint"):
        el = j.find("limit")
        if el is not None and el.get("effort") is not None:
            lim[j.get("name")] = float(el.get("effort"))
    return np.array([lim.get(n, np.inf) for n in joint_names])


class FloatingSimLogic:
    """Args: robot (a floating-base robot of the registry: go2), period_s (control period, a
    multiple of the 1 ms physics step), seed (start perturbation; < 0: none), settle_s (joint-PD
    landing before t = 0), record_every (ticks between recorded metrics). Raises ValueError."""

    PHYSICS_DT = 0.001

    def __init__(self, robot: str = "go2", period_s: float = 0.001, seed: int = -1, settle_s: float = 0.3,
                 record_every: int = 10):
        from gato.robots.registry import robot_info, robot_urdf
        from gato.sim.mujoco_world import MuJoCoWorld

        info = robot_info(robot)
        if not info or not info.get("floating_base", False):
            raise ValueError(f"robot: {robot!r} is not a floating-base robot of the registry")
        sub = period_s / self.PHYSICS_DT
        if not (period_s > 0 and abs(sub - round(sub)) < 1e-9 and round(sub) >= 1):
            raise ValueError(f"period_s: {period_s!r} must be a positive multiple of {self.PHYSICS_DT} s")
        if not (settle_s >= 0 and math.isfinite(settle_s)):
            raise ValueError(f"settle_s: {settle_s!r} must be >= 0")
        if int(record_every) < 1:
            raise ValueError(f"record_every: {record_every!r} must be >= 1")
        self.robot, self.period_s, self.substeps = robot, float(period_s), int(round(sub))
        self.record_every = int(record_every)
        urdf = str(robot_urdf(robot))
        self.world = MuJoCoWorld(urdf, floating=True)
        self.joint_names = list(self.world.joint_names)
        self.effort_limit = effort_limits(urdf, self.joint_names)
        self.feet = FEET.get(robot, [])
        q_stand, _ = self.world.standing_state("stand")
        self.stand_height = float(q_stand[2])
        q, dq = self.world.reset("crouch")
        if seed >= 0:
            rng = np.random.default_rng(seed)
            q[:2] += rng.uniform(-0.05, 0.05, 2)
            rpy = (rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), rng.uniform(-0.3, 0.3))
            q[3:7] = rpy_to_quat_xyzw(*rpy)
            q[7:] += rng.uniform(-0.05, 0.05, len(self.joint_names))
            q[2] += 0.01
        qc = q[7:].copy()
        for _ in range(int(round(settle_s / self.PHYSICS_DT))):
            u = np.clip(SETTLE_KP * (qc - q[7:]) - SETTLE_KD * dq[6:], -self.effort_limit, self.effort_limit)
            q, dq = self.world.step(q, dq, u, self.PHYSICS_DT)
            q[3:7] /= np.linalg.norm(q[3:7])
        self.world.reset()
        self.q, self.dq = q, dq
        self.u = np.zeros(len(self.joint_names))
        self.tick = 0
        self.saturated_periods = 0
        self._feet0 = np.array([self.world.body_position(q, b) for b in self.feet]) if self.feet else np.zeros((0, 3))
        self.log = {"t": [], "height": [], "tilt_deg": [], "yaw": [], "fn": [], "slip_m": []}
        self.record()

    # ------------------------------------------------------------------ state
    @property
    def t_ns(self) -> int:
        return int(round(self.tick * self.period_s * 1e9))

    def joint_state(self):
        """(names, position, velocity, effort) of the actuated joints (URDF order)."""
        return list(self.joint_names), self.q[7:].copy(), self.dq[6:].copy(), self.u.copy()

    def odometry(self) -> dict:
        """The base: ``position`` (3,) m and ``quat_xyzw`` (4,) in the world, ``linear`` (3,) m/s
        and ``angular`` (3,) rad/s in the base frame (nav_msgs/Odometry: twist in child_frame_id)."""
        b = self.world.base_state(self.q, self.dq)
        return {k: b[k] for k in ("position", "quat_xyzw", "linear", "angular")}

    # ------------------------------------------------------------------ stepping
    def effort_from(self, effort, names) -> np.ndarray:
        """A command's torques in URDF order; ValueError when names or values do not fit."""
        names = list(names)
        effort = np.asarray(effort, float)
        if sorted(names) != sorted(self.joint_names) or len(names) != len(self.joint_names):
            raise ValueError(f"joint_names: expected {self.joint_names}, got {names}")
        if effort.shape != (len(names),) or not np.all(np.isfinite(effort)):
            raise ValueError("effort: expected finite values, one per joint")
        return effort[[names.index(n) for n in self.joint_names]]

    def advance(self, u) -> None:
        """Apply ``u`` (URDF order, N m; clamped to the effort limits) for one period."""
        u = np.asarray(u, float)
        uc = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(uc != u):
            self.saturated_periods += 1
        q, dq = self.q, self.dq
        for _ in range(self.substeps):
            q, dq = self.world.step(q, dq, uc, self.PHYSICS_DT)
            q[3:7] /= np.linalg.norm(q[3:7])
        self.q, self.dq, self.u = q, dq, uc
        self.tick += 1
        if self.tick % self.record_every == 0:
            self.record()

    # ------------------------------------------------------------------ metrics
    def record(self) -> None:
        R = quat_to_R(self.q[3:7])
        fn = self.world.last_contact.get("fn_by_body", {}) if self.world.last_contact else {}
        log = self.log
        log["t"].append(self.tick * self.period_s)
        log["height"].append(float(self.q[2]))
        log["tilt_deg"].append(math.degrees(math.acos(min(1.0, max(-1.0, R[2, 2])))))
        log["yaw"].append(math.atan2(R[1, 0], R[0, 0]))
        log["fn"].append([float(fn.get(b, 0.0)) for b in self.feet])
        if self.feet:
            pos = np.array([self.world.body_position(self.q, b) for b in self.feet])
            log["slip_m"].append(float(np.max(np.linalg.norm((pos - self._feet0)[:, :2], axis=1))))
        else:
            log["slip_m"].append(0.0)

    def summary(self) -> dict:
        """The recorded metrics (lists, one entry per ``record_every`` ticks) and the run's facts."""
        return {"robot": self.robot, "period_s": self.period_s, "feet": self.feet, "stand_height": self.stand_height,
                "ticks": self.tick, "saturated_periods": self.saturated_periods, **self.log}
