"""Residuals of the sampling planner's cost terms and their derivatives with respect to what they read.

One pair of functions per residual term, bound as the terms' ``residuals`` /
``residual_input_jacobian`` methods (:mod:`gato.sampling.terms`); the interface on top is
:class:`gato.sampling.residuals.SimResidualTask`. Shapes: a batch of W rollouts x T rows gives
residuals (W, T, m); input Jacobians are {"qpos": (W, T, m, nv) (tangent), "qvel": (W, T, m, nv),
"ctrl": (W, T, m, nu), "sensordata": (W, T, m, nsensordata)} (absent keys: zero).

Which derivatives are analytic: StateTask (qpos tangent incl. free / ball rotations through the
inverse right Jacobian of SO(3), qvel), ControlTask, SensorTask "linear" / "angle" (with hinge and
relative). Finite differences over the sensordata read: SensorTask "quaternion" / "yaw" /
"yaw_unwrapped" / "heading", AlignTask, GraspTask (return None).
"""
from __future__ import annotations

import math

import numpy as np

from .batch import _rows, _wrap, _yaw, qpos_error, quat_error, quat_to_mat

__all__ = ["state_residual", "state_input_jacobian", "control_residual", "control_input_jacobian",
           "sensor_residual", "sensor_input_jacobian", "align_residual", "grasp_residual", "so3_right_jacobian_inv"]




def _shrink(e: np.ndarray, tol: float):
    """(e * s, s, ds/dn / n): e scaled so its norm is max(|e| - tol, 0); the last for the derivative."""
    n = np.linalg.norm(e, axis=-1, keepdims=True)
    if tol <= 0:
        return e, np.ones_like(n), np.zeros_like(n)
    safe = np.maximum(n, 1e-300)
    s = np.maximum(n - tol, 0.0) / safe
    dsn = np.where(n > tol, tol / safe ** 3, 0.0)   # (ds/dn) / n with ds/dn = tol / n^2
    return e * s, s, dsn


def _shrink_jac(e, s, dsn, De):
    """d(e s(|e|)) = s De + e (ds/dn / n) eᵀ De; e (..., k), De (..., k, c)."""
    return s[..., None] * De + (e * dsn)[..., :, None] * np.einsum("...k,...kc->...c", e, De)[..., None, :]


def so3_right_jacobian_inv(phi: np.ndarray) -> np.ndarray:
    """(..., 3, 3) J_r^-1(phi): Log(Exp(phi) Exp(d)) = phi + J_r^-1(phi) d + O(d^2)."""
    th = np.linalg.norm(phi, axis=-1)[..., None, None]
    K = np.zeros(phi.shape[:-1] + (3, 3))
    K[..., 0, 1], K[..., 0, 2], K[..., 1, 2] = -phi[..., 2], phi[..., 1], -phi[..., 0]
    K[..., 1, 0], K[..., 2, 0], K[..., 2, 1] = phi[..., 2], -phi[..., 1], phi[..., 0]
    small = th < 1e-6
    ths = np.where(small, 1.0, th)
    c2 = np.where(small, 1.0 / 12.0, 1.0 / ths ** 2 - (1 + np.cos(ths)) / (2 * ths * np.sin(ths)))
    return np.eye(3) + 0.5 * K + c2 * (K @ K)


# ----------------------------------------------------------------------------- StateTask
def _state_parts(self, b):
    clock = np.full_like(b.clock, b.t0) if self.freeze_reference else b.clock
    e = qpos_error(self._model, b.qpos, _rows(self._qref, clock - self.ref_offset)[None])
    dv = b.qvel - _rows(self._vref, clock - self.ref_offset)[None]
    return e, dv


def state_residual(self, b) -> np.ndarray:
    """[shrunk(dof_weight * (qpos ⊖ ref)), sqrt(vel_weight) (qvel - ref)]: (W, T, 2 nv)."""
    e, dv = _state_parts(self, b)
    rp, _, _ = _shrink(e * self._w, self.pose_tolerance)
    return np.concatenate([rp, math.sqrt(self.vel_weight) * dv], axis=-1)


def state_input_jacobian(self, b) -> dict:
    import mujoco

    e, dv = _state_parts(self, b)
    m, nv = self._model, e.shape[-1]
    De = np.broadcast_to(np.eye(nv), e.shape + (nv,)).copy()
    for j in range(m.njnt):
        va, t = int(m.jnt_dofadr[j]), int(m.jnt_type[j])
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            sl = slice(va + 3, va + 6)
        elif t == int(mujoco.mjtJoint.mjJNT_BALL):
            sl = slice(va, va + 3)
        else:
            continue
        De[..., sl, sl] = so3_right_jacobian_inv(e[..., sl])   # local-frame rotation dofs (mj_integratePos)
    we = e * self._w
    _, s, dsn = _shrink(we, self.pose_tolerance)
    Jp = _shrink_jac(we, s, dsn, self._w[:, None] * De)
    zeros = np.zeros(e.shape + (nv,))
    Jq = np.concatenate([Jp, zeros], axis=-2)
    Jv = np.concatenate([zeros, math.sqrt(self.vel_weight) * np.broadcast_to(np.eye(nv), zeros.shape)], axis=-2)
    return {"qpos": Jq, "qvel": Jv}


# ----------------------------------------------------------------------------- ControlTask
def _control_scale(self):
    return self._w if self.norm else np.sqrt(self._w)


def control_residual(self, b) -> np.ndarray:
    """scale * (ctrl - ctrl_ref[k]), scale sqrt(weight) (norm: weight): (W, T, nu)."""
    return _control_scale(self) * (b.ctrl - _rows(self._ref, b.ctrl_clock - self.ref_offset)[None])


def control_input_jacobian(self, b) -> dict:
    nu = b.ctrl.shape[-1]
    return {"ctrl": np.broadcast_to(np.diag(_control_scale(self)), b.ctrl.shape[:2] + (nu, nu)).copy()}


# ----------------------------------------------------------------------------- SensorTask
def _sensor_items(self, b):
    """Per weighted sensor: (slice, ref cols, scale, value, reference) at the batch's rows."""
    clock = np.full_like(b.ctrl_clock, b.t0) if self.freeze_reference else b.ctrl_clock
    ref = _rows(self._ref, clock - self.ref_offset)[None]
    for (s, sl, w), rc in zip(self._items, self._ref_cols):
        val = b.sensordata[..., sl]
        if self._rel is not None:
            val = val - b.sensordata[..., self._rel]
        r_ref = ref[..., rc]
        yield sl, w, val, np.broadcast_to(r_ref, val.shape[:-1] + r_ref.shape[-1:])


def yaw_residual(kind: str, val: np.ndarray, r_ref: np.ndarray) -> np.ndarray:
    """(W, T, 1 or 2) residual of wxyz quaternion sensor values ``val`` (W, T, 4) against their
    references, for the residuals of a heading:

    - "yaw": the yaw difference wrapped to [-pi, pi) (references: wxyz quaternions);
    - "yaw_unwrapped": references (W, T, 1) yaw angles in rad, unwrapped (they may pass +-pi, e.g.
      0 .. 4 pi for two turns); the rows' yaw is unwrapped along the rows (np.unwrap over T), its
      first row taken on the 2 pi branch nearest that row's reference, then compared unwrapped, so
      a turn the wrong way round or a missing full turn costs its angle (the rows must turn less
      than pi from one row to the next);
    - "heading": (cos, sin) of the yaw minus the reference's (references: wxyz quaternions): a chord,
      |r| = 2 |sin(dyaw / 2)|, smooth where the wrapped "yaw" residual jumps (at dyaw = +-pi).
    """
    psi = _yaw(val)
    if kind == "yaw":
        return _wrap(psi - _yaw(r_ref))[..., None]
    if kind == "heading":
        ref = _yaw(r_ref)
        return np.stack([np.cos(psi) - np.cos(ref), np.sin(psi) - np.sin(ref)], axis=-1)
    ref = r_ref[..., 0]
    psi = np.unwrap(psi, axis=-1)
    psi = psi + (ref[..., :1] + _wrap(psi[..., :1] - ref[..., :1]) - psi[..., :1])
    return (psi - ref)[..., None]


#: wxyz quaternion residuals: residual dims per sensor, and the reference columns they read.
QUAT_RESIDUAL_DIM = {"quaternion": 3, "yaw": 1, "yaw_unwrapped": 1, "heading": 2}
REF_DIM = {"yaw_unwrapped": 1}


def sensor_residual(self, b) -> np.ndarray:
    """Per sensor, scale (sqrt(w), norm: w) times its residual, shrunk by the hinge: (W, T, sum of dims)."""
    out = []
    for sl, w, val, r_ref in _sensor_items(self, b):
        if self.residual == "linear":
            r = val - r_ref
        elif self.residual == "angle":
            r = _wrap(val - r_ref)
        elif self.residual == "quaternion":
            r = quat_error(val, r_ref)
            w = w[:3]
        else:
            r = yaw_residual(self.residual, val, r_ref)
            w = w[:1]
        e = r * (w if self.norm else np.sqrt(w))
        out.append(_shrink(e, self.hinge or 0.0)[0])
    return np.concatenate(out, axis=-1)


def sensor_residual_dim(self) -> int:
    return sum(QUAT_RESIDUAL_DIM.get(self.residual, sl.stop - sl.start) for _, sl, _ in self._items)


def sensor_input_jacobian(self, b):
    if self.residual not in ("linear", "angle"):
        return None
    W, T_ = b.sensordata.shape[:2]
    J = np.zeros((W, T_, self.residual_dim, b.sensordata.shape[-1]))
    row = 0
    for sl, w, val, r_ref in _sensor_items(self, b):
        k = sl.stop - sl.start
        scale = w if self.norm else np.sqrt(w)
        r = val - r_ref
        if self.residual == "angle":
            r = _wrap(r)
        e = r * scale
        _, s, dsn = _shrink(e, self.hinge or 0.0)
        De = np.broadcast_to(np.diag(scale), (W, T_, k, k))
        Jk = _shrink_jac(e, s, dsn, De)
        J[..., row:row + k, sl] += Jk
        if self._rel is not None:
            J[..., row:row + k, self._rel] -= Jk
        row += k
    return {"sensordata": J}


def sensor_columns(self) -> list:
    cols = [c for _, sl, _ in self._items for c in range(sl.start, sl.stop)]
    if self._rel is not None:
        cols += list(range(self._rel.start, self._rel.stop))
    return sorted(set(cols))


# ----------------------------------------------------------------------------- AlignTask
def align_residual(self, b) -> np.ndarray:
    """sqrt(weight / 2) (u/|u| + v/|v|) over the components: |r|^2 = weight (1 + cos) (0 where u or v vanishes)."""
    clock = np.full_like(b.ctrl_clock, b.t0) if self.freeze_reference else b.ctrl_clock
    o = b.sensordata[..., self._o][..., self.components]
    u = b.sensordata[..., self._s][..., self.components] - o
    v = _rows(self._ref, clock - self.ref_offset)[None][..., self.components] - o
    nu_, nv_ = np.linalg.norm(u, axis=-1, keepdims=True), np.linalg.norm(v, axis=-1, keepdims=True)
    ok = (nu_ > 1e-12) & (nv_ > 1e-12)
    r = u / np.maximum(nu_, 1e-12) + v / np.maximum(nv_, 1e-12)
    return np.where(ok, math.sqrt(self.weight / 2.0) * r, 0.0)


def align_columns(self) -> list:
    return list(range(self._o.start, self._o.stop)) + list(range(self._s.start, self._s.stop))


# ----------------------------------------------------------------------------- GraspTask
def grasp_residual(self, b) -> np.ndarray:
    """sqrt(weight[k]) (p_gripper - p_obj - R_obj offset[k]), shrunk by the tolerance: (W, T, 3)."""
    clock = b.ctrl_clock
    off = _rows(self.offset, clock - self.ref_offset)[None]
    if self._q is not None:
        off = np.einsum("wtij,wtj->wti", quat_to_mat(b.sensordata[..., self._q]),
                        np.broadcast_to(off, b.sensordata.shape[:2] + (3,)))
    e = b.sensordata[..., self._g] - (b.sensordata[..., self._o] + off)
    n = np.linalg.norm(e, axis=-1, keepdims=True)
    tol = self._tol(clock)[None, :, None]
    e = e * np.maximum(n - tol, 0.0) / np.maximum(n, 1e-300)
    return np.sqrt(_rows(self.weight, clock - self.ref_offset))[None, :, None] * e


def grasp_columns(self) -> list:
    cols = list(range(self._g.start, self._g.stop)) + list(range(self._o.start, self._o.stop))
    if self._q is not None:
        cols += list(range(self._q.start, self._q.stop))
    return cols
