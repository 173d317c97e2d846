"""The run record of a closed-loop run: one row per tick, its stats and its plot."""
from __future__ import annotations

import numpy as np

__all__ = ["RunRecord"]


_INT_COLUMNS = ("best_trajectory_id", "active_goal")


class RunRecord:
    """What a closed-loop run produced, one row per planner step (measured after the world
    advanced, before the step's solve).

    Columns (arrays after :meth:`finish`): ``timestamps`` (T,) s; ``ee_actual`` (T, 3) m;
    ``joint_positions`` (T, nq) rad; ``joint_velocities`` (T, nv) rad/s; ``torques`` (T, nu)
    N*m (knot 0 of the step's command, as applied); ``solve_times`` / ``step_wall_times``
    (T,) ms (the planner's own solve time / the wall time of its step); ``best_trajectory_id``
    (T,); the task's columns (goal_distances, goal_distances_knot0, references, ...).
    ``planner_stats``: the PlannerStats of every step. ``events``: [(t, kind, data)].
    """

    def __init__(self, nq, nv, nu, deadline_s):
        self.shapes = {"ee_actual": (0, 3), "references": (0, 3), "joint_positions": (0, nq),
                       "joint_velocities": (0, nv), "torques": (0, nu)}
        self.deadline_s = float(deadline_s)
        self.columns = {k: [] for k in ("timestamps", "solve_times", "step_wall_times", "ee_actual",
                                        "joint_positions", "joint_velocities", "torques", "best_trajectory_id")}
        self.planner_stats, self.events = [], []
        self.stop_reason, self.sim_time, self.results = "", 0.0, {}

    def add(self, **cols) -> None:
        for k, v in cols.items():
            self.columns.setdefault(k, []).append(v)

    def finish(self, stop_reason: str, sim_time: float, results: dict) -> None:
        self.stop_reason, self.sim_time, self.results = stop_reason, float(sim_time), dict(results)

    def stats(self) -> dict:
        """The record as one dict: the columns as arrays (ints where they count), the task
        results, and :meth:`summary`."""
        out = {}
        for k, v in self.columns.items():
            a = np.array(v, dtype=int if k in _INT_COLUMNS else np.float64)
            out[k] = np.zeros(self.shapes[k]) if (not v and k in self.shapes) else a
        out["ee_positions"] = out["ee_actual"]  # alias
        out.update(self.results)
        out.update(self.summary(out))
        return out

    def summary(self, cols=None) -> dict:
        """Scalars of the run: ``mean_tracking_error`` / ``max_tracking_error`` m (over
        goal_distances_knot0), ``mean_goal_distance`` m, ``deadline_s`` s, ``deadline_misses``
        (steps whose wall time exceeded deadline_s) and ``deadline_miss_rate``, ``n_ticks``,
        ``sim_time`` s, ``stop_reason``."""
        c = cols if cols is not None else {k: np.asarray(v, dtype=float) for k, v in self.columns.items()
                                           if k in ("goal_distances_knot0", "goal_distances", "step_wall_times")}
        err = np.asarray(c.get("goal_distances_knot0", []), dtype=float)
        gd = np.asarray(c.get("goal_distances", []), dtype=float)
        wall = np.asarray(c["step_wall_times"], dtype=float)
        misses = int(np.sum(wall > self.deadline_s * 1000.0))
        nan = float("nan")
        return dict(mean_tracking_error=float(np.mean(err)) if err.size else nan,
                    max_tracking_error=float(np.max(err)) if err.size else nan,
                    mean_goal_distance=float(np.mean(gd)) if gd.size else nan, deadline_s=self.deadline_s,
                    deadline_misses=misses, deadline_miss_rate=float(misses / wall.size) if wall.size else 0.0,
                    n_ticks=int(wall.size), sim_time=self.sim_time, stop_reason=self.stop_reason)

    def plot(self, path, title=None):
        """PNG of the run (gato.plotting.plot_tracking)."""
        from .plotting import plot_tracking

        return plot_tracking(self, path, title=title)
