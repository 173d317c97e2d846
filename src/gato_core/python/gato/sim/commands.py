"""Commands: what a world plays over one control period.

A command answers ``torque(i, sim_dt, q, dq)``: the (nu,) N*m it plays at substep i of a
period, from the state (q, dq) at the start of that substep. :class:`HoldTorque`,
:class:`PlanPlayback` (a plan knot by knot), :class:`StateFeedback` (a law per substep);
:func:`command_of` picks the one a planner's answer asks for.
"""
from __future__ import annotations

import math

import numpy as np

from ..planners.planner import Plan
from .clock import EPS

__all__ = ["HoldTorque", "PlanPlayback", "StateFeedback", "command_of"]


class HoldTorque:
    """A torque (nu,) N*m held over the whole period."""

    def __init__(self, u):
        self.u = np.asarray(u, dtype=np.float64)

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        return self.u


class PlanPlayback:
    """A :class:`gato.planner.Plan` played knot by knot: substep i of a period plays the control
    of knot floor(i * sim_dt / plan.dt) (capped at the last control)."""

    def __init__(self, plan):
        self.plan = plan

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        return self.plan.control(int(math.floor(i / (self.plan.dt / sim_dt) + EPS)))


class StateFeedback:
    """A torque law re-evaluated at every substep from the state, ``law(q, dq) -> (nu,)`` N*m (a
    drive's servo-rate fallback: gato.safety.JointHold / JointBrake). ``last``: the torque of
    the latest substep (None before one)."""

    def __init__(self, law):
        self.law, self.last = law, None

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        self.last = np.asarray(self.law(q, dq), dtype=np.float64)
        return self.last


def command_of(result):
    """The command a planner's answer asks the world to play: a Plan (a warm-up) or a
    gato.planner.StepResult is played knot by knot when it carries a plan, else its torque
    is held."""
    plan = result if isinstance(result, Plan) else result.plan
    return PlanPlayback(plan) if plan is not None else HoldTorque(result.u)
