"""Commands: what a world plays over one control period.

A command answers ``torque(i, sim_dt, q, dq)``: the (nu,) N*m it plays at substep i of a
period, from the state (q, dq) at the start of that substep. :class:`HoldTorque`,
:class:`PlanPlayback` (a plan knot by knot), :class:`PlanFeedback` (a plan knot by knot plus
feedback toward its state: PD and / or the plan's own Riccati gains, per a
:class:`FeedbackLaw`), :class:`StateFeedback` (a law per substep); :func:`command_of` picks
the one a planner's answer asks for.
"""
from __future__ import annotations

import math

import numpy as np

from ..planners.planner import Plan
from .clock import EPS

__all__ = ["FEEDBACK_MODES", "FeedbackLaw", "HoldTorque", "PlanFeedback", "PlanPlayback", "StateFeedback",
           "command_of"]


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


#: Feedback modes of :class:`FeedbackLaw` (None, the default of the loops, plays the plan open loop).
FEEDBACK_MODES = ("pd", "riccati", "riccati+pd")


class FeedbackLaw:
    """How a plan is executed between two plans: its torque plus state feedback toward its state.

    Args:
        mode: "pd" (joint PD toward the planned state, the ros2_control plugin's executor),
            "riccati" (the plan's own gains ``K_k``, :attr:`Plan.K`), "riccati+pd" (both summed).
        kp, kd: (nu,) joint stiffness [N*m/rad] and damping [N*m*s/rad] of the PD term;
            None: the plugin's defaults, 0.1 and 0.01 x the effort limit (``effort``).
        limit: (nu,) saturation of the feedback term |tau_fb_j| <= limit_j [N*m] (before the
            world's own effort clamp); None: 0.25 x the effort limit.
        effort: (nu,) URDF effort limits [N*m] the defaults scale.

    A plan whose gains are absent, of the wrong shape or not finite has them dropped: the
    plan runs with the PD term instead (never open loop, never with the bad gains), counted
    in ``gains_dropped``; ``plans`` counts the plans executed.
    """

    def __init__(self, mode, effort, kp=None, kd=None, limit=None):
        if mode not in FEEDBACK_MODES:
            raise ValueError(f"feedback: expected one of {FEEDBACK_MODES} or None, got {mode!r}")
        effort = np.asarray(effort, dtype=np.float64).reshape(-1)
        n = effort.size

        def vec(v, default, name):
            out = np.array(default if v is None else v, dtype=np.float64).reshape(-1)
            if out.size == 1:
                out = np.full(n, float(out[0]))
            if out.size != n or not np.all(np.isfinite(out)) or np.any(out < 0):
                raise ValueError(f"{name}: expected {n} finite values >= 0, got {v!r}")
            return out

        self.mode = mode
        self.kp = vec(kp, 0.1 * effort, "feedback_kp")
        self.kd = vec(kd, 0.01 * effort, "feedback_kd")
        self.limit = vec(limit, 0.25 * effort, "feedback_limit")
        self.plans = 0
        self.gains_dropped = 0

    def usable_gains(self, plan):
        """The plan's gains (N - 1, nu_act, nx) when they are there, of the plan's shape and
        finite; else None (counted in ``gains_dropped`` when the mode wants them)."""
        K = getattr(plan, "K", None)
        if K is None:
            if self.mode != "pd":
                self.gains_dropped += 1
            return None
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 3 or K.shape[0] != plan.N - 1 or K.shape[1] < plan.nu_act or K.shape[2] != plan.nx \
                or not np.all(np.isfinite(K)):
            self.gains_dropped += 1
            return None
        return K[:, :plan.nu_act, :]

    def command(self, plan) -> "PlanFeedback":
        self.plans += 1
        return PlanFeedback(plan, self, None if self.mode == "pd" else self.usable_gains(plan))

    def counters(self) -> dict:
        return dict(mode=self.mode, plans=self.plans, gains_dropped=self.gains_dropped)


class PlanFeedback:
    """A plan played knot by knot with feedback: at substep i (time s = i sim_dt into the
    plan, knot k = floor(s / dt) capped at the last control) the torque is

        u_k + sat(K_k (x - x_plan(s)))                              riccati
        u_k + sat(kp (q_plan(s) - q) + kd (qd_plan(s) - qd))        pd (and riccati without gains)
        u_k + sat(both summed)                                      riccati+pd

    ``x_plan(s)`` is the plan's state interpolated linearly between knots k and k + 1 (held at
    the last knot past it), ``sat`` clips each joint to +-``law.limit``. ``K``: the plan's
    usable gains or None (PD)."""

    def __init__(self, plan, law: FeedbackLaw, K=None):
        self.plan, self.law, self.K = plan, law, K
        p = plan
        self._X = np.asarray(p.xu, dtype=np.float64)[:p.N * (p.nx + p.nu) - p.nu].copy()
        self._X = np.concatenate([self._X, np.zeros(p.nu)]).reshape(p.N, p.nx + p.nu)
        self.pd = K is None or law.mode == "riccati+pd"

    def torque(self, i: int, sim_dt: float, q=None, dq=None) -> np.ndarray:
        p, na = self.plan, self.plan.nu_act
        s = i * sim_dt
        f = s / p.dt
        k = min(int(math.floor(f + EPS)), p.N - 2)
        a = min(max(f - k, 0.0), 1.0)
        xp = (1.0 - a) * self._X[k, :p.nx] + a * self._X[k + 1, :p.nx]
        u = self._X[k, p.nx:p.nx + na]
        nq = q.size
        dx = np.concatenate([np.asarray(q, dtype=np.float64), np.asarray(dq, dtype=np.float64)]) - xp
        fb = np.zeros(na)
        if self.K is not None:
            fb += self.K[k] @ dx
        if self.pd:
            fb -= self.law.kp * dx[:na] + self.law.kd * dx[nq:nq + na]
        return u + np.clip(fb, -self.law.limit, self.law.limit)


def command_of(result, feedback: FeedbackLaw | None = None):
    """The command a planner's answer asks the world to play: a Plan (a warm-up) or a
    gato.planner.StepResult is played knot by knot when it carries a plan (with ``feedback``
    a :class:`PlanFeedback` of that law, else open loop), else its torque is held."""
    plan = result if isinstance(result, Plan) else result.plan
    if plan is None:
        return HoldTorque(result.u)
    return PlanPlayback(plan) if feedback is None else feedback.command(plan)
