"""ROS-free value types of the gato ROS layer: what the nodes' logic classes consume
and produce, and what :mod:`gato_ros.conversions` turns into messages.

Times are integer nanoseconds (``stamp_ns``) on whatever clock the producer used
(simulation time in the simulation bringup, the robot's clock on hardware).
Positions in metres (world frame), joint positions in rad, velocities in rad/s,
torques in N*m.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["JointStateSample", "ReferenceWindow", "Plan", "SolveInput", "sec_to_ns", "ns_to_sec"]

NS_PER_S = 1_000_000_000


def sec_to_ns(t: float) -> int:
    """Seconds -> integer nanoseconds (rounded to the nearest ns)."""
    return int(round(float(t) * NS_PER_S))


def ns_to_sec(t_ns: int) -> float:
    """Integer nanoseconds -> seconds."""
    return int(t_ns) / NS_PER_S


@dataclass
class JointStateSample:
    """One joint-state reading as it arrived (sensor_msgs/JointState without the ROS types).

    ``names`` (n,) in the sender's order; ``position`` / ``velocity`` / ``effort`` (n,) or
    empty (a JointState may leave any of them empty). No validation here: the controller
    logic decides what is acceptable.
    """

    stamp_ns: int
    names: list
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray = field(default_factory=lambda: np.zeros(0))


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


@dataclass
class Plan:
    """A planned trajectory (gato_msgs/Plan): ``xu`` (n_knots*(nx+nu) - nu,) =
    ``[x_0, u_0, ..., x_{N-1}]``, x = [q; qd] (rad, rad/s) in ``joint_names`` order,
    u in N*m; knot k at ``stamp_ns + k * knot_dt`` [s]."""

    stamp_ns: int
    knot_dt: float
    nx: int
    nu: int
    n_knots: int
    joint_names: list
    xu: np.ndarray

    def __post_init__(self):
        self.xu = np.array(self.xu, dtype=np.float64).reshape(-1)
        self.nx, self.nu, self.n_knots = int(self.nx), int(self.nu), int(self.n_knots)
        size = self.n_knots * (self.nx + self.nu) - self.nu
        if self.nx < 1 or self.nu < 0 or self.n_knots < 1 or self.xu.size != size:
            raise ValueError(f"xu: expected n_knots*(nx+nu)-nu = {size} values for nx={self.nx}, nu={self.nu}, "
                             f"n_knots={self.n_knots}, got {self.xu.size}")
        self.joint_names = [str(n) for n in self.joint_names]
        self.knot_dt = float(self.knot_dt)
        self.stamp_ns = int(self.stamp_ns)

    def states(self) -> np.ndarray:
        """(n_knots, nx) states [q; qd] per knot."""
        s = self.nx + self.nu
        return np.stack([self.xu[k * s:k * s + self.nx] for k in range(self.n_knots)])

    def controls(self) -> np.ndarray:
        """(n_knots - 1, nu) inputs per knot interval [N*m]."""
        s = self.nx + self.nu
        if self.n_knots < 2:
            return np.zeros((0, self.nu))
        return np.stack([self.xu[k * s + self.nx:(k + 1) * s] for k in range(self.n_knots - 1)])


@dataclass
class SolveInput:
    """What one MPC tick solved from (gato_msgs/SolveInput): enough, with ``config_json``,
    to re-run the tick offline.

    ``x_measured`` (nx,) [q; qd] in ``joint_names`` (solver) order; ``reference`` (6N,) [m];
    ``xu_warm`` (rows, S) the warm start the step started from (rows 1 when all batch
    entries share it, else B); ``dt_elapsed`` / ``budget_s`` [s], 0 = None; ``reset``: the
    controller was reset and warmed up at ``x_measured`` before the step.
    """

    stamp_ns: int
    tick: int
    joint_names: list
    x_measured: np.ndarray
    reference: np.ndarray
    xu_warm: np.ndarray
    dt_elapsed: float = 0.0
    budget_s: float = 0.0
    reset: bool = False
    config_json: str = ""

    def __post_init__(self):
        self.x_measured = np.asarray(self.x_measured, dtype=np.float64).reshape(-1)
        self.reference = np.asarray(self.reference, dtype=np.float64).reshape(-1)
        w = np.asarray(self.xu_warm, dtype=np.float64)
        self.xu_warm = w.reshape(1, -1) if w.ndim == 1 else w
