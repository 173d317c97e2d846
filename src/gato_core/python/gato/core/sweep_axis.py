"""The sweep axis of a pose figure-8 (issue 30): which horizontal axis the orientation can swing
about while the arm keeps clear of its joint limits.

A sweep about the figure plane's own horizontal axis can ask the wrist for more than the limits
allow (iiwa14, bench seed 300: the exact pose path takes joint 6 to 0.005 rad of its URDF limit,
beyond the 0.1 rad-shrunk box the solver's limit rows and barrier keep), where no controller that
keeps its limits can follow the pose. :func:`choose_sweep_axis` tries the horizontal axes at
:data:`SWEEP_AXES_DEG` from the plane's, follows each pose path with exact 6-D IK from q0
(:func:`pose_ik_path`), and takes, among those that keep :data:`SWEEP_CLEARANCE` inside the
solver's joint box (:func:`limit_clearance`), the one asking the joints for the least speed; none:
the one with the most clearance. Used by the reference node's ``orientation:=sweep``
(gato_ros.reference_logic) and bench/bench_pose_fig8.py's protocol ``clear``.

Units: rad, s, m. Needs pinocchio (a model and the EE frame id).
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["SWEEP_AXES_DEG", "SWEEP_CLEARANCE", "SweepAxis", "choose_sweep_axis", "horizontal_axis",
           "limit_clearance", "pose_ik_path", "sweep_candidates"]

#: The horizontal sweep axes tried, angles [deg] from the figure plane's horizontal axis about
#: the vertical (named "h0", "h22.5", ...).
SWEEP_AXES_DEG = (0.0, 22.5, 45.0, 67.5, 90.0, 112.5, 135.0, 157.5)
#: The clearance [rad] the pose path's exact IK must keep inside the solver's joint box.
SWEEP_CLEARANCE = 0.1


class SweepAxis(NamedTuple):
    """The chosen axis: ``name``, ``axis`` (3,) unit horizontal, ``speed_ratio`` (peak joint speed
    of its pose path over the velocity limits), ``clearance`` [rad] of its path, and every
    candidate as (name, speed_ratio, clearance)."""
    name: str
    axis: np.ndarray
    speed_ratio: float
    clearance: float
    candidates: list


def horizontal_axis(theta: float, deg: float) -> np.ndarray:
    """(3,) the horizontal unit axis ``deg`` [deg] from the figure plane's (angle ``theta`` [rad]
    about world z)."""
    a = theta + math.radians(deg)
    return np.array([math.cos(a), math.sin(a), 0.0])


def pose_ik_path(model, fid, q0, reference, duration, dt=0.01, iters=3, damping=0.02) -> np.ndarray:
    """(T, nq) joint path of a pose reference: damped least squares on the frame's 6-D error
    (position, world-frame rotation log) along the path sampled every dt over ``duration`` [s],
    ``iters`` updates per sample (60 on the first, so it starts converged)."""
    import pinocchio as pin

    data = model.createData()
    t = np.arange(int(round(duration / dt)) + 1) * dt
    P, Rv = reference.positions(t), reference.orientations(t)
    q = np.array(q0, dtype=np.float64)
    qs = []
    for k in range(len(t)):
        Rt = pin.exp3(Rv[k])
        for _ in range(60 if k == 0 else iters):
            J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)
            M = data.oMf[fid]
            e = np.concatenate([P[k] - M.translation, pin.log3(Rt @ M.rotation.T)])
            q = pin.integrate(model, q, J.T @ np.linalg.solve(J @ J.T + damping ** 2 * np.eye(6), e))
        qs.append(q.copy())
    return np.array(qs)


def limit_clearance(model, qs) -> float:
    """Smallest distance [rad] of a joint path (T, nq) to the solver's joint-position box (the URDF
    limits shrunk by gato's LIMIT_MARGIN, 0.1 rad: the box of the limit rows and the barrier);
    negative: the path leaves the box."""
    from gato import _core

    m = float(_core.LIMIT_MARGIN)
    lo, hi = np.asarray(model.lowerPositionLimit) + m, np.asarray(model.upperPositionLimit) - m
    qs = np.asarray(qs, dtype=np.float64)
    return float(np.min(np.minimum(qs - lo, hi - qs)))


def sweep_candidates(model, fid, q0, make_pose: Callable, duration: float, axes, dt=0.01) -> list:
    """[(speed_ratio, clearance, name, axis)] of each named axis in ``axes`` [(name, (3,))]:
    the pose path ``make_pose(axis)`` (a pose reference) followed by :func:`pose_ik_path` from
    ``q0`` over ``duration`` [s]; speed_ratio = peak |qd| / velocity limit of that path."""
    rows = []
    for name, a in axes:
        qs = pose_ik_path(model, fid, q0, make_pose(a), duration, dt)
        ratio = float(np.max(np.abs(np.diff(qs, axis=0) / dt) / model.velocityLimit))
        rows.append((ratio, limit_clearance(model, qs), name, a))
    return rows


def choose_sweep_axis(model, fid, q0, make_pose: Callable, duration: float, theta: float, *,
                      axes_deg=SWEEP_AXES_DEG, clearance=SWEEP_CLEARANCE, dt=0.01) -> SweepAxis:
    """The sweep axis rule (module docstring): of the horizontal axes ``axes_deg`` [deg] from the
    figure plane's (``theta`` [rad]), among those whose pose path ``make_pose(axis)`` keeps
    ``clearance`` [rad] inside the solver's joint box, the one asking the least joint speed; none:
    the one with the most clearance. ``model`` / ``fid``: a pinocchio model and the EE frame id;
    ``q0`` the start posture; ``duration`` [s] the span followed (one period)."""
    rows = sweep_candidates(model, fid, q0, make_pose, duration,
                            [(f"h{d:g}", horizontal_axis(theta, d)) for d in axes_deg], dt)
    ok = [r for r in rows if r[1] >= clearance]
    ratio, clear, name, axis = min(ok, key=lambda r: r[0]) if ok else max(rows, key=lambda r: r[1])
    return SweepAxis(name, np.asarray(axis, dtype=np.float64), ratio, clear, [(r[2], r[0], r[1]) for r in rows])
