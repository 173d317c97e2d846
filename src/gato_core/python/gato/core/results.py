"""Result types of a batched solve: :class:`SolverStats` and :class:`SolveResult`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import from_numpy, kind_of, to_numpy


@dataclass
class SolverStats:
    """Per-solve solver statistics (batch-shaped numpy arrays).

    Shapes (B = batch size, I = SQP iterations the batch loop ran, G = row groups):

    - ``solve_time_us`` (int): wall time of the whole solve, microseconds.
    - ``sqp_iters`` (B,) int: iterations each entry ran (a converged entry stops).
    - ``kkt_converged`` (B,) bool: the warm dual already solved the Schur system.
    - ``final_merit`` / ``initial_merit`` (B,): merit at the end / start of the solve.
    - ``ls_num_iters`` (int): step sizes tried per line search (8).
    - ``pcg_iters`` (B, I) int: PCG iterations per SQP iteration (0 on bdsv).
    - ``pcg_times_us`` (I,): linear-solve time per SQP iteration, slowest entry, microseconds.
    - ``min_merit`` (B, I): lowest merit the line search found per iteration.
    - ``step_size`` (B, I): accepted step size, or -1 for a rejected iteration.
    - ``exact_step`` (B, I) bool: the exact-Hessian ('eh') solve took the exact Hessian's step
      that iteration (False: the Gauss-Newton fallback); None without eh or while the
      per-iteration statistics are off (the ROS SolverStats message does not carry it).
    - ``linsys`` (str): the linear-solve path of the last iteration ("pcg" | "bdsv").
    - ``budget_hit`` (bool): the wall-clock budget stopped the loop.
    - ``row_*`` / ``admm_*``: constraint row-group statistics, None while no row group is installed.
    """

    solve_time_us: int
    sqp_iters: np.ndarray
    kkt_converged: np.ndarray
    final_merit: np.ndarray
    initial_merit: np.ndarray
    ls_num_iters: int
    pcg_iters: np.ndarray
    pcg_times_us: np.ndarray
    min_merit: np.ndarray
    step_size: np.ndarray
    linsys: str = "pcg"
    budget_hit: bool = False
    row_max_violation: np.ndarray = None
    row_sum_violation: np.ndarray = None
    admm_r_prim: np.ndarray = None
    admm_r_dual: np.ndarray = None
    admm_iters: np.ndarray = None
    admm_linsys_iters: np.ndarray = None
    exact_step: np.ndarray = None


@dataclass
class SolveResult:
    """Result of one batched solve.

    ``xu`` is the flat batch of trajectories, one row per solve:
    ``[x_0, u_0, x_1, u_1, ..., x_{N-1}]`` with row length ``N*(nx+nu) - nu``
    (x = [q; qd] in rad and rad/s, u = joint torques in N·m). It is a fresh
    array of the caller's kind (numpy, torch or JAX).
    """

    xu: object
    solve_time_us: int
    stats: SolverStats
    nx: int
    nu: int
    N: int
    n_actuated: int = 0

    def __post_init__(self):
        if not self.n_actuated:
            self.n_actuated = self.nu

    @property
    def batch_size(self) -> int:
        return int(self.xu.shape[0])

    @property
    def n_fc(self) -> int:
        """Contact-wrench slots appended to each control (0 on the default variant)."""
        return self.nu - self.n_actuated

    def _np(self) -> np.ndarray:
        return to_numpy(self.xu, "xu", np.float64) if kind_of(self.xu) != "numpy" else self.xu

    def xu_b(self, b: int = 0):
        """Trajectory of batch entry b (flat, ``N*(nx+nu) - nu``)."""
        return self.xu[b]

    def _control(self, k: int, b: int) -> np.ndarray:
        if not 0 <= b < self.batch_size:
            raise ValueError(f"b: batch index out of range [0, {self.batch_size}), got {b}")
        k = int(min(max(k, 0), self.N - 2))
        start = k * (self.nx + self.nu) + self.nx
        return start

    def u0(self, b: int = 0):
        """First ACTUATED control of batch entry b, (n_actuated,) N·m: what an MPC applies."""
        s = self._control(0, b)
        return self.xu[b, s:s + self.n_actuated]

    def control_at(self, k: int, b: int = 0):
        """Actuated control at knot k (clamped to the last control knot N-2) of entry b."""
        s = self._control(k, b)
        return self.xu[b, s:s + self.n_actuated]

    def fc_at(self, k: int, b: int = 0):
        """Contact-wrench slots at knot k of entry b, (n_fc,); empty on the default variant."""
        s = self._control(k, b) + self.n_actuated
        return self.xu[b, s:s + self.n_fc]

    def fc_traj(self, b: int = 0):
        """(N-1, n_fc) contact-wrench trajectory of entry b."""
        rows = [self._np()[b, self._control(k, b) + self.n_actuated:self._control(k, b) + self.nu]
                for k in range(self.N - 1)]
        return from_numpy(np.array(rows, dtype=np.float64).reshape(self.N - 1, self.n_fc), kind_of(self.xu))

    @property
    def diverged(self) -> np.ndarray:
        """(B,) bool: non-finite merit or trajectory."""
        xu = self._np()
        return ~np.isfinite(self.stats.final_merit) | ~np.all(np.isfinite(xu), axis=1)
