"""The runaway guard of the closed loop (issue 32): a world that runs away is stopped, held and
reported as a failure with its reason, never left to diverge silently.

After every control period :func:`gato.sim.loop.run_closed_loop` asks :meth:`RunawayGuard.check`
whether the measured state is still plausible:

- a joint velocity beyond ``hard_factor`` x its URDF velocity limit (default 10x) at one
  check, or beyond ``factor`` x (default 3x) at ``periods`` consecutive checks (default 2). The
  MPC's limit handling lets a joint overshoot its limit by a few percent, a payload swing by
  more; an unmodelled step push knocks the wrist to 4-6x for the one period before the next plan
  knows it (the disturbance study's 60-100 N at t = 0, back under 2.4x at the next check); a
  joint still beyond 3x a period later, or beyond 10x at all, is a controller or model that has
  lost the arm;
- a joint position beyond its URDF limits by more than ``position_margin`` rad (a continuous
  joint, without limits, is not checked);
- a non-finite state (the world's own divergence check already stops the run then; the guard
  names it the same way if it sees one first).

On a trip the loop stops asking the planner, plays the guard's fallback (:meth:`fallback`: a
joint-space hold of the positions at the trip, damped, with gravity compensation, within the
effort limits: :class:`gato.planners.safety.JointHold`) for ``settle_s`` of simulated time,
and finishes the run with ``stop_reason = "runaway"``, a ``"runaway"`` event
``{"reason": ..., "joint": j}`` and ``results["runaway"]`` (the reason) for the tables.
Units: rad, rad/s, s.
"""
from __future__ import annotations

import math

import numpy as np

from ..planners.safety import JointHold
from .commands import StateFeedback

__all__ = ["RunawayGuard"]


class RunawayGuard:
    """Args:
        model: the robot's pinocchio model (URDF limits; the fallback's gravity model).
        factor: trip when |dq_j| > factor * velocityLimit_j (> 1) at ``periods`` consecutive
            checks (an integer >= 1).
        hard_factor: trip when |dq_j| > hard_factor * velocityLimit_j at any check (>= factor).
        position_margin: trip when q_j leaves [lower_j - margin, upper_j + margin] [rad] (>= 0).
        settle_s: how long the fallback holds after a trip [s] (>= 0).
        hold_frequency_hz: the fallback hold's bandwidth [Hz] (> 0).
        effort_limit: (nv,) N*m the fallback's torques stay within (default the URDF's).
    """

    def __init__(self, model, *, factor: float = 3.0, periods: int = 2, hard_factor: float = 10.0,
                 position_margin: float = 0.5, settle_s: float = 0.5, hold_frequency_hz: float = 5.0,
                 effort_limit=None):
        if isinstance(periods, bool) or not isinstance(periods, (int, np.integer)) or periods < 1:
            raise ValueError(f"periods: expected an integer >= 1, got {periods!r}")
        for name, v, lo, strict in (("factor", factor, 1.0, True), ("hard_factor", hard_factor, None, False),
                                    ("position_margin", position_margin, 0.0, False),
                                    ("settle_s", settle_s, 0.0, False), ("hold_frequency_hz", hold_frequency_hz, 0.0, True)):
            lo = float(factor) if lo is None else lo            # hard_factor >= factor (checked first)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not math.isfinite(v) \
                    or v < lo or (strict and v == lo):
                raise ValueError(f"{name}: expected a finite number {'>' if strict else '>='} {lo:g}, got {v!r}")
        self.model = model
        self.factor, self.position_margin, self.settle_s = float(factor), float(position_margin), float(settle_s)
        self.periods, self.hard_factor = int(periods), float(hard_factor)
        self._over = 0             # consecutive checks beyond factor
        self.hold_frequency_hz = float(hold_frequency_hz)
        vlim = np.asarray(model.velocityLimit, dtype=np.float64)
        self.qd_limit = np.where(vlim > 0, vlim, np.inf)                        # (nv,) rad/s
        self.qd_max = self.qd_limit * self.factor
        lo, hi = (np.asarray(a, dtype=np.float64) for a in (model.lowerPositionLimit, model.upperPositionLimit))
        bounded = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
        self.q_lo = np.where(bounded, lo - self.position_margin, -np.inf)      # (nq,) rad
        self.q_hi = np.where(bounded, hi + self.position_margin, np.inf)
        self.effort_limit = (np.asarray(model.effortLimit, dtype=np.float64) if effort_limit is None
                             else np.asarray(effort_limit, dtype=np.float64))
        self.trips = 0

    @classmethod
    def from_urdf(cls, urdf, **kw) -> "RunawayGuard":
        import pinocchio as pin

        return cls(pin.buildModelFromUrdf(str(urdf)), **kw)

    def reset(self) -> None:
        """Forget the consecutive-check count (a new run)."""
        self._over = 0

    def check(self, q, dq) -> tuple[str, int] | None:
        """(reason, joint index) when the state (q (nq,) rad, dq (nv,) rad/s) has run away, else
        None. Call once per control period (it counts consecutive checks)."""
        q, dq = np.asarray(q, dtype=np.float64), np.asarray(dq, dtype=np.float64)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq))):
            j = int(np.flatnonzero(~np.isfinite(np.r_[q, dq]))[0]) % q.size
            return "non-finite state", j
        ratio = np.abs(dq) / self.qd_limit
        j = int(np.argmax(ratio))
        self._over = self._over + 1 if ratio[j] > self.factor else 0
        if ratio[j] > self.hard_factor:
            return (f"joint {j + 1} velocity {dq[j]:+.2f} rad/s beyond {self.hard_factor:g}x its limit "
                    f"({self.qd_limit[j]:.2f} rad/s)"), j
        if self._over >= self.periods:
            return (f"joint {j + 1} velocity {dq[j]:+.2f} rad/s beyond {self.factor:g}x its limit "
                    f"({self.qd_limit[j]:.2f} rad/s) at {self._over} checks in a row"), j
        out = np.flatnonzero((q < self.q_lo) | (q > self.q_hi))
        if out.size:
            j = int(out[0])
            return (f"joint {j + 1} position {q[j]:+.3f} rad beyond its limits by more than "
                    f"{self.position_margin:g} rad"), j
        return None

    def fallback(self, q) -> StateFeedback:
        """The command the world plays after a trip: hold the positions ``q`` (nq,) rad (finite),
        damped, gravity compensated, within the effort limits."""
        hold = JointHold(self.model, self.hold_frequency_hz, self.effort_limit)
        hold.target = np.asarray(q, dtype=np.float64).copy()
        return StateFeedback(hold)
