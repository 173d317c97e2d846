"""Frame helpers shared by the solver, the worlds and the estimators: a world wrench in a joint's
frame, and :class:`EEKinematics` (EE position and J(q)^T w of the nominal robot)."""
from __future__ import annotations

import numpy as np


def world_wrench_to_joint_local(model, data, frame_id: int, q, f_world) -> tuple[int, np.ndarray]:
    """Re-express a world-axes wrench acting at a frame's origin in its parent joint's frame.

    Args:
        model, data: pinocchio Model / Data of the robot.
        frame_id: pinocchio frame id of the point of application (e.g. the EE frame).
        q: (nq,) configuration [rad].
        f_world: (6,) [force(3) N; torque(3) N·m], world axes, torque about the frame origin.

    Returns:
        (body, slot): the 0-based moving-body index (parent joint - 1) and the (6,)
        spatial force in that joint's LOCAL frame about the joint origin, ordered
        [angular(3); linear(3)] — the layout of :meth:`gato.BSQP.set_f_ext_B`.
    """
    import pinocchio as pin

    f_world = np.asarray(f_world, dtype=np.float64).reshape(6)
    pin.forwardKinematics(model, data, np.asarray(q, dtype=np.float64))
    frame = model.frames[frame_id]
    j = frame.parentJoint
    oMj = data.oMi[j]
    p_frame = (oMj * frame.placement).translation
    force, torque = f_world[:3], f_world[3:]
    torque_j = torque + np.cross(p_frame - oMj.translation, force)  # about the joint origin
    R = oMj.rotation
    return int(j) - 1, np.concatenate([R.T @ torque_j, R.T @ force])


class EEKinematics:
    """Forward kinematics of the nominal robot: EE position and the joint torque J(q)^T w of
    a world-axes wrench at the EE frame origin. Args: urdf path, ee_frame name."""

    def __init__(self, urdf, ee_frame):
        import pinocchio as pin

        self._pin = pin
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        if not self.model.existFrame(ee_frame):
            raise ValueError(f"ee_frame: frame {ee_frame!r} not found in {urdf}")
        self.fid = self.model.getFrameId(ee_frame)

    def ee_pos(self, q) -> np.ndarray:
        """(3,) world position [m] of the EE frame origin at q (nq,)."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, q)
        return pin.updateFramePlacement(self.model, self.data, self.fid).translation.copy()

    def wrench_torque(self, q, wrench) -> np.ndarray:
        """(nv,) N*m joint torque J(q)^T w of w = [force; torque] (world axes, EE origin)."""
        pin = self._pin
        J = pin.computeFrameJacobian(self.model, self.data, q, self.fid, pin.LOCAL_WORLD_ALIGNED)
        return J.T @ wrench
