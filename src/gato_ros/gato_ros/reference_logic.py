"""ROS-free logic of the reference node: a thin adapter from the reference schema
(gato_ros.params.REFERENCE) to the core's curves (:mod:`gato.references`, each defined
once there).

Modes:

- ``fig8``: :class:`gato.references.Figure8` centred at the EE position at ``q0``
  (half-amplitudes ``fig8_amplitude_x`` / ``_z``, plane rotated by ``fig8_theta`` about
  world z, period ``fig8_period_s``).
- ``goals``: :class:`gato.references.GoalSequence` from the EE position at q0, ``goal_hold_s``
  per goal, minimum-jerk ramps of ``goal_ramp_s``, repeated. Goals come from the ``goals``
  parameter, or from :func:`gato.tasks.pickplace_scenarios` when ``goal_seed`` >= 0.
- ``hold``: :class:`gato.references.Hold` at the EE position at q0.

Orientation (issue 30, ``orientation``): ``none`` (position-only windows), ``tool_down`` (a
constant orientation, any mode: the tool z axis along world -z, its x axis the horizontal
heading of the EE's x axis at q0, so an arm whose EE points down at q0 is not asked to spin
its wrist half a turn to match :data:`gato.core.poses.TOOL_DOWN`'s heading; in goals mode it
is reached as the positions are: slerped from the EE orientation at q0 on the first goal's
minimum-jerk ramp, R0 exp(s log(R0^T R_down)), then held) or ``sweep`` (fig8
mode only: :class:`gato.core.poses.PoseFigure8` with that tool-down base, swinging +/-
``sweep_deg`` about a horizontal axis chosen by :func:`gato.core.sweep_axis.choose_sweep_axis`,
the rule of bench/bench_pose_fig8.py's protocol ``clear``: of 8 horizontal axes (every 22.5 deg
from the figure plane's), one whose exact-IK pose path from q0 over one period keeps 0.1 rad
inside the solver's joint box, the one asking the least joint speed; none: the one with the most
clearance; ``sweep_axis`` holds the choice).

A window stamped t holds ``n_knots`` targets at t + k * knot_dt (metres, world frame; with an
orientation, rotation vectors [rad], world frame, which gato_msgs/EEReference carries as
quaternions).
"""
from __future__ import annotations

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf
from gato.sim import scenarios as tasks
from gato.core.poses import PoseFigure8, PoseReference
from gato.core.sweep_axis import choose_sweep_axis
from gato.core.references import Figure8, GoalSequence, Hold, min_jerk  # noqa: F401  (min_jerk: re-exported)

from . import params as schema
from .types import ReferenceWindow, ns_to_sec

__all__ = ["ReferenceLogic", "min_jerk"]


class ReferenceLogic:
    """Args: config: values of the reference schema; missing names take their defaults.
    ``reference``: the core curve (a gato.references.Reference); ``start`` (3,) m: the EE
    position at q0; ``goals`` (G, 3) m (empty outside ``goals`` mode); ``sweep_axis``: the
    orientation sweep's axis (a gato.core.sweep_axis.SweepAxis; None unless orientation sweep)."""

    def __init__(self, config: dict):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.REFERENCE, config, "reference")
        self.cfg = cfg
        from gato.robots.frames import EEKinematics

        ee = robot_info(robot)["ee_frame"]
        kin = EEKinematics(robot_urdf(robot), ee)
        q0 = np.asarray(cfg["q0"], dtype=np.float64)
        if q0.shape != (kin.model.nq,):
            raise ValueError(f"q0: expected {kin.model.nq} joint positions [rad], got {q0.size}")
        self.start = kin.ee_pos(q0)
        self.tool_down = _tool_down_at(kin, q0)     # (3,) rad, world frame
        self.start_rot = _rotvec_at(kin, q0)        # (3,) rad, world frame: the EE orientation at q0
        self.goals = np.zeros((0, 3))
        self.sweep_axis = None
        if cfg["mode"] == "goals":
            if cfg["goal_seed"] >= 0:
                g = tasks.pickplace_scenarios(kin.model, robot, 1, seed=cfg["goal_seed"], ee_frame=ee)[0]["goals"]
            else:
                g = np.asarray(cfg["goals"], dtype=np.float64)
                if g.size == 0 or g.size % 3:
                    raise ValueError(f"goals: expected a flat list of [x, y, z] triples [m], got {g.size} values")
            self.goals = np.asarray(g, dtype=np.float64).reshape(-1, 3)
            self.reference = GoalSequence(self.goals, cfg["goal_hold_s"], cfg["goal_ramp_s"], self.start)
        elif cfg["mode"] == "fig8" and cfg["orientation"] == "sweep":
            def make(axis):
                return PoseFigure8(self.start, cfg["fig8_amplitude_x"], cfg["fig8_amplitude_z"], cfg["fig8_theta"],
                                   cfg["fig8_period_s"], base=self.tool_down, sweep_deg=cfg["sweep_deg"], axis=axis)

            # the sweep axis by the rule bench/bench_pose_fig8.py's protocol "clear" uses
            self.sweep_axis = choose_sweep_axis(kin.model, kin.fid, q0, make, cfg["fig8_period_s"], cfg["fig8_theta"])
            self.reference = make(self.sweep_axis.axis)
        elif cfg["mode"] == "fig8":
            self.reference = Figure8(self.start, cfg["fig8_amplitude_x"], cfg["fig8_amplitude_z"], cfg["fig8_theta"],
                                     cfg["fig8_period_s"])
        else:
            self.reference = Hold(self.start)
        if cfg["orientation"] == "sweep" and cfg["mode"] != "fig8":
            raise ValueError(f"orientation: 'sweep' swings the tool along the figure-8 (mode fig8); mode "
                             f"{cfg['mode']!r} takes 'none' or 'tool_down'")
        if cfg["orientation"] == "tool_down" and cfg["mode"] == "goals":
            # as the positions ramp from the EE at q0 to the first goal, the orientation slerps from
            # the EE's at q0 to tool down on the same minimum-jerk ramp, then holds it
            self.reference = PoseReference(self.reference, _slerp_in(self.start_rot, self.tool_down,
                                                                      min(cfg["goal_ramp_s"], cfg["goal_hold_s"])))
        elif cfg["orientation"] == "tool_down":
            self.reference = PoseReference(self.reference, self.tool_down)

    def positions(self, t) -> np.ndarray:
        """(T, 3) EE targets [m] at times ``t`` (T,) [s]."""
        return self.reference.positions(t)

    def orientations(self, t) -> np.ndarray | None:
        """(T, 3) EE orientation targets (rotation vectors, world frame [rad]) at times ``t`` (T,)
        [s], or None (``orientation`` none)."""
        return self.reference.orientations(t)

    def window(self, t_ns: int) -> ReferenceWindow:
        """The window stamped ``t_ns``: ``n_knots`` targets at t + k * knot_dt (with their
        orientations unless ``orientation`` is none)."""
        c = self.cfg
        t = ns_to_sec(t_ns) + c["knot_dt"] * np.arange(c["n_knots"])
        return ReferenceWindow(int(t_ns), c["knot_dt"], self.positions(t), orientations=self.orientations(t))


def _rotvec_at(kin, q0) -> np.ndarray:
    """(3,) rotation vector [rad], world frame: the EE frame's orientation at ``q0``."""
    import pinocchio as pin

    pin.forwardKinematics(kin.model, kin.data, q0)
    return np.asarray(pin.log3(pin.updateFramePlacement(kin.model, kin.data, kin.fid).rotation), dtype=np.float64)


def _slerp_in(r0, r1, ramp_s: float):
    """Orientation targets ``t (T,) [s] -> (T, 3)`` rotation vectors [rad]: R0 exp(s log(R0^T R1))
    with s = min_jerk(t / ramp_s) (the goals' position profile), R1 from ``ramp_s`` on (at once
    when ``ramp_s`` is 0)."""
    import pinocchio as pin

    R0 = pin.exp3(np.asarray(r0, dtype=np.float64))
    w = np.asarray(pin.log3(R0.T @ pin.exp3(np.asarray(r1, dtype=np.float64))), dtype=np.float64)
    r1 = np.asarray(r1, dtype=np.float64)

    def at(t):
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        s = np.ones_like(t) if ramp_s <= 0 else min_jerk(np.clip(t / ramp_s, 0.0, 1.0))
        return np.array([r1 if sk >= 1.0 else np.asarray(pin.log3(R0 @ pin.exp3(sk * w)), dtype=np.float64)
                         for sk in s]).reshape(-1, 3)

    return at


def _tool_down_at(kin, q0) -> np.ndarray:
    """(3,) rotation vector [rad], world frame: tool z along world -z, tool x the horizontal
    direction of the EE x axis at ``q0`` (world x when that axis is vertical)."""
    import pinocchio as pin

    pin.forwardKinematics(kin.model, kin.data, q0)
    x = np.array(pin.updateFramePlacement(kin.model, kin.data, kin.fid).rotation[:, 0], dtype=np.float64)
    x[2] = 0.0
    n = float(np.linalg.norm(x))
    x = x / n if n > 1e-6 else np.array([1.0, 0.0, 0.0])
    z = np.array([0.0, 0.0, -1.0])
    R = np.column_stack([x, np.cross(z, x), z])
    return np.asarray(pin.log3(R), dtype=np.float64)
