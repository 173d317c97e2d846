"""ROS-free health summary of the controller for diagnostic_msgs/DiagnosticArray on
/diagnostics: one status per report with a level (OK / WARN / ERROR), the reasons, and the
key-value pairs an operator reads in rqt_robot_monitor / Foxglove.

Levels (the first rule that applies):

- **ERROR**: the controller holds (gravity compensation: stale or refused joint states, a
  solver error) — the arm is not following its target; or the planner has been *degraded*
  for ``error_after_s`` in a row (below).
- **WARN**: the planner is degraded (a tick missed its deadline, or the OSC fallback
  commanded it); or the EE reference is stale, the controller waits for input, or an input
  was refused since the previous report (bad joint state / target).
- **OK** otherwise.

Degraded: a tick commanded by the OSC fallback, or one that missed its deadline as the
``miss_run``-th (or later) in a row (the controller's own trigger, fallback_after_misses: single
late ticks on a loaded machine are counted, not degraded), starts (or continues) a degraded spell, which ends after ``recover_s`` without such a tick. A spell
longer than ``error_after_s`` is an ERROR: a solver that keeps missing its deadlines (the
stalled-solver fault) goes OK -> WARN (first misses, first fallback episode) -> ERROR, and back
to OK ``recover_s`` after it recovers. Times on the node's clock [ns]. In lockstep
(``misses_degrade`` False: the controller's reference_sync) a late tick costs nothing, the world
waits for it, and the controller never switches for it: misses are counted, not degraded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Health", "HealthReport", "OK", "WARN", "ERROR"]

OK, WARN, ERROR = 0, 1, 2          # diagnostic_msgs/DiagnosticStatus levels
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR"}


@dataclass
class HealthReport:
    level: int
    message: str
    values: list = field(default_factory=list)     # [(key, value text)]


class Health:
    """Accumulates ticks between reports. Args: ``error_after_s`` / ``recover_s`` [s],
    ``misses_degrade``, ``miss_run`` (above)."""

    def __init__(self, error_after_s: float = 2.0, recover_s: float = 1.0, misses_degrade: bool = True,
                 miss_run: int = 3):
        self.error_after_s = float(error_after_s)
        self.recover_s = float(recover_s)
        self.misses_degrade = bool(misses_degrade)
        self.miss_run = max(int(miss_run), 1)
        self._run = 0                  # consecutive ticks that missed their deadline
        self._since_ns = None          # start of the degraded spell
        self._last_bad_ns = None       # latest degraded tick
        self._misses_seen = 0          # status.deadline_misses at the previous tick
        self._rejected_seen = None     # refusal counters at the previous report
        self._win = self._empty()

    @staticmethod
    def _empty() -> dict:
        return {"ticks": 0, "iters": [], "kkt": [], "misses": 0, "fallback_ticks": 0, "hold_ticks": 0}

    def on_tick(self, now_ns: int, status, out) -> None:
        """One controller tick was published: ``status`` (controller_logic.Status after it),
        ``out`` (its TickOutput)."""
        w = self._win
        w["ticks"] += 1
        missed = status.deadline_misses - self._misses_seen
        self._misses_seen = status.deadline_misses
        w["misses"] += max(missed, 0)
        src = getattr(out, "source", "")
        w["fallback_ticks"] += src == "osc_fallback"
        w["hold_ticks"] += src == "hold"
        step = getattr(out, "step", None)
        if step is not None and step.solve is not None:
            st = step.solve.stats
            w["iters"].append(int(step.iterations))
            w["kkt"].append(bool(np.asarray(st.kkt_converged).reshape(-1)[int(step.best_id)])
                            if np.asarray(st.kkt_converged).size else False)
        self._run = self._run + 1 if missed > 0 else 0
        if (self._run >= self.miss_run and self.misses_degrade) or src == "osc_fallback":
            if self._since_ns is None:
                self._since_ns = int(now_ns)
            self._last_bad_ns = int(now_ns)

    def _degraded_s(self, now_ns: int) -> float | None:
        """Length of the degraded spell [s] at ``now_ns``, or None (healthy)."""
        if self._since_ns is None:
            return None
        if (int(now_ns) - self._last_bad_ns) * 1e-9 >= self.recover_s:
            self._since_ns = self._last_bad_ns = None
            return None
        return (int(now_ns) - self._since_ns) * 1e-9

    def report(self, now_ns: int, status, rejected: dict | None = None) -> HealthReport:
        """The report at ``now_ns`` (and a new accumulation window). ``rejected``: refusal
        counters by name (joint states, targets, ...): any increase since the previous report
        is a WARN naming it."""
        w, self._win = self._win, self._empty()
        reasons_err, reasons_warn = [], []
        state, reason = status.state, status.reason
        if state in ("hold", "refused", "runaway"):
            reasons_err.append(f"{state}: {reason}")
        degraded = self._degraded_s(now_ns)
        if degraded is not None:
            what = (f"planner degraded for {degraded:.1f} s (deadline misses / OSC fallback; "
                    f"{w['misses']} misses and {w['fallback_ticks']} fallback ticks since the last report)")
            (reasons_err if degraded >= self.error_after_s else reasons_warn).append(what)
        if state == "fallback":
            reasons_warn.append(f"OSC fallback in control ({status.fallback_reason})")
        if state == "waiting":
            reasons_warn.append(f"waiting: {reason}")
        if state == "running" and "stale" in reason:
            reasons_warn.append(reason)
        rejected = dict(rejected or {})
        if self._rejected_seen is not None:
            grew = {k: v - self._rejected_seen.get(k, 0) for k, v in rejected.items()
                    if v > self._rejected_seen.get(k, 0)}
            if grew:
                reasons_warn.append("inputs refused since the last report: "
                                    + ", ".join(f"{k} +{n}" for k, n in sorted(grew.items())))
        self._rejected_seen = rejected
        level = ERROR if reasons_err else WARN if reasons_warn else OK
        message = "; ".join(reasons_err + reasons_warn) or f"{state}: planner {status.active_planner or '-'} in " \
            "control"
        iters, kkt = w["iters"], w["kkt"]
        values = [("state", state), ("reason", reason), ("active_planner", status.active_planner),
                  ("ticks", str(status.ticks)), ("ticks_since_last_report", str(w["ticks"])),
                  ("deadline_misses", str(status.deadline_misses)),
                  ("deadline_misses_since_last_report", str(w["misses"])),
                  ("sqp_iterations_mean", f"{np.mean(iters):.2f}" if iters else "-"),
                  ("kkt_converged_fraction", f"{np.mean(kkt):.2f}" if kkt else "-"),
                  ("fallback_ticks_since_last_report", str(w["fallback_ticks"])),
                  ("fallback_switches", str(status.fallback_switches)), ("fallbacks", str(status.fallbacks)),
                  ("holds", str(status.holds)), ("stale_events", str(status.stale_events)),
                  ("rejected_nonfinite", str(status.rejected_nonfinite)),
                  ("rejected_names", str(status.rejected_names)), ("solve_us", f"{status.solve_us:.0f}"),
                  ("latency_us", f"{status.latency_us:.0f}"),
                  *((k, str(v)) for k, v in sorted(rejected.items()))]
        return HealthReport(level, message, values)
