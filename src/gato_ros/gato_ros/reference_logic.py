"""ROS-free logic of the reference node: EE reference windows from gato.tasks.

Modes (parameters in gato_ros.params.REFERENCE):

- ``fig8``: the figure-8 of :func:`gato.tasks.figure8` (Gerono lemniscate, centre =
  the EE position at ``q0``, half-amplitudes ``fig8_amplitude_x`` / ``_z``, plane
  rotated by ``fig8_theta`` about world z, period ``fig8_period_s``), evaluated at
  arbitrary times: p(t) = c + A_x sin(w t) h + A_z sin(2 w t) z, w = 2 pi / period.
- ``goals``: EE goals visited in sequence and repeated, ``goal_hold_s`` each; the
  first ``goal_ramp_s`` of each segment travel from the previous goal (at t = 0:
  from the EE position at q0) along a minimum-jerk profile. Goals come from the
  ``goals`` parameter, or from :func:`gato.tasks.pickplace_scenarios` when
  ``goal_seed`` >= 0.
- ``hold``: the EE position at q0.

A window stamped t holds ``n_knots`` targets at t + k * knot_dt (metres, world frame).
"""
from __future__ import annotations

import math

import numpy as np

import gato
from gato import tasks

from . import params as schema
from .types import ReferenceWindow, ns_to_sec

__all__ = ["ReferenceLogic", "min_jerk"]


def min_jerk(s):
    """Minimum-jerk blend 10 s^3 - 15 s^4 + 6 s^5 of s clipped to [0, 1]."""
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)


class ReferenceLogic:
    """Args: config: values of the reference schema; missing names take their defaults."""

    def __init__(self, config: dict):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.REFERENCE, config, "reference")
        self.cfg = cfg
        import pinocchio as pin

        model = pin.buildModelFromUrdf(str(gato.robot_urdf(robot)))
        data = model.createData()
        ee = gato.robot_info(robot)["ee_frame"]
        q0 = np.asarray(cfg["q0"], dtype=np.float64)
        if q0.shape != (model.nq,):
            raise ValueError(f"q0: expected {model.nq} joint positions [rad], got {q0.size}")
        pin.forwardKinematics(model, data, q0)
        self.start = pin.updateFramePlacement(model, data, model.getFrameId(ee)).translation.copy()
        if cfg["mode"] == "goals":
            if cfg["goal_seed"] >= 0:
                g = tasks.pickplace_scenarios(model, robot, 1, seed=cfg["goal_seed"], ee_frame=ee)[0]["goals"]
            else:
                g = np.asarray(cfg["goals"], dtype=np.float64)
                if g.size == 0 or g.size % 3:
                    raise ValueError(f"goals: expected a flat list of [x, y, z] triples [m], got {g.size} values")
            self.goals = np.asarray(g, dtype=np.float64).reshape(-1, 3)
        else:
            self.goals = np.zeros((0, 3))

    # ------------------------------------------------------------------ curves
    def positions(self, t) -> np.ndarray:
        """(T, 3) EE targets [m] at times ``t`` (T,) [s]."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        c = self.cfg
        if c["mode"] == "hold":
            return np.tile(self.start, (t.size, 1))
        if c["mode"] == "fig8":
            w = 2.0 * math.pi / c["fig8_period_s"]
            h = np.array([math.cos(c["fig8_theta"]), math.sin(c["fig8_theta"]), 0.0])
            return (self.start + np.outer(c["fig8_amplitude_x"] * np.sin(w * t), h)
                    + np.outer(c["fig8_amplitude_z"] * np.sin(2.0 * w * t), [0.0, 0.0, 1.0]))
        hold, ramp = c["goal_hold_s"], min(c["goal_ramp_s"], c["goal_hold_s"])
        n = len(self.goals)
        seg = np.floor(np.maximum(t, 0.0) / hold).astype(int)
        tau = np.maximum(t, 0.0) - seg * hold
        target = self.goals[seg % n]
        prev = np.where((seg == 0)[:, None], self.start[None, :], self.goals[(seg - 1) % n])
        s = min_jerk(tau / ramp) if ramp > 0 else np.ones_like(tau)
        return prev + s[:, None] * (target - prev)

    def window(self, t_ns: int) -> ReferenceWindow:
        """The window stamped ``t_ns``: ``n_knots`` targets at t + k * knot_dt."""
        c = self.cfg
        t = ns_to_sec(t_ns) + c["knot_dt"] * np.arange(c["n_knots"])
        return ReferenceWindow(int(t_ns), c["knot_dt"], self.positions(t))
