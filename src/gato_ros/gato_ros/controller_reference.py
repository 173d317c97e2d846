"""The EE reference of the controller's ticks (:class:`ReferenceTracker`): the windows received,
the tick's reference from them (the window stamped at the tick under reference_sync, else the
latest; a stale reference followed to its end, then the EE position held), the start-up hold
before any window, and the minimum-jerk blend from the measured EE position after a cold start.
The rules are the module docstring of :mod:`gato_ros.controller_logic` ("Stale EE reference",
"Resume without a torque jump")."""
from __future__ import annotations

import numpy as np

from .reference_logic import min_jerk
from .types import ReferenceWindow, ns_to_sec, sec_to_ns


class ReferenceTracker:
    """The reference windows of one controller and the reference of each tick; no ROS.

    Args:
        cfg: the controller's parameters, read at every call (``N``, ``dt``, ``reference_sync``,
            ``resume_speed_mps``, ``orientation_weight``: a run-time change applies at the next tick).
        period_s: the control period [s] (a window older than two periods is reported stale).
        ee_pos: ``q (nq,) -> (3,)`` m, the EE position the planner tracks (solver order).
        nq: joint positions in the state ``x`` = [q; qd].
        log: ``log(level, text)`` (the controller's, looked up at each call).
    """

    def __init__(self, cfg: dict, period_s: float, ee_pos, nq: int, log):
        self.cfg, self.period_s, self._ee_pos, self.nq, self._log = cfg, period_s, ee_pos, nq, log
        self.windows: dict = {}        # stamp_ns -> ReferenceWindow (recent)
        self.latest: ReferenceWindow | None = None
        self.hold: ReferenceWindow | None = None   # the EE position of the first good joint state
        self.lost = False              # reference_sync: the reference stopped arriving (solve without it)
        self._stale = None             # (window stamp_ns, EE position (3,), stamp_ns) held past the window's end
        self._ramp = None              # (t0_ns, EE position (3,) at t0, duration s): resume blend
        self.ramp_pending = False      # start a resume blend at the next tick
        self._no_ref_yet = False       # ticks ran on the start-up hold reference (no window yet)

    def hold_at(self, stamp_ns: int, x: np.ndarray) -> None:
        """The first good joint state (stamp, x (nx,) solver order): its EE position is the
        reference until a window arrives."""
        if self.hold is None:
            self.hold = ReferenceWindow(stamp_ns, self.cfg["dt"], self._ee_pos(x[:self.nq])[None, :])

    def add(self, w: ReferenceWindow) -> None:
        """A window arrived: stored (the 32 newest of more than 64 kept); the newest by stamp is
        the one in force; a lost reference (reference_sync) is back."""
        self.windows[w.stamp_ns] = w
        if self.lost:
            self.lost = False
            self._log("info", f"EE reference back at t={ns_to_sec(w.stamp_ns):.3f} s")
        if len(self.windows) > 64:
            for k in sorted(self.windows)[:-32]:
                del self.windows[k]
        if self.latest is None or w.stamp_ns >= self.latest.stamp_ns:
            self.latest = w

    def for_tick(self, stamp_ns: int, x: np.ndarray, target_source=None) -> tuple[ReferenceWindow, str]:
        """The tick's reference, a ReferenceWindow of N knots dt apart stamped at ``stamp_ns``
        (the solver's grid), and a status note: the window of the tick (reference_sync) or the
        latest one; past the end of the latest window, the EE position measured at the first
        tick past it (stale reference). ``target_source``: the node's targets (issue 31), whose
        window replaces the EE reference while one is active."""
        N, dt = self.cfg["N"], self.cfg["dt"]

        def on_grid(w: ReferenceWindow) -> ReferenceWindow:
            # issue 30: a window's orientations (EEReference.orientations, a goal with goal_orientation)
            # travel with the controller's orientation_weight; the tick records both (SolveInput
            # reference slots [3:6], orientation_weight) so that gato replay solves with the same
            r = w.sample_orientations(stamp_ns, N, dt)
            return ReferenceWindow(stamp_ns, dt, w.sample(stamp_ns, N, dt), orientations=r,
                                   orientation_weight=None if r is None else float(self.cfg["orientation_weight"]))

        if target_source is not None and target_source.active:     # issue 31: the node's targets
            return on_grid(target_source.window(stamp_ns)), ""
        w = self.windows.get(stamp_ns) if self.cfg["reference_sync"] else None
        w = w or self.latest
        if w is None:
            self._no_ref_yet = True                # the first window, when it comes, is blended in
            return on_grid(self.hold), "no EE reference received: holding the EE " \
                "position of the first joint state"
        if self._no_ref_yet:
            self._no_ref_yet = False
            self.ramp_pending = True
        if stamp_ns <= w.end_ns:
            if self._stale is not None:        # a window covers this tick again: blend back into it
                self._stale = None
                self.ramp_pending = True
            note = "" if stamp_ns - w.stamp_ns <= sec_to_ns(max(0.1, 2.0 * self.period_s)) else \
                "EE reference stale: following the last window to its end"
            return on_grid(w), note
        if self._stale is None or self._stale[0] != w.stamp_ns:
            self._stale = (w.stamp_ns, np.asarray(self._ee_pos(x[:self.nq]), dtype=np.float64).copy(),
                               stamp_ns)
        hold = ReferenceWindow(stamp_ns, dt, self._stale[1][None, :])
        return on_grid(hold), (
            f"EE reference stale: the last window (stamp {ns_to_sec(w.stamp_ns):.3f} s) ended at "
            f"{ns_to_sec(w.end_ns):.3f} s; holding the EE position measured at {ns_to_sec(self._stale[2]):.3f} s")

    def blend(self, stamp_ns: int, x: np.ndarray, ref: ReferenceWindow,
              start: bool) -> tuple[ReferenceWindow, str]:
        """The reference window ``ref`` (N knots, the tick's grid) blended from the EE position at
        the resume into it: minimum jerk over distance / resume_speed_mps. ``start``: a resume
        begins now."""
        v = self.cfg["resume_speed_mps"]
        if start:
            self._ramp = None
            if v > 0:
                p0 = np.asarray(self._ee_pos(x[:self.nq]), dtype=np.float64).copy()
                dist = float(np.linalg.norm(ref.positions[0] - p0))
                if dist > 1e-3:
                    self._ramp = (stamp_ns, p0, max(dist / v, 0.5))
        if self._ramp is None:
            return ref, ""
        t0, p0, T = self._ramp
        N, dt = self.cfg["N"], self.cfg["dt"]
        tk = ns_to_sec(stamp_ns - t0) + dt * np.arange(N)
        if tk[0] >= T:
            self._ramp = None
            return ref, ""
        s = min_jerk(tk / T)
        p = ref.positions
        # positions blended; orientations (if any) as the window has them (the term's weight is small
        # next to the position's, and an orientation blend would need the measured EE rotation)
        return ReferenceWindow(ref.stamp_ns, ref.knot_dt, p0 + s[:, None] * (p - p0), orientations=ref.orientations,
                               orientation_weight=ref.orientation_weight), \
            f"resuming: EE reference blended from the measured EE position over {T:.2f} s"


def window_from_flat(stamp_ns: int, knot_dt: float, flat_6n) -> ReferenceWindow:
    """A ReferenceWindow from a solver-layout (6N,) reference (orientation slots dropped)."""
    a = np.asarray(flat_6n, dtype=np.float64).reshape(-1, 6)
    return ReferenceWindow(stamp_ns, knot_dt, a[:, :3])
