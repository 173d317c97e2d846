"""CartesianControl: a SimMPC control map from end-effector twists to joint velocity commands."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .batch import quat_error, quat_to_mat

__all__ = ["CartesianControl"]


def _vec(v, n: int, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: expected {n} finite numbers, got {v!r}")
    return a


class CartesianControl:
    """World-frame twists of ``body`` (the first six commands: linear m/s, angular rad/s) to joint
    velocities by damped least squares, with feedback toward ``position_ref`` / ``q_wxyz_ref``.

    qd = J^T (J J^T + damping I)^-1 (twist + [position_gain * (position_ref - p);
    rotation_gain * rotvec(q_ref q^-1)]), J the body's world-frame (6, n_dofs) Jacobian over
    :attr:`dofs`, the dofs of the model's scalar (hinge / slide) joint actuators; each such
    actuator's control is its joint's qd (velocity actuators). Commands after the first six pass
    through, in order, to the remaining actuators (e.g. a gripper): ``num_commands`` = 6 + those.

    A control map (``SimMPCConfig.control_map``): called as ``control(sim, clock)`` it turns the
    commands in ``sim.data.ctrl`` into actuator controls in place (gato.sampling.control_map).

    Args: model (mujoco.MjModel), body (name), position_ref (3,) m, q_wxyz_ref (4,),
    position_gain (3,) 1/s, rotation_gain (3,) 1/s, damping (> 0, in the units of J J^T).
    """

    def __init__(self, model, body: str, position_ref: Sequence[float] = (0, 0, 0),
                 q_wxyz_ref: Sequence[float] = (1, 0, 0, 0), position_gain: Sequence[float] = (0, 0, 0),
                 rotation_gain: Sequence[float] = (0, 0, 0), damping: float = 0.001):
        import mujoco

        self._mj = mujoco
        self.model = model
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) if isinstance(body, str) else -1
        if bid < 0:
            raise ValueError(f"body: {body!r} is not a body of the model")
        self.body, self.body_id = body, bid
        self.position_ref = _vec(position_ref, 3, "position_ref")
        q = _vec(q_wxyz_ref, 4, "q_wxyz_ref")
        if np.linalg.norm(q) < 1e-9:
            raise ValueError("q_wxyz_ref: a zero quaternion")
        self.q_wxyz_ref = q / np.linalg.norm(q)
        self.position_gain = _vec(position_gain, 3, "position_gain")
        self.rotation_gain = _vec(rotation_gain, 3, "rotation_gain")
        if not (math.isfinite(damping) and damping > 0):
            raise ValueError(f"damping: expected a finite number > 0, got {damping!r}")
        self.damping = float(damping)
        joint_act, other = [], []
        scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        for a in range(model.nu):
            j = int(model.actuator_trnid[a, 0])
            if int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT) and int(model.jnt_type[j]) in scalar:
                joint_act.append(a)
            else:
                other.append(a)
        if not joint_act:
            raise ValueError("model: no scalar joint actuators for CartesianControl to command")
        self.joint_actuators = np.array(joint_act, dtype=int)
        self.other_actuators = np.array(other, dtype=int)
        self.dofs = np.array([model.jnt_dofadr[model.actuator_trnid[a, 0]] for a in joint_act], dtype=int)
        self.num_commands = 6 + len(other)
        self._data = mujoco.MjData(model)
        self._jacp, self._jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))

    def joint_velocities(self, qpos: np.ndarray, twist: np.ndarray) -> np.ndarray:
        """(len(dofs),) joint velocities [rad/s or m/s] realizing ``twist`` (6,) plus the feedback at qpos."""
        mj, m, d = self._mj, self.model, self._data
        d.qpos[:] = qpos
        mj.mj_kinematics(m, d)
        mj.mj_comPos(m, d)
        mj.mj_jacBody(m, d, self._jacp, self._jacr, self.body_id)
        v = np.array(twist, dtype=np.float64)
        v[:3] += self.position_gain * (self.position_ref - d.xpos[self.body_id])
        if np.any(self.rotation_gain):
            q = np.array(d.xquat[self.body_id])
            # rotvec(q_ref q^-1) in the world = R(q) rotvec(q^-1 q_ref)
            v[3:] += self.rotation_gain * (quat_to_mat(q) @ quat_error(self.q_wxyz_ref, q))
        J = np.vstack([self._jacp[:, self.dofs], self._jacr[:, self.dofs]])
        return J.T @ np.linalg.solve(J @ J.T + self.damping * np.eye(6), v)

    def __call__(self, sim, clock) -> None:
        """RoboKit's ``control_map(sim, clock)``: the twists (and pass-through commands) in
        ``sim.data.ctrl[:, :num_commands]`` of each world become its actuator controls in
        ``sim.data.ctrl[:, :nu]`` (joint velocities from the world's ``sim.data.qpos``)."""
        ctrl, qpos = sim.data.ctrl, np.atleast_2d(sim.data.qpos)
        if ctrl.shape[1] < max(self.num_commands, self.model.nu) or len(ctrl) != len(qpos):
            raise ValueError(f"sim: data.ctrl must be (nworld, >= {max(self.num_commands, self.model.nu)}), "
                             f"got {ctrl.shape} for {len(qpos)} worlds")
        commands = np.array(ctrl[:, :self.num_commands])  # read before the controls overwrite them
        ctrl[:, :self.model.nu] = 0.0
        for i, (q, cmd) in enumerate(zip(qpos, commands)):
            ctrl[i, self.joint_actuators] = self.joint_velocities(q, cmd[:6])
            ctrl[i, self.other_actuators] = cmd[6:]
