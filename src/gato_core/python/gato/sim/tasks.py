"""Tasks: what a closed-loop run tracks, its gates and its stop rule.

A :class:`Task` answers each tick with a :class:`TaskTick` (the reference window and the
record's columns): :class:`TrackingTask` (a reference followed in time), :class:`GoalTask`
(goals reached in turn, with timeouts).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..core.references import MinJerkSegment
from .clock import EPS

__all__ = ["Task", "TaskTick", "TrackingTask", "GoalTask"]


@dataclass
class TaskTick:
    """A task's answer at one tick: the ``window`` to solve against and per-tick ``columns``
    ({name: value}) for the run record."""

    window: object
    columns: dict = field(default_factory=dict)


class Task(ABC):
    """What the closed loop tracks. ``t_end`` [s]: the run lasts while t < t_end;
    ``end_reason``: the stop reason when it runs out of time; ``stop_reason``: set by
    :meth:`observe` when it stops the run early."""

    t_end: float
    end_reason: str = "time_limit"
    stop_reason: str = ""
    #: The per-tick columns :meth:`observe` returns (present in the record even without ticks).
    columns: tuple = ()

    @abstractmethod
    def begin(self, ee0) -> object:
        """The window of the seeding solve at t = 0 (ee0: EE position at the start)."""

    @abstractmethod
    def observe(self, t, q, dq, ee, events: list) -> TaskTick | None:
        """The tick at time t after the world advanced; None stops the run (set stop_reason)."""

    def results(self) -> dict:
        """Task results for the record (none by default)."""
        return {}


class TrackingTask(Task):
    """Follow ``reference`` (a gato.references.Reference) for ``duration`` [s] with N-knot
    windows of spacing dt; stops early when the next window would leave the reference's data
    ("reference_end"). Columns: goal_distances (||ee - knot 1||), goal_distances_knot0,
    references (knot 0)."""

    end_reason = "sim_time"
    columns = ("goal_distances", "goal_distances_knot0", "references")

    def __init__(self, reference, N, dt, duration):
        self.reference, self.N, self.dt, self.t_end = reference, int(N), float(dt), float(duration)

    def begin(self, ee0):
        return self.reference.window(0.0, self.N, self.dt)

    def observe(self, t, q, dq, ee, events):
        if not self.reference.covers(t, self.N, self.dt):
            self.stop_reason = "reference_end"
            return None
        win = self.reference.window(t, self.N, self.dt)
        p = win.positions
        return TaskTick(win, dict(goal_distances=float(np.linalg.norm(ee - p[min(1, len(p) - 1)])),
                                  goal_distances_knot0=float(np.linalg.norm(ee - p[0])), references=p[0].copy()))


class GoalTask(Task):
    """Visit ``goals`` (G, 3) [m] in order. A goal is reached when ||ee - goal|| < threshold [m]
    and ||dq||_velocity_norm < velocity_threshold [rad/s] have held at every tick for
    ``settle_time`` [s]; after ``timeout`` [s] it is abandoned ("timeout"). On a reach or a
    timeout the next goal switches in at that tick; the reference travels from the EE
    position at the switch to the goal along a ``ramp`` [s] minimum-jerk segment
    (gato.references.MinJerkSegment; 0 = a step). Columns: goal_distances (to the goal active
    before any switch), velocity_norms, active_goal, goal_distances_knot0, references.
    Events: ("goal", {index, outcome, t, dist, vel})."""

    columns = ("goal_distances", "goal_distances_knot0", "references", "velocity_norms", "active_goal")

    def __init__(self, goals, N, dt, *, timeout, threshold, velocity_threshold, velocity_norm, settle_time, ramp):
        try:
            np.linalg.norm(np.ones(2), ord=velocity_norm)
        except (ValueError, TypeError):
            raise ValueError(f"velocity_norm: expected a vector norm order (1, 2, np.inf, ...), "
                             f"got {velocity_norm!r}") from None
        self.goals = np.asarray(goals, dtype=np.float64)
        self.N, self.dt = int(N), float(dt)
        self.timeout, self.threshold, self.vel_threshold = timeout, threshold, velocity_threshold
        self.vel_norm, self.settle, self.ramp = velocity_norm, settle_time, ramp
        self.t_end = timeout * len(self.goals)
        G = len(self.goals)
        self.outcomes, self.reached_t = ["not_reached"] * G, [None] * G
        self.start_t, self.durations = [None] * G, [None] * G

    def _segment(self, t, ee):
        self.ref = MinJerkSegment(ee, self.goals[self.gi], t, self.ramp)

    def begin(self, ee0):
        self.gi, self.goal_start, self.dwell_from = 0, 0.0, None
        self.start_t[0] = 0.0
        self._segment(0.0, ee0)
        return self.ref.window(0.0, self.N, self.dt)

    def observe(self, t, q, dq, ee, events):
        gi = self.gi
        dist = float(np.linalg.norm(ee - self.goals[gi]))
        vel = float(np.linalg.norm(dq, ord=self.vel_norm))
        if dist < self.threshold and vel < self.vel_threshold:
            if self.dwell_from is None:
                self.dwell_from = t
        else:
            self.dwell_from = None
        reached = self.dwell_from is not None and t - self.dwell_from >= self.settle - EPS
        if reached or t - self.goal_start >= self.timeout - EPS:
            self.outcomes[gi] = "reached" if reached else "timeout"
            if reached:
                self.reached_t[gi] = t
            self.durations[gi] = t - self.goal_start
            events.append(("goal", dict(index=gi, outcome=self.outcomes[gi], t=t, dist=dist, vel=vel)))
            self.gi, self.dwell_from = gi + 1, None
            if self.gi >= len(self.goals):
                self.stop_reason = "goals_done"  # the finishing tick solves nothing and records no row
                return None
            self.goal_start = self.start_t[self.gi] = t
            self._segment(t, ee)
        win = self.ref.window(t, self.N, self.dt)
        return TaskTick(win, dict(goal_distances=dist, velocity_norms=vel, active_goal=gi,
                                  goal_distances_knot0=float(np.linalg.norm(ee - win.positions[0])),
                                  references=win.positions[0].copy()))

    def results(self) -> dict:
        G = len(self.goals)
        n = sum(o == "reached" for o in self.outcomes)
        return dict(goals=self.goals, goal_outcomes=list(self.outcomes), goal_reached_times=list(self.reached_t),
                    goal_start_times=list(self.start_t), goal_durations=list(self.durations),
                    goal_timeout=self.timeout, goals_reached=n, all_reached=n == G,
                    time_to_all_reached=float(max(self.reached_t)) if n == G else None)
