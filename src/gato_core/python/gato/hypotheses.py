"""Hypothesis batches: the batch dimension carries B model hypotheses, and reality picks one.

Instead of B independent problems, each batch entry of the solver solves the
SAME tick under its own hypothesis (an external-wrench guess, a parameter
spread, ...). Per tick, :class:`gato.controller.MPCController` runs::

    hypotheses.apply(solver, x_measured)            # program the B hypotheses
    result = solver.solve(...)                      # one batched solve
    best = hypotheses.select(solver, result, x_prev, u_prev, x_measured, dt)
    hypotheses.update(best, hypotheses.last_errors) # feed the outcome back

and applies the winner's control. With ``batch_size == 1`` the hooks are
no-ops (``select`` returns 0), so a single-hypothesis controller is a plain MPC.

Concrete wrench hypotheses (sampled or identified) build on this base class.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .common import world_wrench_to_joint_local

__all__ = ["HypothesisBatch", "world_wrench_to_gato_slot"]


def world_wrench_to_gato_slot(model, data, ee_frame_id, q, f_world) -> np.ndarray:
    """World-axes wrench at a frame's origin -> the solver's 6-number f_ext slot.

    Args:
        model, data: pinocchio Model / Data of the robot (e.g. ``solver.model`` /
            ``solver.data``).
        ee_frame_id: pinocchio frame id of the point of application (e.g.
            ``solver.ee_frame_id``).
        q: (nq,) configuration [rad] at which the wrench is re-expressed.
        f_world: (6,) ``[force(3) N; torque(3) N·m]``, world axes, torque about
            the frame origin.

    Returns:
        (6,) spatial force of the frame's parent body in that body's JOINT-LOCAL
        frame about the joint origin, ordered ``[angular(3) N·m; linear(3) N]`` —
        one row of the ``(B, 6)`` form of :meth:`gato.BSQP.set_f_ext_B`, which
        scatters it into the EE body (the parent joint of the solver's EE frame).
        For a frame on another body use
        :func:`gato.common.world_wrench_to_joint_local` (it also returns the body
        index) and the ``(B, 6 * n_bodies)`` form.

    The slot depends on q (the joint frame rotates with the arm): recompute it
    whenever the configuration changes.
    """
    f = np.asarray(f_world, dtype=np.float64)
    if f.shape != (6,):
        raise ValueError(f"f_world: expected shape (6,) [force; torque], got {f.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("f_world: contains NaN or Inf")
    qa = np.asarray(q, dtype=np.float64)
    if qa.shape != (model.nq,):
        raise ValueError(f"q: expected shape ({model.nq},), got {qa.shape}")
    if not np.all(np.isfinite(qa)):
        raise ValueError("q: contains NaN or Inf")
    fid = int(ee_frame_id)
    if not 0 <= fid < len(model.frames):
        raise ValueError(f"ee_frame_id: expected a frame id in [0, {len(model.frames)}), got {ee_frame_id!r}")
    _, slot = world_wrench_to_joint_local(model, data, fid, qa, f)
    return slot


class HypothesisBatch(ABC):
    """B parallel hypotheses evaluated by the batched solver each MPC tick.

    Subclasses set ``batch_size`` (must equal the solver's) and implement
    :meth:`apply` and :meth:`update`; :meth:`select` has a default scorer.

    Attributes:
        batch_size: number of hypotheses B.
        last_errors: (B,) scores of the last :meth:`select` (lower = better
            explains the measurement), or None before the first scoring.
    """

    batch_size: int = 1
    last_errors: np.ndarray | None = None

    @abstractmethod
    def apply(self, solver, x) -> None:
        """Sample/refresh the B hypotheses and program them into the solver before
        the solve (e.g. ``solver.set_f_ext_B``). ``x``: (nx,) measured state."""

    def select(self, solver, result, x_prev, u_prev, x_meas, dt) -> int:
        """Pick the hypothesis that best explains reality; return its index.

        Default scorer (hypotheses that change the dynamics): roll the PREVIOUS
        state and applied control one step under every entry's dynamics and
        compare with the measured state::

            x_next = solver.sim_forward(x_prev, u_prev, dt)   # (B, nx), per-entry wrench
            errors = ||x_next[b] - x_meas||                     # stored in last_errors
            best = argmin_b errors

        Args:
            solver: the gato.BSQP the batch runs on.
            result: this tick's SolveResult (unused by the default scorer;
                hypotheses that do not alter the dynamics override ``select`` and
                score from ``result.stats``, e.g. ``final_merit``).
            x_prev: (nx,) state at which ``u_prev`` was applied.
            u_prev: (nu,) control that was applied (solver control width).
            x_meas: (nx,) measured state now.
            dt: how long ``u_prev`` was applied [s].

        With ``batch_size == 1`` this returns 0 without rolling anything out.
        """
        B = int(self.batch_size)
        if B == 1:
            self.last_errors = np.zeros(1)
            return 0
        xp = np.repeat(np.asarray(x_prev, dtype=np.float64).reshape(1, -1), B, axis=0)
        up = np.repeat(np.asarray(u_prev, dtype=np.float64).reshape(1, -1), B, axis=0)
        x_next = np.asarray(solver.sim_forward(xp, up, float(dt)), dtype=np.float64)
        err = np.linalg.norm(x_next - np.asarray(x_meas, dtype=np.float64).reshape(1, -1), axis=1)
        err = np.where(np.isfinite(err), err, np.inf)
        self.last_errors = err
        return int(np.argmin(err))

    @abstractmethod
    def update(self, best_id: int, errors) -> None:
        """Feed the selection outcome back into the hypothesis sampler.
        ``errors``: the (B,) scores of :meth:`select` (``last_errors``)."""

    def reset(self) -> None:
        """Forget sampler state (the controller calls this from ``reset``)."""
        self.last_errors = None

    def get_stats(self) -> dict:
        """Diagnostics reported as ``StepResult.hypo_stats`` (default: the last errors)."""
        return {"last_errors": None if self.last_errors is None else np.array(self.last_errors)}
