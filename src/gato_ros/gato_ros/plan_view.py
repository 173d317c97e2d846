"""ROS-free view of what the MPC intends, for RViz / Foxglove: the EE path of the tick's
plan (the published gato_msgs/Plan's knots through forward kinematics), the EE path of every
batch row with the winner marked, and the reference window the tick solved toward; and the
rate limit that keeps the publishing off most ticks (``viz_rate_hz``).

All positions in metres in the controller's base frame (the frame the solver's EE positions
are in); one row per plan knot. The node (:mod:`gato_ros.standard_io`) turns a
:class:`PlanView` into nav_msgs/Path messages and the EE target TF.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PlanView", "plan_view", "RateLimiter", "EEPath"]


@dataclass
class PlanView:
    """``stamp_ns``: the plan's stamp (its knot 0); ``knot_dt`` [s]; ``ee`` (N, 3): the
    published plan's EE positions; ``rows`` (R, N, 3): the EE paths of the first R batch rows
    (R = 1 without a batch or without batch rows asked: the winner only); ``best`` the winning
    row (it may be >= R); ``reference`` (N, 3): the
    reference window of the tick (knot k at stamp + k * knot_dt)."""

    stamp_ns: int
    knot_dt: float
    ee: np.ndarray
    rows: np.ndarray
    best: int
    reference: np.ndarray


def _knot_q(xu_row: np.ndarray, nx: int, nu: int, n_knots: int, nq: int) -> np.ndarray:
    """(N, nq) joint positions of a flat plan row [x_0, u_0, ..., x_{N-1}]."""
    s = nx + nu
    return np.stack([xu_row[k * s:k * s + nq] for k in range(n_knots)])


def plan_view(out, ee_path, nq: int, batch_rows: int = 0) -> PlanView | None:
    """The view of one controller tick (:class:`gato_ros.controller_logic.TickOutput`), or None
    when the tick carries no plan (hold, OSC fallback, planners without plans).

    ``ee_path``: qs (N, nq) solver order [rad] -> (N, 3) [m], the controller's EE at each row
    (:class:`EEPath`). ``batch_rows``:
    with a batch, the EE paths of rows 0 .. batch_rows - 1 too (one forward-kinematics pass of
    N knots each; the winner's is the plan's); 0: the winner only."""
    plan = getattr(out, "plan", None)
    if plan is None:
        return None
    fk = ee_path
    ee = fk(_knot_q(plan.xu, plan.nx, plan.nu, plan.n_knots, nq))
    rows, best = ee[None], 0
    step = getattr(out, "step", None)
    if batch_rows > 0 and step is not None and step.solve is not None:
        xu = np.asarray(step.solve.xu, dtype=np.float64)
        if xu.ndim == 2 and xu.shape[0] > 1:
            best = int(step.best_id)
            rows = np.stack([ee if b == best else fk(_knot_q(xu[b], plan.nx, plan.nu, plan.n_knots, nq))
                             for b in range(min(xu.shape[0], batch_rows))])
    ref = np.zeros((0, 3))
    si = getattr(out, "solve_input", None)
    if si is not None:
        ref = np.asarray(si.reference, dtype=np.float64).reshape(-1, 6)[:, :3]
    return PlanView(int(plan.stamp_ns), float(plan.knot_dt), ee, rows, best, ref)


class RateLimiter:
    """Lets one event through per ``1 / rate_hz`` of the caller's clock (ns); ``rate_hz`` <= 0:
    none; a rate at or above the event rate: every event."""

    def __init__(self, rate_hz: float):
        self.rate_hz = float(rate_hz)
        self._next_ns = None

    def due(self, now_ns: int) -> bool:
        if self.rate_hz <= 0:
            return False
        now_ns = int(now_ns)
        if self._next_ns is not None and now_ns < self._next_ns:
            return False
        period = int(round(1e9 / self.rate_hz))
        # the next slot from the schedule (no drift), or from now after a gap / clock jump
        nxt = (self._next_ns or now_ns) + period
        self._next_ns = nxt if now_ns < nxt <= now_ns + period else now_ns + period
        return True


class EEPath:
    """The EE positions of many joint configurations at once: pinocchio forward kinematics of the
    URDF frame ``ee_frame`` (the frame whose origin the controller's EE tracks), one row per
    configuration. About 1.3 us per row against 15-25 us for a call of the solver's per-state
    ``ee_pos`` (the plan view runs N of them per published path: docs/benchmarks_ros.md).

    Args: ``urdf`` path, ``ee_frame`` name, ``joints``: the solver's joint order (the URDF's for a
    fixed-base arm; checked)."""

    def __init__(self, urdf, ee_frame: str, joints):
        import pinocchio as pin

        self._pin = pin
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        if list(self.model.names)[1:] != list(joints):
            raise ValueError(f"EEPath: the solver's joints {list(joints)} are not the URDF's order "
                             f"{list(self.model.names)[1:]}")
        if not self.model.existFrame(ee_frame):
            raise ValueError(f"EEPath: no frame {ee_frame!r} in {urdf}")
        self.fid = self.model.getFrameId(ee_frame)

    def __call__(self, qs) -> np.ndarray:
        pin, model, data, fid = self._pin, self.model, self.data, self.fid
        out = np.empty((len(qs), 3))
        for i, q in enumerate(np.asarray(qs, dtype=np.float64)):
            pin.forwardKinematics(model, data, q)
            out[i] = pin.updateFramePlacement(model, data, fid).translation
        return out

    def rotation(self, q) -> np.ndarray:
        """(3, 3) the rotation of ``ee_frame`` at joint positions ``q`` (nq,) rad (its axes in the
        base frame: what the solver's orientation term compares, gato_core View::ee_R)."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, np.asarray(q, dtype=np.float64))
        return pin.updateFramePlacement(self.model, self.data, self.fid).rotation.copy()
