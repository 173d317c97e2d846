"""The external-wrench hypotheses of the controller (:class:`WrenchSync`, mixed into
:class:`gato_ros.controller_logic.ControllerLogic`): the estimator node's wrench estimate fed to
the solver's hypothesis batch (``hypotheses=estimator``, gato_ros.wrench_hypotheses), with
estimate_sync the estimate stamped at the tick's joint state, and the batch removed when
switched off."""
from __future__ import annotations

import numpy as np

from gato.core.bsqp import robot_info

from .controller_types import TickOutput
from .types import ns_to_sec


class WrenchSync:
    """Wrench estimates of :class:`gato_ros.controller_logic.ControllerLogic` (its state: ``_feed``
    (the EstimateFeed, once needed), ``_est`` (stamp_ns -> (6,) estimate), ``_est_lost``,
    ``estimates_missed``, ``cfg``, ``controller`` / ``solver``)."""

    def on_wrench_estimate(self, wrench, now_ns: int, stamp_ns: int | None = None) -> TickOutput | None:
        """The estimator node's latest wrench (6,) [force N; torque N*m], world axes at the EE
        frame origin, received at node time ``now_ns``; used by the next ticks while
        ``hypotheses`` is ``estimator`` (gato_ros.wrench_hypotheses). ``stamp_ns``: its header
        stamp (the joint state that closed the fitted interval): with ``estimate_sync`` a tick
        waiting for it is completed and returned (else None). ValueError when not 6 finite
        values (the node ignores such a message)."""
        feed = self._estimate_feed()
        feed.set(wrench, now_ns)
        if stamp_ns is None:
            return None
        self._est[int(stamp_ns)] = feed.sampler.estimate.copy()
        if len(self._est) > 64:
            for k in sorted(self._est)[:-32]:
                del self._est[k]
        if self._est_lost:
            self._est_lost = False
            self._log("info", f"wrench estimates back at t={ns_to_sec(int(stamp_ns)):.3f} s: ticks wait for theirs "
                      "again (estimate_sync)")
        return self._complete_pending(now_ns)

    def _estimate_feed(self):
        if self._feed is None:
            from .wrench_hypotheses import EstimateFeed

            self._feed = EstimateFeed(self.solver, robot_info(self.cfg["robot"])["ee_frame"],
                                      spread=self.cfg["hypothesis_spread_n"],
                                      timeout_s=self.cfg["estimate_timeout_s"])
        return self._feed

    def _sync_hypotheses(self, now_ns: int, stamp_ns: int | None = None) -> str:
        """Between ticks: install / remove the estimator's hypothesis batch per ``hypotheses``;
        an expired estimate falls back to zero wrench; switching off zeroes the solver's f_ext.
        estimate_sync: the estimate stamped ``stamp_ns`` (the tick's state) is the one in force.
        Returns a status note ("" when nothing to say)."""
        want = self.cfg.get("hypotheses", "none") == "estimator"
        feed = self._feed
        note = ""
        if want:
            feed = self._estimate_feed()      # zero wrench until the first estimate arrives
            feed.timeout_s = self.cfg["estimate_timeout_s"]
            feed.sampler.spread = self.cfg["hypothesis_spread_n"]
            if self.cfg["estimate_sync"] and stamp_ns in self._est:
                feed.sampler.set_estimate(self._est[stamp_ns])
            elif self._est_lost and self.cfg["estimate_sync"]:
                note = (f"wrench estimates not arriving ({self.estimates_missed} ticks gave up waiting): solving "
                        "under the last one received")
            feed.refresh(now_ns)
            if self.controller.hypotheses is not feed.batch:
                self.controller.hypotheses = feed.batch
                self._log("info", "hypotheses: the estimator's wrench estimate")
        elif feed is not None and self.controller.hypotheses is feed.batch:
            self.controller.hypotheses = None
            nb = int(self.solver.n_bodies()) if callable(getattr(self.solver, "n_bodies", None)) else 1
            self.solver.set_f_ext_B(np.zeros((int(self.solver.batch_size), 6 * nb)))
            self._log("info", "hypotheses: none (robot-only model)")
        return note
