"""The operational-space controller ("osc") behind gato's planner interface (:mod:`gato.planner`).

Each tick drives the EE (the registered EE frame) toward knot 0 of the reference window with
:class:`gato.osc.ControllerOperationalSpace` (model-based: pinocchio in C++): toward its pose when
the window carries orientations (the tool quaternion of knot 0, the angular velocity of the
rotation from knot 0 to knot 1), else holding the tool orientation it had at
:meth:`OSCPlanner.reset`; a robot with more than 6 DOFs keeps the reset posture in the null
space. The desired EE velocity is the window's velocity at knot 0 when the window carries
velocities, else the slope to knot 1. No optimizer, no plan: the torque of this
tick (``plan`` None, held by the loop over the control period), so it is meant for short
periods (``dt`` 1 ms by default, the rate the gains are tuned for).

Config (all optional): ``dt`` [s] control period (0.001), ``N`` window knots (2),
``stiffness`` / ``damping`` position gains [1/s^2] / [1/s] (900, 60),
``orientation_stiffness`` / ``orientation_damping`` (900, 60), ``null_space_stiffness`` /
``null_space_damping`` [1/s^2] / [1/s] (25, 10; ignored for robots with <= 6 DOFs),
``gravity_compensation`` (True). Gains are per axis with inertia decoupling (docs/osc.md).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .planner import Capabilities, Planner, PlannerStats, StepResult
from ..core.references import ReferenceWindow, quat_multiply, quat_to_rotvec, rotvec_to_quat
from ..core.state import state_vector

__all__ = ["OSCPlanner", "DEFAULTS"]

DEFAULTS = dict(dt=0.001, N=2, stiffness=900.0, damping=60.0, orientation_stiffness=900.0,
                orientation_damping=60.0, null_space_stiffness=25.0, null_space_damping=10.0,
                gravity_compensation=True)


class OSCPlanner(Planner):
    """Args: robot (a registered plant name or a URDF path), config (None or a dict of
    :data:`DEFAULTS` keys; unknown keys or bad values raise ValueError naming them)."""

    capabilities = Capabilities()

    def __init__(self, robot, config=None):
        from .osc import ControllerOperationalSpace
        from ..robots.registry import resolve_robot

        cfg = dict(config or {})
        unknown = sorted(set(cfg) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"config: unknown keys {unknown}; osc takes {sorted(DEFAULTS)}")
        cfg = {**DEFAULTS, **cfg}
        for k, v in cfg.items():
            if k == "gravity_compensation":
                if not isinstance(v, bool):
                    raise ValueError(f"{k}: expected a bool, got {v!r}")
            elif k == "N":
                if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                    raise ValueError(f"N: expected an int >= 2 (knots per window), got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (k == "dt" and v <= 0):
                raise ValueError(f"{k}: expected a finite number {'> 0' if k == 'dt' else '>= 0'}, got {v!r}")
        urdf, plant, ee_frame = resolve_robot(robot, None)
        import pinocchio as pin

        nv = int(pin.buildModelFromUrdf(urdf).nv)
        ns = nv > 6
        kp = [cfg["stiffness"]] * 3 + [cfg["orientation_stiffness"]] * 3
        kd = [cfg["damping"]] * 3 + [cfg["orientation_damping"]] * 3
        self.osc = ControllerOperationalSpace(
            robots=[urdf], tool_frames=[ee_frame], motion_stiffness=kp, motion_damping=kd,
            use_gravity_compensation=cfg["gravity_compensation"], use_null_space_control=ns,
            null_space_stiffness=cfg["null_space_stiffness"] if ns else None,
            null_space_damping=cfg["null_space_damping"] if ns else None)
        self.config = cfg
        self.nx, self.nu, self.nu_act = 2 * nv, nv, nv
        self.N, self.dt = int(cfg["N"]), float(cfg["dt"])
        self._in, self._out = self.osc.input(), self.osc.output()
        self._hold_quat = np.array(self._in.desired_tool_pose_operational[0, 3:], dtype=np.float64)
        self._null_space = ns

    def reset(self, x0) -> None:
        """Start at x0 = [q; qd] (2 nv,): the orientation to hold and the null-space posture."""
        x0 = state_vector(x0, self.nx, "x0")
        q0 = x0[:self.nu]
        pose = self.osc.kinematics(q0, np.zeros(self.nu))["tool_pose_world"][0]
        self._in.desired_tool_pose_operational[0] = pose
        self._hold_quat = np.array(pose[3:], dtype=np.float64)  # the orientation of position-only windows
        self._in.desired_twist_operational[:] = 0.0
        if self._null_space:
            self._in.joint_q_des_null[:] = q0
            self._in.joint_qd_des_null[:] = 0.0

    def _target(self, reference):
        """(position (3,), velocity (3,), orientation) of knot 0 of a ReferenceWindow or of a flat
        (6 n,) [x, y, z, ...]-per-knot reference spaced dt; orientation None (hold the reset
        orientation: a flat reference, a position-only window) or (quaternion (x, y, z, w),
        angular velocity (3,) [rad/s] world frame, of the rotation from knot 0 to knot 1)."""
        if isinstance(reference, ReferenceWindow):
            p = reference.positions
            if reference.velocities is not None:
                v = reference.velocities[0]
            else:
                v = (p[1] - p[0]) / reference.knot_dt if len(p) > 1 else np.zeros(3)
            r = reference.orientations
            if r is None:
                return p[0], v, None
            q = rotvec_to_quat(r[:2])
            w = np.zeros(3)
            if len(q) > 1:  # R1 R0^T as a rotation vector over the knot spacing
                w = quat_to_rotvec(quat_multiply(q[1], q[0] * [-1.0, -1.0, -1.0, 1.0])) / reference.knot_dt
            return p[0], v, (q[0], w)
        ref = np.asarray(reference, dtype=np.float64).reshape(-1, 6)[:, :3]
        v = (ref[1] - ref[0]) / self.dt if len(ref) > 1 else np.zeros(3)
        return ref[0], v, None

    def step(self, x_measured, reference, dt_elapsed=None, budget_s=None) -> StepResult:
        tic = time.perf_counter()
        x = state_vector(x_measured, self.nx, "x_measured")   # a MeasuredState as it is (checked once)
        p, v, rot = self._target(reference)
        inp = self._in
        inp.joint_q[:] = x[:self.nu]
        inp.joint_qd[:] = x[self.nu:]
        inp.desired_tool_pose_operational[0, :3] = p
        inp.desired_twist_operational[0, :3] = v
        inp.desired_tool_pose_operational[0, 3:] = self._hold_quat if rot is None else rot[0]
        inp.desired_twist_operational[0, 3:] = 0.0 if rot is None else rot[1]
        t0 = time.perf_counter()
        self.osc.step(inputs=inp, outputs=self._out, dt=self.dt)
        solve = time.perf_counter() - t0
        u = self._out.joint_f.copy()
        return StepResult(u=u, plan=None, stats=PlannerStats(solve_s=solve, wall_s=time.perf_counter() - tic))
