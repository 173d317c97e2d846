"""The EE position weight of pose windows (issue 30): :class:`gato.MPCController` multiplies the
solver's running and terminal EE position weights (``q_cost``, ``N_cost``) by
``pose_ee_weight_scale`` on the ticks whose reference window carries orientations, and solves
position-only ticks with the weights as configured.

Why: a pose path (the tool turning while it moves) asks the joints for about twice the speed of
the same position path, and every term the EE position trades against (the limit rows, the joint
limit barrier, the velocity and torque weights) makes the tracking lag more there; at the shipped
weights fr3's position error on the pose figure-8 was 1.9x the position-only run's. A stiffer
EE weight on pose ticks only restores it (docs/benchmarks_arms.md "Pose figure-8") and leaves the
position-only plans bit for bit as before.

The controller keeps the configured weights (``base``) while the scaled ones are in force, so that
the scale is applied to the configured value each time (never compounded) and a position-only tick
gets the configured value back exactly. A per-knot weight table (``set_cost_weights_per_knot``)
overrides the scalar weights and is not scaled. ROS-free."""
from __future__ import annotations

import math

__all__ = ["check_scale", "PoseEEScale"]


def check_scale(v, name: str = "pose_ee_weight_scale") -> float:
    """``v`` as a float: a finite number > 0 (1 = off); None -> 1. ValueError naming ``name``."""
    if v is None:
        return 1.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise ValueError(f"{name}: expected a finite number > 0 (1 = off), got {v!r}")
    f = float(v)
    if not math.isfinite(f) or f <= 0:
        raise ValueError(f"{name}: expected a finite number > 0 (1 = off), got {v!r}")
    return f


class PoseEEScale:
    """The scale and the configured EE weights it replaced (None while the configured ones are
    in force on the solver)."""

    def __init__(self, scale=None):
        self.scale = check_scale(scale)
        self.base = None   # (q_cost, N_cost) as configured, while scaled ones are on the solver

    def apply(self, solver, pose: bool) -> None:
        """Put the EE weights of the next solve on ``solver``: ``base * scale`` for a pose tick,
        ``base`` otherwise (a settings push only on a change)."""
        p = getattr(solver, "params", None)
        if p is None:
            return
        s = self.scale if pose else 1.0
        if self.base is None:
            if s == 1.0:
                return
            base = (float(p.q_cost), float(p.N_cost))
        else:
            base = self.base
        want = (base[0] * s, base[1] * s)
        if (float(p.q_cost), float(p.N_cost)) != want:
            solver.set_cost_weights(q_cost=want[0], N_cost=want[1])
        self.base = None if s == 1.0 else base

    def restore(self, solver) -> None:
        """The configured weights back on ``solver`` (before a caller changes them)."""
        self.apply(solver, False)

    def configured(self, solver) -> tuple:
        """(q_cost, N_cost) as configured (the solver's, without a pose tick's scale)."""
        if self.base is not None:
            return self.base
        p = solver.params
        return float(p.q_cost), float(p.N_cost)
