"""What the solver's KKT assembly computes at a given trajectory, for tests, the NumPy reference
comparisons and the exact-Hessian checks (:class:`KKTInspectionAPI`, mixed into
:class:`gato.core.bsqp.BSQP`; it uses its ``_s`` native solver, ``batch_size``, ``N``, ``nx``,
``xu_size`` and ``dtype``). Nothing here changes a plan: each call reassembles the blocks the next
solve reassembles anyway."""
from __future__ import annotations

import numpy as np

from .arrays import batch_array, to_numpy


class KKTInspectionAPI:
    """The merit, the KKT blocks and the exact stage Hessians of trajectories (mixin of BSQP)."""

    def debug_stage_hessian(self, xu_B, xcur_B, eepos_goals_B, lam_B) -> np.ndarray:
        """(B, N, nx+nu, nx+nu) the exact Hessians of the Lagrangian per knot, z_k = (x_k, u_k), at
        trajectories ``xu_B`` with multipliers ``lam_B`` (B, N, nx) in the solver's sign
        (:meth:`get_lambda` rows 0..N-1; L = cost - sum_k lam_k' c_k, c_{k+1} = x_{k+1} - f(x_k, u_k)):
        the cost's blocks plus the second-order terms, before the positive-definite modification,
        without rho; the last knot fills only its (nx, nx) block. Whether or not the exact Hessian
        is on. Between solves (it overwrites the KKT blocks the next solve reassembles)."""
        B = self.batch_size
        xu = batch_array(xu_B, "xu_B", B, self.xu_size, self.dtype)
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        lam = to_numpy(lam_B, "lam_B", self.dtype)
        if lam.shape != (B, self.N, self.nx):
            raise ValueError(f"lam_B: expected shape ({B}, {self.N}, {self.nx}), got {tuple(lam.shape)}")
        if not np.all(np.isfinite(lam)):
            raise ValueError("lam_B: contains NaN or Inf")
        return np.asarray(self._s.debug_stage_hessian(xu, x, ref, np.ascontiguousarray(lam)), dtype=np.float64)

    def merit(self, xu_B, xcur_B, eepos_goals_B) -> np.ndarray:
        """(B,) merit φ = cost + μ·‖defects‖₁ of trajectories ``xu_B`` (no knot-0 replacement)."""
        B = self.batch_size
        xu = batch_array(xu_B, "xu_B", B, self.xu_size, self.dtype)
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        return np.asarray(self._s.merit(xu, x, ref), dtype=np.float64)

    def debug_setup_kkt(self, xu_B, xcur_B, eepos_goals_B) -> dict:
        """Assemble the KKT blocks at a trajectory (no solve, no knot-0 replacement):
        {Q (B,N,nx,nx), R (B,N-1,nu,nu), q (B,N,nx), r (B,N-1,nu), A (B,N-1,nx,nx),
        B (B,N-1,nx,nu), c (B,N,nx)}. Q excludes the trust-region rho."""
        B = self.batch_size
        xu = batch_array(xu_B, "xu_B", B, self.xu_size, self.dtype)
        x = batch_array(xcur_B, "xcur_B", B, self.nx, self.dtype)
        ref = batch_array(eepos_goals_B, "eepos_goals_B", B, 6 * self.N, self.dtype)
        return {k: np.asarray(v, dtype=np.float64) for k, v in self._s.debug_setup_kkt(xu, x, ref).items()}
