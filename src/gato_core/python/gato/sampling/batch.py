"""What the sampling planner's cost terms read: :class:`RolloutBatch`, and the row / rotation helpers
the terms and their residuals share (quaternions wxyz; angles rad)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["RolloutBatch", "quat_error", "quat_to_mat", "qpos_error"]


@dataclass
class RolloutBatch:
    """What terms see of W rollouts of T rows (coarse rows step several sim steps).

    qpos (W, T, nq), qvel (W, T, nv): state after each row's step; ctrl (W, T, nu): the
    actuator controls applied; sensordata (W, T, nsensordata): computed at the row's start;
    clock / ctrl_clock (T,) int: see the module docstring; t0: the plan's start step.
    """

    model: object
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    sensordata: np.ndarray
    clock: np.ndarray
    ctrl_clock: np.ndarray
    t0: int


def _rows(ref: np.ndarray, clock: np.ndarray) -> np.ndarray:
    return ref[np.clip(clock, 0, len(ref) - 1)]


def _quat_mul(a, b):
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def _quat_conj(q):
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_error(q, q_ref) -> np.ndarray:
    """Rotation vector [rad] (..., 3) of q_ref^-1 q (both (..., 4) wxyz), the shorter way round."""
    d = _quat_mul(_quat_conj(q_ref), q)
    d = np.where(d[..., :1] < 0, -d, d)
    v = d[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, d[..., :1])
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-12), 2.0)
    return v * scale


def quat_to_mat(q) -> np.ndarray:
    """(..., 3, 3) rotation matrices of (..., 4) wxyz quaternions (normalized first)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)], -2)


def _wrap(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def _yaw(q):
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def qpos_error(model, qpos, qpos_ref) -> np.ndarray:
    """(..., nv) tangent-space difference qpos - qpos_ref (free / ball joints: rotation vectors)."""
    import mujoco

    out = np.empty(qpos.shape[:-1] + (model.nv,))
    for j in range(model.njnt):
        qa, va, t = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j]), int(model.jnt_type[j])
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            out[..., va:va + 3] = qpos[..., qa:qa + 3] - qpos_ref[..., qa:qa + 3]
            out[..., va + 3:va + 6] = quat_error(qpos[..., qa + 3:qa + 7], qpos_ref[..., qa + 3:qa + 7])
        elif t == int(mujoco.mjtJoint.mjJNT_BALL):
            out[..., va:va + 3] = quat_error(qpos[..., qa:qa + 4], qpos_ref[..., qa:qa + 4])
        else:
            out[..., va] = qpos[..., qa] - qpos_ref[..., qa]
    return out
