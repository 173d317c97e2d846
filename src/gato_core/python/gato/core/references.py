"""End-effector references: one protocol, each curve defined once.

A reference is an EE position (optionally velocity and orientation) as a function of time::

    ref.positions(t)          # (T, 3) m at times t (T,) s
    ref.velocities(t)         # (T, 3) m/s, or None when the reference has none
    ref.orientations(t)       # (T, 3) rotation vectors [rad], or None (position only)
    ref.window(t0, N, dt)     # ReferenceWindow: N knots at t0 + j*dt (j = 0..N-1)
    ref.covers(t0, N, dt)     # False once such a window would run past the data
    ref.done(t)               # the reference has nothing more to say at t

The curves: :class:`Figure8` (Gerono lemniscate), :class:`MinJerkSegment` (one
minimum-jerk move between two points), :class:`GoalSequence` (goals visited on a
schedule, minimum-jerk ramps between them), :class:`Hold` (one point) and
:class:`SampledTrajectory` (a recorded or precomputed path on a uniform grid).
Everything that needs one of these (the closed-loop driver, the gym environment, the
ROS reference node, the benchmarks, the autotuner, gato.tasks) builds it from here.

:class:`ReferenceWindow` is what crosses the seams (gato_msgs/EEReference without
the ROS types): N knots on an integer-nanosecond stamp. Solvers that take the flat
(6N,) ``[x, y, z, rx, ry, rz]``-per-knot layout get it from
:meth:`ReferenceWindow.solver_layout`: slots [3:6] are the knot's target orientation as a
rotation vector (world frame, the log map of the target rotation; issue 30) when the window
carries orientations, else zeros (the reference API's unused slots, position only). Pose
curves (a figure-8 with a sweeping orientation, a constant tool-down pose) are in
:mod:`gato.core.poses`.

Rotations: rotation vectors r = theta * axis with theta = |r| in [0, pi] [rad]; quaternions
(x, y, z, w), unit norm (:func:`quat_to_rotvec`, :func:`rotvec_to_quat`).

This module imports numpy only (the benchmark peers load it by file path, without
the rest of gato). Units: metres, seconds, world frame.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["ReferenceWindow", "Reference", "Figure8", "MinJerkSegment", "GoalSequence", "Hold",
           "SampledTrajectory", "min_jerk", "min_jerk_rate", "sec_to_ns", "ns_to_sec", "NS_PER_S",
           "quat_to_rotvec", "rotvec_to_quat", "quat_multiply", "orientations_of", "QUAT_UNIT_TOL"]

NS_PER_S = 1_000_000_000
_EPS = 1e-9  # knots: absorbs float error in t / dt (0.3 / 0.1 = 2.9999999999999996)
#: Largest | |q| - 1 | a quaternion may have (float32 round trips and hand-typed 4-digit values pass;
#: a scaled or half-normalized one does not).
QUAT_UNIT_TOL = 1e-3
_PI_TOL = 1e-9  # rotation vectors: norm <= pi + this (the log map's own rounding at theta = pi)


def sec_to_ns(t: float) -> int:
    """Seconds -> integer nanoseconds (rounded to the nearest ns)."""
    return int(round(float(t) * NS_PER_S))


def ns_to_sec(t_ns: int) -> float:
    """Integer nanoseconds -> seconds."""
    return int(t_ns) / NS_PER_S


def _points(v, name: str, n: int | None = None, rows: str = "T") -> np.ndarray:
    """(T, 3) float64 copy of v, validated (finite, three columns, n rows when given)."""
    try:
        p = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected (T, 3) positions [m], got {type(v).__name__}") from None
    if p.ndim == 1 and p.size % 3 == 0 and p.size > 0:
        p = p.reshape(-1, 3)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 1 or (n is not None and p.shape[0] != n):
        want = f"({n}, 3)" if n is not None else f"({rows} >= 1, 3)"
        raise ValueError(f"{name}: expected shape {want} [m], got {np.shape(v)}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return p


def _vector(v, name: str, n: int | None = None, unit: str = "") -> np.ndarray:
    """(n,) float64 copy of v, validated: a numeric vector of n finite entries (any length when n
    is None); ValueError naming ``name``, the expected shape and ``unit``."""
    want = f"shape ({'n' if n is None else n},)" + (f" {unit}" if unit else "")
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a numeric vector of {want}, got {type(v).__name__}") from None
    if a.ndim != 1 or (n is not None and a.shape != (n,)):
        raise ValueError(f"{name}: expected {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.isfinite(a))[0])
        raise ValueError(f"{name}: contains NaN or Inf (first at index {bad}); expected finite values of {want}")
    return a


def _point(v, name: str) -> np.ndarray:
    return _points(v, name, 1)[0]


def _positive(v, name: str, unit: str, zero_ok=False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) \
            or v < 0 or (v == 0 and not zero_ok):
        raise ValueError(f"{name}: expected a finite value {'>=' if zero_ok else '>'} 0 {unit}, got {v!r}")
    return float(v)


def _horizon(N) -> int:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
        raise ValueError(f"N: expected an integer number of knots >= 1, got {N!r}")
    return int(N)


def _times(t) -> np.ndarray:
    return np.atleast_1d(np.asarray(t, dtype=np.float64))


# ----------------------------------------------------------------- rotations
def quat_multiply(a, b) -> np.ndarray:
    """Hamilton product a * b of (T, 4) (or (4,)) quaternions (x, y, z, w)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv),
                           aw * bw - np.sum(av * bv, axis=-1, keepdims=True)], axis=-1)


def quat_to_rotvec(q) -> np.ndarray:
    """Rotation vectors (T, 3) [rad], norm in [0, pi], of unit quaternions (T, 4) (x, y, z, w)
    (or (4,) -> (3,)); q and -q give the same rotation vector (up to the sign choice at pi)."""
    q = np.asarray(q, dtype=np.float64)
    q = np.where(q[..., 3:] < 0.0, -q, q)  # w >= 0: the angle in [0, pi]
    s = np.linalg.norm(q[..., :3], axis=-1, keepdims=True)
    theta = 2.0 * np.arctan2(s, q[..., 3:])
    # theta / sin(theta / 2); its limit 2 / w near the identity (s -> 0)
    scale = np.where(s > 1e-12, theta / np.where(s > 1e-12, s, 1.0), 2.0 / np.maximum(q[..., 3:], 1e-300))
    return q[..., :3] * scale


def rotvec_to_quat(r) -> np.ndarray:
    """Unit quaternions (T, 4) (x, y, z, w) of rotation vectors (T, 3) [rad] (or (3,) -> (4,))."""
    r = np.asarray(r, dtype=np.float64)
    th = np.linalg.norm(r, axis=-1, keepdims=True)
    # sin(theta / 2) / theta; its limit 1/2 - theta^2 / 48 near 0
    k = np.where(th > 1e-6, np.sin(0.5 * th) / np.where(th > 1e-6, th, 1.0), 0.5 - th * th / 48.0)
    return np.concatenate([r * k, np.cos(0.5 * th)], axis=-1)


def orientations_of(v, name: str, n: int | None = None) -> np.ndarray:
    """(T, 3) rotation vectors [rad] from (T, 3) rotation vectors (norm <= pi) or (T, 4) unit
    quaternions (x, y, z, w) (a single (3,) / (4,) is one row), validated; ValueError naming
    ``name``: wrong shape, NaN / Inf, a quaternion whose norm is off 1 by more than
    :data:`QUAT_UNIT_TOL`, a rotation vector longer than pi."""
    try:
        a = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected (T, 3) rotation vectors [rad] or (T, 4) quaternions (x, y, z, w), "
                         f"got {type(v).__name__}") from None
    if a.ndim == 1 and a.shape[0] in (3, 4):
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] not in (3, 4) or a.shape[0] < 1 or (n is not None and a.shape[0] != n):
        rows = "T >= 1" if n is None else str(n)
        raise ValueError(f"{name}: expected shape ({rows}, 3) rotation vectors [rad] or ({rows}, 4) quaternions "
                         f"(x, y, z, w), got {np.shape(v)}")
    if not np.all(np.isfinite(a)):
        k = int(np.flatnonzero(~np.all(np.isfinite(a), axis=1))[0])
        raise ValueError(f"{name}: row {k} contains NaN or Inf")
    norm = np.linalg.norm(a, axis=1)
    if a.shape[1] == 4:
        bad = np.abs(norm - 1.0) > QUAT_UNIT_TOL
        if np.any(bad):
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}: quaternion {k} has norm {norm[k]:.6g}; expected a unit quaternion "
                             f"(x, y, z, w), |norm - 1| <= {QUAT_UNIT_TOL}")
        return quat_to_rotvec(a / norm[:, None])
    if np.any(norm > math.pi + _PI_TOL):
        k = int(np.argmax(norm))
        raise ValueError(f"{name}: rotation vector {k} has norm {norm[k]:.6g} rad > pi (expected theta * axis, "
                         f"theta in [0, pi])")
    return a


# ----------------------------------------------------------------- the window type
@dataclass
class ReferenceWindow:
    """N EE targets on a time grid (gato_msgs/EEReference).

    ``positions`` (n_knots, 3) [m]: knot k is the target at ``stamp_ns + k * knot_dt``;
    ``knot_dt`` [s] > 0; ``frame_id`` the frame of the positions ("" = the world frame of
    the robot description); ``velocities`` None or (n_knots, 3) [m/s] at the same knots.

    ``orientations`` None (position only: every planner tracks the position alone, exactly as
    without the field) or the target EE orientation per knot, world frame: (n_knots, 3)
    rotation vectors [rad] (norm <= pi) or (n_knots, 4) unit quaternions (x, y, z, w), stored
    as rotation vectors. ``orientation_weight`` None (the planner's own orientation weight) or
    a number >= 0 [1/rad^2]: the orientation weight of every knot of the optimizing planners
    (BSQP rot_cost and N_rot_cost; docs/solver_method.md); only with orientations.
    """

    stamp_ns: int
    knot_dt: float
    positions: np.ndarray
    frame_id: str = ""
    velocities: np.ndarray | None = None
    orientations: np.ndarray | None = None
    orientation_weight: float | None = None

    def __post_init__(self):
        self.positions = _points(self.positions, "positions", rows="n_knots")
        if self.velocities is not None:
            self.velocities = _points(self.velocities, "velocities", self.positions.shape[0])
        if self.orientations is not None:
            self.orientations = orientations_of(self.orientations, "orientations", self.positions.shape[0])
        if self.orientation_weight is not None:
            if self.orientations is None:
                raise ValueError("orientation_weight: given without orientations (a position-only window has no "
                                 "orientation to weigh)")
            self.orientation_weight = _positive(self.orientation_weight, "orientation_weight", "[1/rad^2]",
                                                zero_ok=True)
        if isinstance(self.knot_dt, bool) or not isinstance(self.knot_dt, (int, float, np.floating)) \
                or not math.isfinite(self.knot_dt) or self.knot_dt <= 0:
            raise ValueError(f"knot_dt: expected a finite spacing > 0 s, got {self.knot_dt!r}")
        self.knot_dt = float(self.knot_dt)
        self.stamp_ns = int(self.stamp_ns)

    @property
    def n_knots(self) -> int:
        return int(self.positions.shape[0])

    @property
    def end_ns(self) -> int:
        """Time of the last knot [ns]."""
        return self.stamp_ns + sec_to_ns((self.n_knots - 1) * self.knot_dt)

    def _knots(self, t_ns: int, n: int, dt: float):
        """(idx, nxt, frac) of the query times ``t_ns + j * dt``: the knot at or before each time,
        the one after it and the fraction between them (0 outside the window: clamped)."""
        off_ns = np.int64(int(t_ns) - self.stamp_ns)
        # Knot index in exact integer ns where possible: (off + j*dt) / knot_dt.
        dt_ns, kdt_ns = sec_to_ns(dt), sec_to_ns(self.knot_dt)
        num = off_ns + np.arange(int(n), dtype=np.int64) * dt_ns
        idx = np.clip(num // kdt_ns, 0, self.n_knots - 1)
        rem = num - idx * kdt_ns
        frac = np.where((num >= 0) & (idx < self.n_knots - 1), rem / kdt_ns, 0.0)
        return idx, np.minimum(idx + 1, self.n_knots - 1), frac

    def sample(self, t_ns: int, n: int, dt: float) -> np.ndarray:
        """(n, 3) targets at times ``t_ns + j * dt`` (j = 0..n-1): linear interpolation between
        knots, clamped to the first / last knot outside the window.

        Exact copies of the knots when the query times fall on them (the lockstep case:
        same stamp, same spacing), so resampling adds no rounding there.
        """
        idx, nxt, frac = self._knots(t_ns, n, dt)
        p = self.positions
        out = p[idx] + frac[:, None] * (p[nxt] - p[idx])
        exact = frac == 0.0
        out[exact] = p[idx[exact]]
        return out

    def sample_orientations(self, t_ns: int, n: int, dt: float) -> np.ndarray | None:
        """(n, 3) target rotation vectors [rad] at times ``t_ns + j * dt``, or None for a
        position-only window: spherical interpolation (constant angular velocity) between knots,
        clamped outside the window, exact copies on the knots (as :meth:`sample`)."""
        if self.orientations is None:
            return None
        idx, nxt, frac = self._knots(t_ns, n, dt)
        r = self.orientations
        out = r[idx].copy()
        mid = frac != 0.0
        if np.any(mid):
            q0, q1 = rotvec_to_quat(r[idx[mid]]), rotvec_to_quat(r[nxt[mid]])
            rel = quat_multiply(q0 * [-1.0, -1.0, -1.0, 1.0], q1)  # q0^-1 q1
            out[mid] = quat_to_rotvec(quat_multiply(q0, rotvec_to_quat(frac[mid, None] * quat_to_rotvec(rel))))
        return out

    def solver_reference(self, t_ns: int, N: int, dt: float) -> np.ndarray:
        """(6N,) solver reference ``[x, y, z, rx, ry, rz]`` per knot, sampled at the solve time
        ``t_ns`` with the solver's knot spacing ``dt`` [s] (see :meth:`sample`,
        :meth:`sample_orientations`); the rotation slots are zeros for a position-only window."""
        return _flat6(self.sample(t_ns, N, dt), self.sample_orientations(t_ns, N, dt))

    def solver_layout(self) -> np.ndarray:
        """(6 n_knots,) the knots as they are, ``[x, y, z, rx, ry, rz]`` per knot (the flat layout
        of the reference API; zeros in the rotation slots of a position-only window)."""
        return _flat6(self.positions, self.orientations)


def _flat6(p: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    ref = np.zeros((p.shape[0], 6))
    ref[:, :3] = p
    if r is not None:
        ref[:, 3:] = r
    return ref.ravel()


# ----------------------------------------------------------------- the protocol
class Reference(ABC):
    """Base of the EE references. Subclasses define :meth:`positions` and, when they have
    them, :meth:`velocities`; the window, coverage and end logic is shared."""

    @abstractmethod
    def positions(self, t) -> np.ndarray:
        """(T, 3) targets [m] at times ``t`` (T,) [s]."""

    def velocities(self, t) -> np.ndarray | None:
        """(T, 3) target velocities [m/s] at times ``t`` (T,) [s], or None (positions only)."""
        return None

    def orientations(self, t) -> np.ndarray | None:
        """(T, 3) target EE orientations (rotation vectors, world frame [rad]) at times ``t``
        (T,) [s], or None (position only: the curves of this module; :mod:`gato.core.poses`)."""
        return None

    #: The orientation weight its windows carry (None: the planner's own; see ReferenceWindow).
    orientation_weight: float | None = None

    def window(self, t0: float, N: int, dt: float) -> ReferenceWindow:
        """N knots at times ``t0 + j * dt`` [s] (j = 0..N-1), stamped t0."""
        N = _horizon(N)
        dt = _positive(dt, "dt", "s")
        t = float(t0) + dt * np.arange(N)
        r = self.orientations(t)
        return ReferenceWindow(sec_to_ns(t0), dt, self.positions(t), velocities=self.velocities(t), orientations=r,
                               orientation_weight=None if r is None else self.orientation_weight)

    def covers(self, t0: float, N: int, dt: float) -> bool:
        """True while a window (t0, N, dt) lies inside the reference's data (analytic curves:
        always)."""
        return True

    def done(self, t: float) -> bool:
        """True once the reference has run out at time t (analytic curves: never)."""
        return False


class Figure8(Reference):
    """Figure-8 (Gerono lemniscate) in a vertical plane.

    p(t) = centre + A_x sin(w t) h + A_z sin(2 w t) z,  w = 2 pi / period,
    h = (cos theta, sin theta, 0) the plane's horizontal axis (theta = 0: the x-z plane,
    pi/2: the y-z plane), z the world vertical. It starts at its crossing point, the centre.

    Args: centre (3,) [m]; A_x, A_z half-amplitudes [m]; theta [rad]; period [s] > 0.
    """

    def __init__(self, centre, A_x, A_z, theta=0.0, period=4.0):
        self.centre = _point(centre, "centre")
        self.A_x, self.A_z, self.theta = float(A_x), float(A_z), float(theta)
        if not all(math.isfinite(v) for v in (self.A_x, self.A_z, self.theta)):
            raise ValueError(f"Figure8: A_x, A_z and theta must be finite, got {A_x!r}, {A_z!r}, {theta!r}")
        self.period = _positive(period, "period", "s")
        self._w = 2.0 * math.pi / self.period
        self._h = np.array([math.cos(self.theta), math.sin(self.theta), 0.0])

    def positions(self, t) -> np.ndarray:
        t, w = _times(t), self._w
        return (self.centre + np.outer(self.A_x * np.sin(w * t), self._h)
                + np.outer(self.A_z * np.sin(2.0 * w * t), [0.0, 0.0, 1.0]))

    def velocities(self, t) -> np.ndarray:
        t, w = _times(t), self._w
        return (np.outer(self.A_x * w * np.cos(w * t), self._h)
                + np.outer(2.0 * self.A_z * w * np.cos(2.0 * w * t), [0.0, 0.0, 1.0]))


def min_jerk(s):
    """Minimum-jerk blend 10 s^3 - 15 s^4 + 6 s^5 of s clipped to [0, 1] (0 -> 0, 1 -> 1)."""
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)


def min_jerk_rate(s):
    """d/ds of :func:`min_jerk`: 30 s^2 (1 - s)^2 inside (0, 1), 0 outside."""
    s = np.asarray(s, dtype=np.float64)
    inside = (s > 0.0) & (s < 1.0)
    return np.where(inside, 30.0 * s * s * (1.0 - s) ** 2, 0.0)


class MinJerkSegment(Reference):
    """One minimum-jerk move: ``start`` until ``t_start``, ``goal`` from ``t_start + ramp``.

    p(t) = start + min_jerk((t - t_start) / ramp) (goal - start); ramp = 0 is a step (the goal
    at every time). Args: start, goal (3,) [m]; t_start [s]; ramp [s] >= 0.
    """

    def __init__(self, start, goal, t_start=0.0, ramp=0.0):
        self.start, self.goal = _point(start, "start"), _point(goal, "goal")
        self.t_start = float(t_start)
        self.ramp = _positive(ramp, "ramp", "s", zero_ok=True)

    def positions(self, t) -> np.ndarray:
        t = _times(t)
        if self.ramp > 0:
            a = min_jerk((t - self.t_start) / self.ramp)
            return self.start[None, :] + a[:, None] * (self.goal - self.start)[None, :]
        return np.repeat(self.goal[None, :], t.size, axis=0)

    def velocities(self, t) -> np.ndarray:
        t = _times(t)
        if self.ramp > 0:
            a = min_jerk_rate((t - self.t_start) / self.ramp) / self.ramp
            return a[:, None] * (self.goal - self.start)[None, :]
        return np.zeros((t.size, 3))


class GoalSequence(Reference):
    """Goals visited on a schedule, repeated: goal i is the target over
    [i * hold_s, (i + 1) * hold_s) (modulo the sequence), reached along a minimum-jerk ramp of
    ``ramp_s`` (clipped to hold_s) from the previous goal (for the first segment: ``start``).

    Args: goals (G, 3) [m]; hold_s [s] > 0; ramp_s [s] >= 0; start (3,) [m].
    """

    def __init__(self, goals, hold_s, ramp_s, start):
        self.goals = _points(goals, "goals")
        self.hold_s = _positive(hold_s, "hold_s", "s")
        self.ramp_s = min(_positive(ramp_s, "ramp_s", "s", zero_ok=True), self.hold_s)
        self.start = _point(start, "start")

    def _segments(self, t):
        t = np.maximum(_times(t), 0.0)
        seg = np.floor(t / self.hold_s).astype(int)
        n = len(self.goals)
        prev = np.where((seg == 0)[:, None], self.start[None, :], self.goals[(seg - 1) % n])
        return t - seg * self.hold_s, prev, self.goals[seg % n]

    def positions(self, t) -> np.ndarray:
        tau, prev, target = self._segments(t)
        s = min_jerk(tau / self.ramp_s) if self.ramp_s > 0 else np.ones_like(tau)
        return prev + s[:, None] * (target - prev)

    def velocities(self, t) -> np.ndarray:
        tau, prev, target = self._segments(t)
        if self.ramp_s == 0:
            return np.zeros((tau.size, 3))
        return (min_jerk_rate(tau / self.ramp_s) / self.ramp_s)[:, None] * (target - prev)


class Hold(Reference):
    """One point held forever. Args: point (3,) [m]."""

    def __init__(self, point):
        self.point = _point(point, "point")

    def positions(self, t) -> np.ndarray:
        return np.tile(self.point, (_times(t).size, 1))

    def velocities(self, t) -> np.ndarray:
        return np.zeros((_times(t).size, 3))


class SampledTrajectory(Reference):
    """A path sampled every ``dt``: sample k is the target at ``k * dt`` (a recording, or a
    curve precomputed on the solver's grid).

    A window on the trajectory's own grid (same dt) is a slice of the samples starting at
    sample ``floor(t0 / dt)``, clamped to ``[0, T - N]`` (the last full horizon): exact copies,
    no interpolation. Other spacings interpolate linearly, clamped to the end samples.

    Args: positions (T, 3) [m]; dt [s] > 0; velocities None or (T, 3) [m/s].
    """

    def __init__(self, positions, dt, velocities=None):
        self.samples = _points(positions, "positions")
        self.dt = _positive(dt, "dt", "s")
        self.sample_velocities = None if velocities is None else _points(velocities, "velocities",
                                                                            len(self.samples))
        self.T = len(self.samples)

    @classmethod
    def from_flat(cls, flat, dt, name: str = "trajectory", min_samples: int = 1) -> "SampledTrajectory":
        """From the reference API's flat (6T,) layout (or (T, 6)), ``[x, y, z, 0, 0, 0]`` per sample
        (the orientation slots are unused). ValueError naming ``name`` unless it holds
        T >= min_samples finite samples."""
        try:
            a = np.array(flat, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a flat (6T,) array, got {type(flat).__name__}") from None
        a = a.reshape(-1) if a.ndim == 2 and a.shape[1] == 6 else a
        if a.ndim != 1 or a.size % 6 or a.size < 6 * max(int(min_samples), 1):
            raise ValueError(f"{name}: expected a flat (6T,) trajectory with T >= {min_samples} samples, "
                             f"got shape {np.shape(flat)}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: contains NaN or Inf")
        return cls(a.reshape(-1, 6)[:, :3], dt)

    def index(self, t) -> int:
        """Sample index floor(t / dt) of time t [s] (unclamped)."""
        return int(math.floor(float(t) / self.dt + _EPS))

    def _same_grid(self, dt) -> bool:
        return abs(float(dt) - self.dt) <= 1e-12 * self.dt

    def positions(self, t) -> np.ndarray:
        t = _times(t)
        grid = np.arange(self.T) * self.dt
        return np.stack([np.interp(t, grid, self.samples[:, i]) for i in range(3)], axis=1)

    def velocities(self, t) -> np.ndarray | None:
        if self.sample_velocities is None:
            return None
        t = _times(t)
        grid = np.arange(self.T) * self.dt
        return np.stack([np.interp(t, grid, self.sample_velocities[:, i]) for i in range(3)], axis=1)

    def window(self, t0: float, N: int, dt: float) -> ReferenceWindow:
        N = _horizon(N)
        if not self._same_grid(dt):
            return super().window(t0, N, dt)
        if N > self.T:
            raise ValueError(f"N: a {N}-knot window does not fit the {self.T} samples of the trajectory")
        k = min(max(self.index(t0), 0), self.T - N)
        v = None if self.sample_velocities is None else self.sample_velocities[k:k + N]
        return ReferenceWindow(sec_to_ns(t0), self.dt, self.samples[k:k + N], velocities=v)

    def covers(self, t0: float, N: int, dt: float) -> bool:
        if self._same_grid(dt):
            return self.index(t0) + int(N) <= self.T
        return float(t0) + (int(N) - 1) * float(dt) <= (self.T - 1) * self.dt + _EPS * self.dt

    def done(self, t: float) -> bool:
        """True once t is past the last sample's time."""
        return self.index(t) > self.T - 1
