"""EE kinematics of the controller node's status and its non-bsqp planners (ROS-free): the EE
frame's position and its orientation error against a target, by pinocchio forward kinematics of
the nominal model. Units: m, rad."""
import numpy as np


class EERotation:
    """The EE frame's orientation (pinocchio forward kinematics of frame ``fid``):
    :meth:`angle_to` a target rotation vector [rad]."""

    def __init__(self, model, fid: int):
        self.model, self.data, self.fid = model, model.createData(), int(fid)

    def angle_to(self, q, rotvec) -> float:
        """Angle [rad] of R_target^T R_ee(q), R_target = exp(``rotvec``) (world frame)."""
        import pinocchio as pin

        pin.forwardKinematics(self.model, self.data, q)
        R = pin.updateFramePlacement(self.model, self.data, self.fid).rotation
        return float(np.linalg.norm(pin.log3(pin.exp3(np.asarray(rotvec, dtype=np.float64)).T @ R)))


def ee_position(model, frame: str):
    """``ee_pos(q) -> (3,)`` m: the origin of URDF frame ``frame`` (pinocchio forward kinematics),
    the EE position the planners other than bsqp track (the registered EE frame)."""
    import pinocchio as pin

    data = model.createData()
    fid = model.getFrameId(frame)

    def ee_pos(q):
        pin.forwardKinematics(model, data, np.asarray(q, dtype=np.float64))
        return pin.updateFramePlacement(model, data, fid).translation.copy()
    return ee_pos
