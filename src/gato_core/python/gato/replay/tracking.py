"""The EE tracking of a recorded run, for the replay report (issue 30): per MPC tick, the
measured EE pose (forward kinematics of the tick's measured q on the robot's URDF, the
registered EE frame) against knot 0 of the reference the tick solved on: the position error
[mm] and, on the ticks whose reference carried orientations (``orientation_weight`` > 0), the
orientation error [deg] (the angle of R_ref^T R_ee). Accumulated tick by tick in constant
memory, so the streamed replay uses it as the in-memory one does.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["EETracking", "tracking_line"]


class EETracking:
    """Running EE tracking errors of the ticks given to :meth:`add`.

    Args: urdf: the robot's URDF path; ee_frame: the EE frame name. A frame that is not in the
    URDF leaves the tracker off (:meth:`summary` None) instead of failing the replay."""

    def __init__(self, urdf, ee_frame: str):
        self.kin = None
        self.n = self.n_rot = 0
        self.pos_sum = self.pos_max = self.rot_sum = self.rot_max = 0.0
        try:
            from ..robots.frames import EEKinematics

            self.kin = EEKinematics(urdf, ee_frame)
        except (ValueError, RuntimeError, OSError):
            self.kin = None

    def add(self, tk) -> None:
        """One tick (a :class:`gato.replay.Tick`: ``x`` [q; qd], ``reference`` (6N,),
        ``orientation_weight``)."""
        if self.kin is None:
            return
        import pinocchio as pin

        k = self.kin
        nq = k.model.nq
        q = np.asarray(tk.x, dtype=np.float64)[:nq]
        ref = np.asarray(tk.reference, dtype=np.float64)
        if q.shape != (nq,) or ref.size < 6 or not np.all(np.isfinite(q)):
            return
        pin.forwardKinematics(k.model, k.data, q)
        M = pin.updateFramePlacement(k.model, k.data, k.fid)
        e = float(np.linalg.norm(M.translation - ref[:3])) * 1e3
        self.n += 1
        self.pos_sum += e
        self.pos_max = max(self.pos_max, e)
        if getattr(tk, "orientation_weight", 0.0) > 0:
            R_ref = pin.exp3(ref[3:6])
            a = math.degrees(float(np.linalg.norm(pin.log3(R_ref.T @ M.rotation))))
            self.n_rot += 1
            self.rot_sum += a
            self.rot_max = max(self.rot_max, a)

    def summary(self) -> dict | None:
        """{"ticks", "position_mean_mm", "position_max_mm", "orientation_ticks",
        "orientation_mean_deg", "orientation_max_deg" (None without orientation ticks)}, or None
        (no tick, or the tracker is off)."""
        if self.n == 0:
            return None
        return {"ticks": self.n, "position_mean_mm": self.pos_sum / self.n, "position_max_mm": self.pos_max,
                "orientation_ticks": self.n_rot,
                "orientation_mean_deg": self.rot_sum / self.n_rot if self.n_rot else None,
                "orientation_max_deg": self.rot_max if self.n_rot else None}


def tracking_line(ee: dict | None) -> str | None:
    """The console line of a replay's EE tracking (:meth:`EETracking.summary`): the position
    error and, on a run with orientation references, the orientation error beside it (issue 30);
    None without a summary."""
    if not ee:
        return None
    line = (f"EE tracking (recorded, {ee['ticks']} ticks): position error mean {ee['position_mean_mm']:.3g} mm, "
            f"max {ee['position_max_mm']:.3g} mm")
    if ee.get("orientation_ticks"):
        line += (f"; orientation error mean {ee['orientation_mean_deg']:.3g} deg, max "
                 f"{ee['orientation_max_deg']:.3g} deg ({ee['orientation_ticks']} ticks with an orientation reference)")
    return line
