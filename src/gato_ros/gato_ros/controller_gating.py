"""When the controller ticks (:class:`TickGating`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`): the staleness watchdog, and in lockstep the
tick that waits for the window stamped at its joint state (reference_sync) and for the wrench
estimate stamped there (estimate_sync), until the world has re-sent the state
:data:`REFERENCE_LOST_RESENDS` times."""
from __future__ import annotations

from .controller_types import TickOutput
from .types import ns_to_sec

#: reference_sync: re-sends of a tick's joint state without its window after which the reference is lost
REFERENCE_LOST_RESENDS = 3


class TickGating:
    """The tick gates of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``cfg``,
    ``references``, ``_est`` / ``_est_lost``, ``_pending_tick_stamp``, ``_pending_resends``, ``_good``,
    ``_stale``, ``status``)."""

    def _is_stale(self, now_ns: int, events: list) -> bool:
        age = ns_to_sec(int(now_ns) - self._good[2])
        if age <= self.cfg["joint_state_timeout_s"]:
            return False
        if not self._stale:
            self._stale = True
            self.status.stale_events += 1
        self._set_state("hold", f"stale joint states: last good one received {age:.3f} s ago "
                        f"(joint_state_timeout_s = {self.cfg['joint_state_timeout_s']:g})", events)
        return True

    def _waits_for_reference(self, stamp_ns: int) -> bool:
        refs = self.references
        return bool(self.cfg["reference_sync"]) and stamp_ns not in refs.windows and not refs.lost \
            and not (self.target_source is not None and self.target_source.active)

    def _waits_for_estimate(self, stamp_ns: int) -> bool:
        """estimate_sync: the tick at ``stamp_ns`` waits for the estimate stamped there. One is due
        when the previous state got a command from this controller (the estimator fits the interval
        between the two with it); the first state after a start closes no interval."""
        return (bool(self.cfg["estimate_sync"]) and not self._est_lost and stamp_ns not in self._est
                and self._pending.get("hypotheses", self.cfg.get("hypotheses", "none")) == "estimator"
                and self._prev_state_stamp is not None and self._last_cmd_stamp == self._prev_state_stamp)

    def _complete_pending(self, now_ns: int) -> TickOutput | None:
        """The tick waiting for its reference window / wrench estimate, once it has both."""
        st = self._pending_tick_stamp
        if st is None or self._good is None or self._good[0] != st:
            return None
        if self._waits_for_reference(st) or self._waits_for_estimate(st):
            return None
        return self._tick(now_ns, [])

    def _resent(self, stamp_ns: int, now_ns: int, events: list) -> TickOutput | None:
        """The world re-sent the state of the waiting tick: after REFERENCE_LOST_RESENDS re-sends what
        it still waits for counts as lost (the reference once a window was received before; the
        estimate) and the tick solves without it."""
        wait_ref, wait_est = self._waits_for_reference(stamp_ns), self._waits_for_estimate(stamp_ns)
        if not (wait_ref or wait_est):
            return self._tick(now_ns, events)        # e.g. hypotheses switched off meanwhile
        if wait_ref and self.references.latest is None and not wait_est:
            return None                              # no window received yet: wait for the first one
        self._pending_resends += 1
        if self._pending_resends < REFERENCE_LOST_RESENDS:
            return None
        if wait_ref and self.references.latest is not None:
            self.references.lost = True
            self._log("warn", f"EE reference for t={ns_to_sec(stamp_ns):.3f} s did not arrive (the joint "
                      "state was re-sent): solving without waiting for references until one arrives")
        if wait_est:
            self._est_lost = True
            self.estimates_missed += 1
            self._log("warn", f"wrench estimate for t={ns_to_sec(stamp_ns):.3f} s did not arrive (the joint state "
                      f"was re-sent {self._pending_resends} times): solving under the last estimate received "
                      "(zero once older than estimate_timeout_s) without waiting for estimates until one arrives; "
                      "this run is not reproducible from here")
        if self._waits_for_reference(stamp_ns):
            return None
        return self._tick(now_ns, events)
