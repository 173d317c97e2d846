"""The MPC tick of the floating-base contact-force solver as a :class:`gato.StepResult` (issue 34).

:class:`FloatingController` wraps a :class:`gato.core.floating_bsqp.FloatingBSQP` (what
``gato.BSQP(..., plant_type="go2", variant="fc")`` returns): ``step(x)`` solves from the measured
schema-2 state warm-started from the previous tick's shifted plan and returns the StepResult the
reference's MPCController returns, with ``u`` the ACTUATED torque to apply and ``fc`` the contact
wrenches of knot 0 (the [n; f] blocks per contact frame). MPCController itself stays fixed-base.
"""
from __future__ import annotations

import time

import numpy as np

from ..core.floating_bsqp import FloatingBSQP
from .planner import StepResult

__all__ = ["FloatingController"]


class FloatingController:
    """MPC ticks of a FloatingBSQP: ``step(x) -> StepResult`` (u, fc, xu_best, solve, iterations,
    limits = the row mechanism, row_viol per row group, wall_s, diverged)."""

    def __init__(self, solver):
        if not isinstance(solver, FloatingBSQP):
            raise ValueError(f"solver: expected the floating-base solver (gato.BSQP(..., variant='fc') on a "
                             f"floating-base robot), got {type(solver).__name__}")
        self.solver = solver

    def step(self, x) -> StepResult:
        t0 = time.perf_counter()
        r = self.solver.solve_tick(x)
        diverged = not (np.all(np.isfinite(r.W)) and np.all(np.isfinite(r.X)))
        return StepResult(u=r.u0(), best_id=0, xu_best=r.xu, solve=r, fc=r.fc_at(0), iterations=r.iters,
                          limits=self.solver.row_mech or "",
                          row_viol=r.row_max_violation if r.row_max_violation.size else None,
                          wall_s=time.perf_counter() - t0, diverged=diverged)

    def reset(self) -> None:
        """Forget the warm start and zero the row multipliers."""
        self.solver.reset()
