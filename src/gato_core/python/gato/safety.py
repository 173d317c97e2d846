"""Safety fallbacks shared by every controller front end (the MPC controller's divergence
fallback, the ROS controller logic's HOLD): gravity compensation at a measured
configuration, clamped to the actuator limits.

Units: q rad, torques N*m.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GravityHold"]


class GravityHold:
    """Gravity compensation ``rnea(q, 0, 0)`` of a pinocchio model, the last ``n_actuated``
    joints (zero-padded when the model has fewer), clamped to +-``effort_limit`` when that has
    n_actuated entries, then any non-finite entry set to 0.

    Args:
        model: pinocchio Model (the solver's: ``solver.model``).
        effort_limit: None or (n_actuated,) N*m (URDF ``<limit effort>``).
        n_actuated: torques returned (default: model.nv).

    The pinocchio workspace is allocated once, here: calling the hold allocates only its
    result. ``hold(q)`` -> (n_actuated,) N*m for q (nq,) rad.
    """

    def __init__(self, model, effort_limit=None, n_actuated=None):
        import pinocchio as pin

        self._pin = pin
        self.model = model
        self.data = model.createData()
        self.n_actuated = int(model.nv if n_actuated is None else n_actuated)
        lim = None if effort_limit is None else np.asarray(effort_limit, dtype=np.float64).reshape(-1)
        self.effort_limit = lim if lim is not None and lim.size == self.n_actuated else None
        self._zero = np.zeros(model.nv)

    def __call__(self, q) -> np.ndarray:
        m = self.model
        tau = np.array(self._pin.rnea(m, self.data, np.asarray(q, dtype=np.float64)[:m.nq], self._zero, self._zero))
        na = self.n_actuated
        tau = tau[-na:] if tau.size >= na else np.pad(tau, (0, na - tau.size))
        if self.effort_limit is not None:
            tau = np.clip(tau, -self.effort_limit, self.effort_limit)
        return np.where(np.isfinite(tau), tau, 0.0)
