"""Safety fallbacks shared by every front end: gravity compensation at a measured
configuration (the MPC controller's divergence fallback, the ROS controller logic's HOLD),
and a drive's own fallbacks when its command input times out (:class:`JointHold`,
:class:`JointBrake`: the ROS simulation world's ``command_timeout_action``), each clamped
to the actuator limits.

Units: q rad, dq rad/s, torques N*m, frequencies Hz, times s.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GravityHold", "JointHold", "JointBrake"]


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


class JointHold:
    """Hold the joint positions ``target`` (nq,) rad: the inverse dynamics of a PD acceleration
    critically damped through the mass matrix, ``rnea(q, dq, w^2 (target - q) - 2 w dq)``
    (gravity and Coriolis compensated), w = 2 pi ``frequency_hz``, clamped to +-effort_limit
    (nv,) N*m. ``hold(q, dq)`` -> (nv,) N*m; evaluate it at the servo rate (every physics step).
    Args: model: pinocchio Model (the nominal robot: a drive knows its URDF, not the payload)."""

    def __init__(self, model, frequency_hz, effort_limit):
        import pinocchio as pin

        self._pin, self.model, self.data = pin, model, model.createData()
        self.omega = 2.0 * np.pi * float(frequency_hz)
        self.effort_limit = np.asarray(effort_limit, dtype=np.float64)
        self.target = np.zeros(model.nq)

    def __call__(self, q, dq) -> np.ndarray:
        w = self.omega
        a = w * w * (self.target - q) - 2.0 * w * dq
        tau = np.asarray(self._pin.rnea(self.model, self.data, q, dq, a), dtype=np.float64)
        return np.clip(tau, -self.effort_limit, self.effort_limit)


class JointBrake:
    """Joint brakes of capacity +-effort_limit (nv,) N*m: the torque that stops every joint within
    one step of ``step_dt`` [s], ``rnea(q, dq, -dq / step_dt)`` (gravity included), clamped to the
    capacity (a brake that slips when overloaded). ``brake(q, dq)`` -> (nv,) N*m."""

    def __init__(self, model, effort_limit, step_dt):
        import pinocchio as pin

        self._pin, self.model, self.data = pin, model, model.createData()
        self.effort_limit = np.asarray(effort_limit, dtype=np.float64)
        self.step_dt = float(step_dt)

    def __call__(self, q, dq) -> np.ndarray:
        tau = np.asarray(self._pin.rnea(self.model, self.data, q, dq, -dq / self.step_dt), dtype=np.float64)
        return np.clip(tau, -self.effort_limit, self.effort_limit)
