"""NumPy transcription of the operational-space control law (docs/osc.md), one robot at a time.

The slow, obvious reference the C++ controller (gato.osc) is tested against: explicit
matrices, np.linalg.inv for every inverse, no reuse between terms. Conventions match
gato.osc: poses (px, py, pz, qx, qy, qz, qw) [m, unit quaternion xyzw], spatial vectors
(linear, angular), world-frame Jacobians with linear rows first.

    e      = [R_o^T (p_d - p),  R_o^T log(R_d R^T)]            pose error, operational frame
    de     = [v_d^o - R_o^T v,  w_d^o - R_o^T w]                twist error, operational frame
    a      = blkdiag(R_o, R_o) (Kp * e + Kd * de)               world frame
    Om     = blkdiag(R_f diag(m_lin) R_f^T, R_t diag(m_ang) R_t^T)   motion selection (world)
    Ow     = the same with the wrench selection axes
    F      = Lambda Om a   (decoupling on)   or   Om a   (off)
    Fw     = Ow (F_d [FF] + blkdiag(R_o, R_o) (Kw * blkdiag(R_o, R_o)^T (F_d - F_meas)) [FB])
    tau    = J^T (F + Fw) + g [gravity] + N^T tau_0 [null space]
    tau_0  = M (Kn (q_des - q) + Dn (qd_des - qd))  (decoupling on; without M when off)
    N^T    = I - J^T Lambda J M^-1 (full decoupling)  or  I - J^T (J J^T)^-1 J (otherwise)
    Lambda = (J M^-1 J^T)^-1, or blkdiag((J_p M^-1 J_p^T)^-1, (J_r M^-1 J_r^T)^-1) (partial).
"""
from __future__ import annotations

import numpy as np


def quat_to_R(q) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w); normalised first."""
    x, y, z, w = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def quat_mul(a, b) -> np.ndarray:
    """Hamilton product a * b of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def rotation_error(q_des, q_cur) -> np.ndarray:
    """World rotation vector [rad] of q_des * q_cur^-1 (the shortest rotation taking the current
    orientation to the desired one): angle * axis with angle in [0, pi]."""
    qd = np.asarray(q_des, float) / np.linalg.norm(q_des)
    qc = np.asarray(q_cur, float) / np.linalg.norm(q_cur)
    qe = quat_mul(qd, np.array([-qc[0], -qc[1], -qc[2], qc[3]]))
    if qe[3] < 0:
        qe = -qe
    s = np.linalg.norm(qe[:3])
    if s < 1e-12:
        return 2.0 * qe[:3]
    return 2.0 * np.arctan2(s, qe[3]) * qe[:3] / s


def blk(R) -> np.ndarray:
    out = np.zeros((6, 6))
    out[:3, :3] = R
    out[3:, 3:] = R
    return out


def selection(R_o, q_lin, q_ang, axes) -> np.ndarray:
    """World-frame generalized selection matrix for diagonal axis weights (6,) given in the
    linear / angular selection frames (quaternions relative to the operational frame)."""
    Rf = R_o @ quat_to_R(q_lin)
    Rt = R_o @ quat_to_R(q_ang)
    out = np.zeros((6, 6))
    out[:3, :3] = Rf @ np.diag(axes[:3]) @ Rf.T
    out[3:, 3:] = Rt @ np.diag(axes[3:]) @ Rt.T
    return out


def task_inertia(J, M, partial=False) -> np.ndarray:
    """Lambda = (J M^-1 J^T)^-1, or its translational / rotational blocks inverted separately."""
    A = J @ np.linalg.inv(M) @ J.T
    if not partial:
        return np.linalg.inv(A)
    L = np.zeros((6, 6))
    L[:3, :3] = np.linalg.inv(A[:3, :3])
    L[3:, 3:] = np.linalg.inv(A[3:, 3:])
    return L


def null_projector_T(J, M, dynamic: bool) -> np.ndarray:
    """N^T (n x n): dynamically consistent I - J^T Lambda J M^-1, or Moore-Penrose I - J^T (J J^T)^-1 J."""
    n = J.shape[1]
    if dynamic:
        Minv = np.linalg.inv(M)
        Lam = np.linalg.inv(J @ Minv @ J.T)
        return np.eye(n) - J.T @ Lam @ J @ Minv
    return np.eye(n) - J.T @ np.linalg.inv(J @ J.T) @ J


def osc_torque(*, tool_pose, tool_twist, J, M=None, g=None, op_pose, des_pose, des_twist, kp, kd,
               decoupling=True, partial=False, gravity=True, wrench_ff=False, wrench_fb=False,
               motion_axes=None, wrench_axes=None, wrench_kp=None, lin_sel=(0, 0, 0, 1),
               ang_sel=(0, 0, 0, 1), des_wrench=None, meas_wrench=None, null_space=False,
               q=None, qd=None, q_des=None, qd_des=None, kn=None, dn=None) -> np.ndarray:
    """Joint torque (n,) [N·m or N] of one robot; argument names as in the module docstring."""
    J = np.asarray(J, float)
    n = J.shape[1]
    R_o = quat_to_R(op_pose[3:])
    p_o = np.asarray(op_pose[:3], float)
    p, R_q = np.asarray(tool_pose[:3], float), np.asarray(tool_pose[3:], float)
    # Desired pose in the world: T_o * T_des.
    p_d = p_o + R_o @ np.asarray(des_pose[:3], float)
    q_o = np.asarray(op_pose[3:], float) / np.linalg.norm(op_pose[3:])
    q_dw = quat_mul(q_o, np.asarray(des_pose[3:], float) / np.linalg.norm(des_pose[3:]))
    e = np.concatenate([R_o.T @ (p_d - p), R_o.T @ rotation_error(q_dw, R_q)])
    tw = np.asarray(tool_twist, float)
    de = np.asarray(des_twist, float) - np.concatenate([R_o.T @ tw[:3], R_o.T @ tw[3:]])
    a = blk(R_o) @ (np.asarray(kp, float) * e + np.asarray(kd, float) * de)
    wrench = wrench_ff or wrench_fb
    if wrench:
        Om = selection(R_o, lin_sel, ang_sel, np.asarray(motion_axes, float))
        Ow = selection(R_o, lin_sel, ang_sel, np.asarray(wrench_axes, float))
    else:
        Om = np.eye(6)
    if decoupling:
        F = task_inertia(J, M, partial) @ Om @ a
    else:
        F = Om @ a
    if wrench:
        w = np.zeros(6)
        if wrench_ff:
            w = w + np.asarray(des_wrench, float)
        if wrench_fb:
            err = np.asarray(des_wrench, float) - np.asarray(meas_wrench, float)
            w = w + blk(R_o) @ (np.asarray(wrench_kp, float) * (blk(R_o).T @ err))
        F = F + Ow @ w
    tau = J.T @ F
    if gravity:
        tau = tau + np.asarray(g, float)
    if null_space:
        pd = np.asarray(kn, float) * (np.asarray(q_des, float) - q) + np.asarray(dn, float) * (
            np.asarray(qd_des, float) - qd)
        tau0 = M @ pd if decoupling else pd
        NT = null_projector_T(J, M, dynamic=decoupling and not partial)
        tau = tau + NT @ tau0
    assert tau.shape == (n,)
    return tau


def pinocchio_tool_state(model, data, fid, q, v):
    """(pose (7,), twist (6,), J (6, n), M (n, n), g (n,)) of frame fid with pinocchio's Python
    bindings: the model inputs the model-free controller expects (world-aligned twist and Jacobian,
    linear rows first; quaternion x, y, z, w)."""
    import pinocchio as pin

    pin.forwardKinematics(model, data, q, v)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    T = data.oMf[fid]
    pose = np.concatenate([T.translation, pin.Quaternion(T.rotation).coeffs()])
    twist = pin.getFrameVelocity(model, data, fid, pin.LOCAL_WORLD_ALIGNED).vector.copy()
    J = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED).copy()
    M = pin.crba(model, data, q).copy()
    M = np.triu(M) + np.triu(M, 1).T
    g = pin.computeGeneralizedGravity(model, data, q).copy()
    return pose, twist, J, M, g
