"""External-wrench hypotheses of the controller node fed by the estimator node (``hypotheses:=estimator``).

:class:`EstimateSampler` follows the :mod:`gato.estimators` sampler contract with an estimate
that comes from outside (the latest geometry_msgs/WrenchStamped of the estimator node), so the
controller runs it through :class:`gato.hypotheses.ForceHypothesisBatch` (the same world ->
solver frame transform and ``set_f_ext_B`` injection as every wrench hypothesis). Rows of a
batch of B:

- ``[0]`` the estimate (B = 1: the only row: the solve is a plain MPC under the estimate);
- ``[1]`` zero (the robot-only model, so a wrong estimate cannot beat the nominal model);
- ``[2:]`` the estimate plus ``spread`` [N] times Fibonacci-sphere force directions.

The one-step rollout of ForceHypothesisBatch picks the row that explains the measured motion
best each tick. :class:`EstimateFeed` holds the latest estimate with its receipt time and
drops it to zero once older than ``timeout_s`` (a dead estimator must not leave a wrench in
the solve).
"""
from __future__ import annotations

import numpy as np

from gato.wrench.estimators import fibonacci_sphere
from gato.wrench.hypotheses import ForceHypothesisBatch

from .types import ns_to_sec

__all__ = ["EstimateSampler", "EstimateFeed"]


class EstimateSampler:
    """Sampler contract (``batch_size``, ``generate_batch``, ``update``, ``reset``, ``get_stats``)
    around an externally supplied wrench.

    Args: batch_size >= 1; spread >= 0 [N]: radius of rows 2.. around the estimate.
    """

    def __init__(self, batch_size: int, spread: float = 5.0):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        if not np.isfinite(spread) or spread < 0:
            raise ValueError(f"spread: expected a finite radius >= 0 N, got {spread!r}")
        self.batch_size = int(batch_size)
        self.spread = float(spread)
        self._dirs = fibonacci_sphere(max(self.batch_size - 2, 0))
        self.estimate = np.zeros(6)
        self.last_best = 0
        self.n_feedback = 0

    def set_estimate(self, wrench) -> None:
        """(6,) world-axes wrench [force N; torque N*m] at the EE origin; ValueError when not finite."""
        w = np.asarray(wrench, dtype=np.float64).reshape(-1)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ValueError(f"wrench: expected 6 finite values [force; torque], got {np.asarray(wrench).tolist()}")
        self.estimate = w.copy()

    def generate_batch(self) -> np.ndarray:
        """(B, 6) world-axes wrenches (rows in the module docstring)."""
        B = self.batch_size
        batch = np.repeat(self.estimate[None, :], B, axis=0)
        if B >= 2:
            batch[1] = 0.0
        if B >= 3:
            batch[2:, :3] += self.spread * self._dirs
        return batch

    def update(self, best_idx, prediction_errors, batch_used=None) -> None:
        """Record the winner (the estimate itself comes from the estimator node)."""
        self.last_best = int(best_idx)
        self.n_feedback += 1

    def reset(self) -> None:
        """Keeps the estimate (it is the estimator node's state, not this controller's)."""
        self.last_best = 0

    def get_stats(self) -> dict:
        return dict(estimate=self.estimate.copy(), last_best=self.last_best, n_feedback=self.n_feedback)


class EstimateFeed:
    """The latest estimate and the hypothesis batch built on it, for one solver.

    Args: solver: the controller's gato.BSQP (its ``model``, ``batch_size``); ee_frame: the
    frame the estimates act at; spread [N]: see :class:`EstimateSampler`; timeout_s > 0.
    """

    def __init__(self, solver, ee_frame: str, *, spread: float = 5.0, timeout_s: float = 0.5):
        self.sampler = EstimateSampler(int(solver.batch_size), spread)
        self.batch = ForceHypothesisBatch(self.sampler, solver.model, ee_frame)
        self.timeout_s = float(timeout_s)
        self._recv_ns = None
        self.received = 0
        self.expired = 0

    def set(self, wrench, now_ns: int) -> None:
        """A new estimate received at node time ``now_ns``; ValueError when not 6 finite values."""
        self.sampler.set_estimate(wrench)
        self._recv_ns = int(now_ns)
        self.received += 1

    def refresh(self, now_ns: int) -> bool:
        """Drop an estimate older than ``timeout_s`` to zero; True while a fresh one is in force."""
        if self._recv_ns is None:
            return False
        if ns_to_sec(int(now_ns) - self._recv_ns) > self.timeout_s:
            self.sampler.estimate = np.zeros(6)
            self._recv_ns = None
            self.expired += 1
            return False
        return True
