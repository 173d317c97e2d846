"""The runaway guard of the controller (:class:`RunawayWatch`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`; issue 32): the closed loop's guard
(:class:`gato.sim.guard.RunawayGuard`, the same thresholds) checked on every tick's measured
state, before the planner is asked.

The input checks (:mod:`gato_ros.inputs`) refuse what cannot be a state at all (NaN / Inf, a
joint 100x faster than its limit or a full turn beyond it); this guard catches a state that
is plausible but has been lost: a joint beyond ``runaway_factor`` x its velocity limit at two
ticks in a row or beyond max(10, ``runaway_factor``) x at one (a wrong payload hypothesis, a
wrong model, a drive fault), or 0.5 rad beyond its position limits. On a trip the controller
commands a damped joint hold at the positions of the trip (:class:`gato.planners.safety.JointHold`
at 5 Hz, gravity and Coriolis compensated, within the effort limits; not the OSC: it tracks the
reference with the same model that lost the arm, and only joint damping stops a spinning joint)
with source ``"runaway_hold"``; status ``state`` "runaway" with the reason (joint, speed, limit),
``fallback_reason`` "runaway", one ``fallback_switches`` per trip, every hold tick in ``fallbacks``;
an error is logged. After ``runaway_hold_s`` (joint-state stamps) and once every joint is under
its velocity limit the planner restarts cold at the measured state (the resume blend applies)."""
from __future__ import annotations

import numpy as np

from gato.planners.safety import JointHold
from gato.sim.guard import RunawayGuard

from .types import ns_to_sec

#: The closed loop's immediate trip (gato.sim.guard.RunawayGuard's hard_factor default).
HARD_FACTOR = 10.0


def check_runaway_factor(value) -> str | None:
    """Why ``runaway_factor`` is refused beyond the schema's range (0 = off, otherwise > 1), or None."""
    if value != 0 and value <= 1.0:
        return f"runaway_factor: expected 0 (off) or a multiple > 1 of the velocity limits, got {value!r}"
    return None


class RunawayWatch:
    """The runaway guard of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``cfg``,
    ``nq``, ``effort_limit``, ``status``, ``_need_reset`` / ``_fb`` / ``_miss_run``; its own:
    ``_guard`` (None: off), ``_runaway`` (the hold in control: since, why, hold; None: the planner),
    ``runaway_trips``)."""

    def _build_runaway_guard(self, model) -> None:
        """The guard for ``cfg["runaway_factor"]`` on ``model`` (the solver's pinocchio model: its
        URDF limits, the hold's dynamics) and the solver-order effort limits; None when 0."""
        self._runaway_model = model
        self._runaway = None
        f = float(self.cfg["runaway_factor"])
        why = check_runaway_factor(f)
        if why:
            raise ValueError(why)
        self._guard = None if f == 0 else RunawayGuard(model, factor=f, hard_factor=max(HARD_FACTOR, f),
                                                       effort_limit=self.effort_limit)

    def _runaway_tick(self, stamp: int, x: np.ndarray, events: list):
        """The hold's output for this tick's state ``x`` (nx,) (solver order) stamped ``stamp`` [ns],
        or None when the planner ticks (no trip; or the hold has settled and hands back)."""
        guard = self._guard
        if guard is None:
            return None
        q, dq = x[:self.nq], x[self.nq:]
        rw = self._runaway
        if rw is None:
            trip = guard.check(q, dq)
            if trip is None:
                return None
            guard.trips += 1
            hold = JointHold(self._runaway_model, guard.hold_frequency_hz, self.effort_limit)
            hold.target = np.array(q, dtype=np.float64)
            rw = self._runaway = {"since": stamp, "why": trip[0], "joint": trip[1], "hold": hold}
            self.status.fallback_switches += 1
            self._need_reset = True            # the planner restarts cold after the hold
            self._fb = None                    # the OSC fallback, if it was in control, is over too
            self._miss_run = 0
        elif ns_to_sec(stamp - rw["since"]) >= self.cfg["runaway_hold_s"] and np.all(np.abs(dq) <= guard.qd_limit):
            self._runaway = None
            guard.reset()
            self._log("info", f"runaway hold released after {ns_to_sec(stamp - rw['since']):.3f} s (every joint "
                      f"under its velocity limit): planner {self.planner_name} restarts cold")
            return None
        tau = rw["hold"](q, dq)
        self.status.fallbacks += 1
        self._set_state("runaway", f"{rw['why']}; joint hold at the positions of the trip for at least "
                        f"{self.cfg['runaway_hold_s']:g} s and until every joint is under its velocity limit",
                        events, "error")
        return self._emit(stamp, tau[self._cmd_from_solver], "runaway_hold", events)
