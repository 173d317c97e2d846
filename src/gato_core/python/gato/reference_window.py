"""End-effector reference windows on an integer-nanosecond clock: the targets a
controller tracks (gato_msgs/EEReference without the ROS types), resampled at a solve's
time and knot spacing. Shared by the ROS layer and ``gato replay``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ReferenceWindow", "sec_to_ns", "ns_to_sec", "NS_PER_S"]

NS_PER_S = 1_000_000_000


def sec_to_ns(t: float) -> int:
    """Seconds -> integer nanoseconds (rounded to the nearest ns)."""
    return int(round(float(t) * NS_PER_S))


def ns_to_sec(t_ns: int) -> float:
    """Integer nanoseconds -> seconds."""
    return int(t_ns) / NS_PER_S


@dataclass
class ReferenceWindow:
    """End-effector reference window (gato_msgs/EEReference).

    ``positions`` (n_knots, 3) [m]: knot k is the target at ``stamp_ns + k * knot_dt``;
    ``knot_dt`` [s] > 0; ``frame_id`` the frame of the positions ("" = the world frame of
    the robot description).
    """

    stamp_ns: int
    knot_dt: float
    positions: np.ndarray
    frame_id: str = ""

    def __post_init__(self):
        p = np.array(self.positions, dtype=np.float64)
        if p.ndim == 1 and p.size % 3 == 0:
            p = p.reshape(-1, 3)
        if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 1:
            raise ValueError(f"positions: expected shape (n_knots >= 1, 3) [m], got {np.shape(self.positions)}")
        if not np.all(np.isfinite(p)):
            raise ValueError("positions: contains NaN or Inf")
        if isinstance(self.knot_dt, bool) or not isinstance(self.knot_dt, (int, float, np.floating)) \
                or not math.isfinite(self.knot_dt) or self.knot_dt <= 0:
            raise ValueError(f"knot_dt: expected a finite spacing > 0 s, got {self.knot_dt!r}")
        self.positions = p
        self.knot_dt = float(self.knot_dt)
        self.stamp_ns = int(self.stamp_ns)

    @property
    def n_knots(self) -> int:
        return int(self.positions.shape[0])

    @property
    def end_ns(self) -> int:
        """Time of the last knot [ns]."""
        return self.stamp_ns + sec_to_ns((self.n_knots - 1) * self.knot_dt)

    def sample(self, t_ns: int, n: int, dt: float) -> np.ndarray:
        """(n, 3) targets at times ``t_ns + j * dt`` (j = 0..n-1): linear interpolation between
        knots, clamped to the first / last knot outside the window.

        Exact copies of the knots when the query times fall on them (the lockstep case:
        same stamp, same spacing), so resampling adds no rounding there.
        """
        off_ns = np.int64(int(t_ns) - self.stamp_ns)
        # Knot index in exact integer ns where possible: (off + j*dt) / knot_dt.
        dt_ns, kdt_ns = sec_to_ns(dt), sec_to_ns(self.knot_dt)
        num = off_ns + np.arange(int(n), dtype=np.int64) * dt_ns
        idx = np.clip(num // kdt_ns, 0, self.n_knots - 1)
        rem = num - idx * kdt_ns
        frac = np.where((num >= 0) & (idx < self.n_knots - 1), rem / kdt_ns, 0.0)
        nxt = np.minimum(idx + 1, self.n_knots - 1)
        p = self.positions
        out = p[idx] + frac[:, None] * (p[nxt] - p[idx])
        exact = frac == 0.0
        out[exact] = p[idx[exact]]
        return out

    def solver_reference(self, t_ns: int, N: int, dt: float) -> np.ndarray:
        """(6N,) solver reference ``[x, y, z, 0, 0, 0]`` per knot, sampled at the solve time
        ``t_ns`` with the solver's knot spacing ``dt`` [s] (see :meth:`sample`)."""
        ref = np.zeros((int(N), 6))
        ref[:, :3] = self.sample(t_ns, N, dt)
        return ref.ravel()
