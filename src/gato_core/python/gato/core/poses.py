"""EE pose references: a position reference of :mod:`gato.core.references` with a target
orientation per time (issue 30).

    PoseReference(Figure8(...), TOOL_DOWN)     # any position curve, a constant orientation
    tool_down(Hold(p))                         # the same, tool z axis pointing down
    PoseFigure8(centre, A_x, A_z, sweep_deg=30)  # the figure-8, the orientation swinging +/-30 deg

Their windows carry ``orientations`` (rotation vectors, world frame) and the reference's
``orientation_weight`` (None: the planner's own); the planners then track the pose
(BSQP: the orientation cost term, slots [3:6] of the solver reference; OSC: the desired tool
quaternion; sampling: an EE frame-quaternion term). Units: metres, seconds, radians; rotation
vectors theta * axis (theta in [0, pi]), quaternions (x, y, z, w). numpy only.
"""
from __future__ import annotations

import math

import numpy as np

from .references import (Figure8, Reference, ReferenceWindow, _positive, _times, orientations_of, quat_multiply,
                         quat_to_rotvec, rotvec_to_quat)

__all__ = ["PoseReference", "PoseFigure8", "tool_down", "TOOL_DOWN"]

#: Tool-down orientation (rotation vector [rad]): the tool z axis along world -z, its x axis along
#: world x (R = diag(1, -1, -1), a half turn about world x).
TOOL_DOWN = np.array([math.pi, 0.0, 0.0])


def _weight(w):
    return None if w is None else _positive(w, "orientation_weight", "[1/rad^2]", zero_ok=True)


class PoseReference(Reference):
    """A position reference with a target orientation.

    Args:
        position: a :class:`gato.core.references.Reference` (its positions, velocities, coverage
            and end are this reference's).
        orientation: the target orientation, constant ((3,) rotation vector [rad] or (4,) unit
            quaternion (x, y, z, w), world frame), or a callable ``t (T,) [s] -> (T, 3)`` rotation
            vectors / (T, 4) quaternions.
        orientation_weight: None (the planner's own) or the weight [1/rad^2] its windows carry.

    A window keeps the position reference's own window (e.g. a SampledTrajectory's exact slice)
    and adds the orientations at the window's knot times.
    """

    def __init__(self, position, orientation, orientation_weight=None):
        if not isinstance(position, Reference):
            raise ValueError(f"position: expected a gato.references.Reference, got {type(position).__name__}")
        self.position = position
        if callable(orientation):
            self._fn, self._const = orientation, None
        else:
            self._fn, self._const = None, orientations_of(orientation, "orientation", 1)[0]
        self.orientation_weight = _weight(orientation_weight)

    def positions(self, t) -> np.ndarray:
        return self.position.positions(t)

    def velocities(self, t):
        return self.position.velocities(t)

    def orientations(self, t) -> np.ndarray:
        t = _times(t)
        if self._fn is None:
            return np.tile(self._const, (t.size, 1))
        return orientations_of(self._fn(t), "orientation", t.size)

    def window(self, t0: float, N: int, dt: float) -> ReferenceWindow:
        w = self.position.window(t0, N, dt)
        t = float(t0) + w.knot_dt * np.arange(w.n_knots)
        return ReferenceWindow(w.stamp_ns, w.knot_dt, w.positions, w.frame_id, w.velocities,
                               self.orientations(t), self.orientation_weight)

    def covers(self, t0: float, N: int, dt: float) -> bool:
        return self.position.covers(t0, N, dt)

    def done(self, t: float) -> bool:
        return self.position.done(t)


def tool_down(position, orientation_weight=None) -> PoseReference:
    """``position`` (a Reference) with the constant tool-down orientation :data:`TOOL_DOWN`."""
    return PoseReference(position, TOOL_DOWN, orientation_weight)


class PoseFigure8(PoseReference):
    """The figure-8 of :class:`gato.core.references.Figure8` with the orientation sweeping about
    a horizontal axis: R(t) = Rot(a, s sin(w t)) R_base, w = 2 pi / period (one sweep per
    figure-8, starting at R_base at the crossing point), world-frame axis a.

    Args: centre, A_x, A_z, theta, period as :class:`Figure8`; base: R_base ((3,) rotation
    vector or (4,) quaternion; default :data:`TOOL_DOWN`); sweep_deg: the sweep's amplitude s
    [deg], 0 <= s <= 90 (default 30); axis: the sweep axis (3,), horizontal (z = 0), default the
    figure's horizontal axis (cos theta, sin theta, 0); orientation_weight as PoseReference.
    """

    def __init__(self, centre, A_x, A_z, theta=0.0, period=4.0, *, base=TOOL_DOWN, sweep_deg=30.0, axis=None,
                 orientation_weight=None):
        fig = Figure8(centre, A_x, A_z, theta, period)
        s = _positive(sweep_deg, "sweep_deg", "deg", zero_ok=True)
        if s > 90.0:
            raise ValueError(f"sweep_deg: expected an amplitude in [0, 90] deg, got {sweep_deg!r}")
        a = np.array(fig._h if axis is None else axis, dtype=np.float64)
        if a.shape != (3,) or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-9 \
                or abs(a[2]) > 1e-9 * np.linalg.norm(a):
            raise ValueError(f"axis: expected a finite, non-zero horizontal axis (3,) with z = 0, got {axis!r}")
        self.sweep, self.axis = math.radians(s), a / np.linalg.norm(a)
        self.base = orientations_of(base, "base", 1)[0]
        self._q_base = rotvec_to_quat(self.base)
        self._w = fig._w
        super().__init__(fig, self._sweep, orientation_weight)

    def angles(self, t) -> np.ndarray:
        """(T,) sweep angle [rad] at times t [s]."""
        return self.sweep * np.sin(self._w * _times(t))

    def _sweep(self, t) -> np.ndarray:
        q = rotvec_to_quat(np.outer(self.angles(t), self.axis))
        return quat_to_rotvec(quat_multiply(q, np.broadcast_to(self._q_base, q.shape)))
