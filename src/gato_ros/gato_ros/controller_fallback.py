"""The OSC fallback of the controller (:class:`OscFallback`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`; the rules: its module docstring, "OSC
fallback"): into the OSC after deadline misses in a row, a diverged or failed solve or a reseed;
the OSC's ticks; back to the planner, cold, after ``fallback_recover_ticks``."""
from __future__ import annotations

import numpy as np

from .controller_types import TickOutput


class OscFallback:
    """The OSC fallback of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``cfg``,
    ``_osc``, ``_fb`` (the fallback in control: reason, ticks, x0, why; None: the planner),
    ``_miss_run``, ``_need_reset``, ``planner``, ``status``)."""

    @property
    def _fallback_on(self) -> bool:
        """The OSC fallback covers this planner (fallback=osc, a planner other than the OSC)."""
        return self.cfg["fallback"] == "osc" and self._osc is not None and self.planner is not self._osc

    def _fallback_transitions(self, events: list) -> None:
        """Between ticks: back to the planner after fallback_recover_ticks of OSC; into the OSC
        fallback after fallback_after_misses deadline misses in a row (free-running only)."""
        cfg = self.cfg
        if self._fb is not None:
            if self._fb["ticks"] >= cfg["fallback_recover_ticks"]:
                self._leave_fallback(f"after {self._fb['ticks']} OSC ticks")
            return
        k = cfg["fallback_after_misses"]
        if self._fallback_on and k > 0 and not cfg["reference_sync"] \
                and self._miss_run >= k:
            self._fb = {"reason": "deadline", "ticks": 0, "x0": None,
                        "why": f"{self._miss_run} deadline misses in a row (period {self.period_s * 1e3:g} ms)"}
            self._switched()

    def _switched(self) -> None:
        self.status.fallback_switches += 1
        self._need_reset = True            # the planner restarts cold when it takes over again
        self._miss_run = 0
        self._log("warn", f"OSC fallback ({self._fb['reason']}): {self._fb['why']}; the planner is tried again "
                  f"after {self.cfg['fallback_recover_ticks']} ticks")

    def _leave_fallback(self, why: str) -> None:
        self._log("info", f"planner {self.planner_name} back from the OSC fallback ({self._fb['reason']}) {why}")
        self._fb = None
        self._miss_run = 0
        self._need_reset = True

    def _planner_failed(self, why, stamp, state, ref, dt_el, events) -> TickOutput:
        """A solve raised or returned a non-finite command: restart cold next time, and this tick
        switch to the OSC fallback (when on) or hold."""
        self._need_reset = True
        if self._fallback_on:
            return self._enter_fallback("diverged", why, stamp, state, ref, dt_el, events)
        self._set_state("hold", why, events, "error")
        return self._hold(stamp, events)

    def _enter_fallback(self, reason, why, stamp, state, ref, dt_el, events) -> TickOutput:
        """The planner failed this tick: the OSC commands it (and the next fallback_recover_ticks)."""
        self._fb = {"reason": reason, "ticks": 0, "x0": None, "why": why}
        self._switched()
        return self._osc_tick(stamp, state, ref, dt_el, "", events)

    def _osc_tick(self, stamp, state, ref, dt_el, note, events) -> TickOutput:
        """An OSC tick from ``state`` (a :class:`gato.core.state.MeasuredState`: checked once, at the
        joint state's arrival)."""
        fb = self._fb
        try:
            if fb["x0"] is None:               # the OSC starts here: this orientation and posture
                self._osc.reset(state)
                fb["x0"] = state               # immutable (a MeasuredState): no copy
            res = self._osc.step(state, ref, dt_el)
        except (ValueError, RuntimeError, FloatingPointError) as e:
            self._fb = None
            self._set_state("hold", f"OSC fallback error: {e}", events, "error")
            return self._hold(stamp, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            self._fb = None
            self._set_state("hold", "OSC fallback returned a non-finite command", events, "error")
            return self._hold(stamp, events)
        fb["ticks"] += 1
        self.status.fallbacks += 1
        self._set_state("fallback", f"OSC fallback ({fb['reason']}): {fb['why']}; planner {self.planner_name} "
                        f"tried again after {self.cfg['fallback_recover_ticks']} OSC ticks"
                        + (f"; {note}" if note else ""), events)
        self._track(state.x, ref)
        return self._command(stamp, u, "osc_fallback", events, res, "osc")
