"""The time-varying feedback gains of a solved plan: the Riccati recursion of the plan's
Gauss-Newton model (docs/solver_method.md, "Feedback gains").

The model is the one the SQP step solves, taken at the plan itself: the stage cost blocks
``Q_k`` (nx x nx), ``R_k`` (nu x nu), the cross blocks ``S_k = d2l/du dx`` (nu x nx) and the
dynamics Jacobians ``A_k`` (nx x nx), ``B_k`` (nx x nu) of :meth:`gato.BSQP.debug_setup_kkt`,
without the step-only trust region rho. The gains are the sensitivity of the plan's controls
to its initial state: with ``dx_0`` a change of the measured state, the plan of the model
changes by ``du_k = K_k dx_k``, ``dx_{k+1} = A_k dx_k + B_k du_k``, i.e. the executor plays

    u = u_k + K_k (x - x_k).
"""
from __future__ import annotations

import numpy as np

__all__ = ["FeedbackGainAPI", "riccati_gains"]


def riccati_gains(Q, R, S, A, B) -> np.ndarray:
    """Finite-horizon discrete LQR gains of one plan's linear-quadratic model.

    Args:
        Q: (N, nx, nx) state Hessians, knot N-1 included (the terminal cost).
        R: (N-1, nu, nu) control Hessians.
        S: (N-1, nu, nx) cross Hessians d2l/du dx (zeros when the cost has none).
        A: (N-1, nx, nx), B: (N-1, nx, nu) the dynamics Jacobians x_{k+1} = A_k x_k + B_k u_k.

    Returns (N-1, nu, nx) float64 ``K_k`` with ``du_k = K_k dx_k``: P_{N-1} = Q_{N-1}, then for
    k = N-2 .. 0: ``Quu = R_k + B_k' P B_k``, ``Qux = S_k + B_k' P A_k``, ``K_k = -Quu^-1 Qux``,
    ``P_k = Q_k + A_k' P A_k + Qux' K_k`` (symmetrized). Raises ValueError when a ``Quu`` is
    not positive definite (the model has no unique minimizer; the solver's step would have
    rejected it too) or when an input is not finite.
    """
    Q, R, S, A, B = (np.asarray(a, dtype=np.float64) for a in (Q, R, S, A, B))
    n = Q.shape[0] - 1
    for name, a in (("Q", Q), ("R", R), ("S", S), ("A", A), ("B", B)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"feedback gains: the plan's linearisation {name} contains NaN or Inf")
    nu = R.shape[-1]
    K = np.empty((n, nu, Q.shape[-1]))
    P = Q[n].copy()
    for k in range(n - 1, -1, -1):
        PB = P @ B[k]
        Quu = R[k] + B[k].T @ PB
        Qux = S[k] + PB.T @ A[k]
        try:
            L = np.linalg.cholesky(0.5 * (Quu + Quu.T))
        except np.linalg.LinAlgError:
            raise ValueError(f"feedback gains: R_k + B_k' P_k+1 B_k is not positive definite at knot {k}") from None
        K[k] = -np.linalg.solve(L.T, np.linalg.solve(L, Qux))
        P = Q[k] + A[k].T @ P @ A[k] + Qux.T @ K[k]
        P = 0.5 * (P + P.T)
    return K


class FeedbackGainAPI:
    """:meth:`feedback_gains` of :class:`gato.BSQP` (a mixin: it reads the solver's core
    ``_s``, its last solve ``_solved`` = (x_s, ref, xu) and its cost settings)."""

    def feedback_gains(self, row: int = 0) -> np.ndarray:
        """Time-varying feedback gains of the last solve's plan in batch row ``row`` (the
        winning row: ``PlannerStats.best_id`` / the controller's ``best_id``).

        Returns (N-1, nu, nx) float64 ``K_k`` such that ``u = u_k + K_k (x - x_k)`` applies the
        plan's own locally optimal feedback (x = [q; qd]); columns on q in N*m/rad, on qd in
        N*m*s/rad. (The plan executor's ``ExecutorPlan.K`` adds ``K (x_plan - x)``: it takes
        ``-K_k``.) ``K_k`` is the sensitivity of the plan's control u_k to its state x_k: the
        finite-horizon LQR (Riccati recursion, :func:`riccati_gains`) of the plan's
        Gauss-Newton model at the plan itself, i.e. the cost blocks Q_k, R_k, S_k and the
        integrator's Jacobians A_k, B_k of :meth:`debug_setup_kkt` (no trust-region rho; a
        control weight below the zero-weight floor is lifted to it as in the step). Where the
        plan's residuals and multipliers vanish the Gauss-Newton model is the exact Hessian and
        K_0 = du_0/dx_0 of a converged solve; elsewhere the gains drop the same second-order
        terms the step drops. Row groups: barrier and augmented-Lagrangian rows enter through
        their Gauss-Newton Hessian at the plan and the current duals (an active row stiffens
        the gains along its normal; they do not hold an active row exactly active); ADMM and
        telemetry rows are not in the model (the gains of the problem without them).
        docs/solver_method.md, "Feedback gains".

        The gains use the current weights, wrench and row groups with the last solve's state,
        reference and plan. Computed by the backend's core: on ``cpu`` the C++ core
        (``BatchSolver::feedback_gains``: the row's KKT assembly at the plan, then the
        recursion on those blocks: about one SQP iteration's linearisation); on ``cuda`` /
        ``cuda_host`` the CUDA backend's shared host + device code (gato_cuda/sqp_gains.hpp:
        its step-1 assembly at the plan and the same recursion, in one GPU thread on
        ``cuda``, on the CPU on ``cuda_host``; that backend has no row groups).
        :meth:`feedback_gains_numpy` is the NumPy twin. Raises ValueError before any solve,
        for a row outside [0, B), when the model has no unique minimizer, or (CUDA backends) when
        the plan's linearisation is not finite.
        """
        self._check_gains_call(row)
        x, ref, xu = self._solved
        r = int(row)
        K = self._s.feedback_gains(r, np.ascontiguousarray(xu[r]), np.ascontiguousarray(x[r]),
                                   np.ascontiguousarray(ref[r]))
        return np.asarray(K, dtype=np.float64)

    def feedback_gains_numpy(self, row: int = 0) -> np.ndarray:
        """:meth:`feedback_gains` computed in NumPy (:func:`riccati_gains`) from the blocks of
        :meth:`debug_setup_kkt` (the whole batch's assembly): the same model by a second
        implementation, for checks. Same arguments, result and errors; CPU backend only (the
        CUDA backends expose no KKT blocks: compare their :meth:`feedback_gains` with a
        ``backend="cpu"`` solver's, as test/test_cuda_gains.py does)."""
        if self.backend != "cpu":
            raise ValueError(f"feedback_gains_numpy: not available on the {self.backend!r} backend (it reads "
                             "debug_setup_kkt's blocks, CPU backend only); use feedback_gains, or a backend='cpu' "
                             "solver for the NumPy twin")
        self._check_gains_call(row)
        x, ref, xu = self._solved
        kkt = {k: np.array(v, dtype=np.float64)[int(row)] for k, v in self._s.debug_setup_kkt(xu, x, ref).items()}
        R = kkt["R"]
        if self.params.ctrl_lim_cost == 0:
            # The step's zero-weight floor (docs/solver_method.md, "Zero weights"; solver_schur.hpp).
            floor = 1e-8 if self.dtype == np.float64 else 1e-6  # gato::kZeroControlProx64 / 32
            idx = np.arange(self.nu)
            R[:, idx, idx] += np.maximum(floor - self._u_weights(), 0.0)
        return riccati_gains(kkt["Q"], R, kkt["S"], kkt["A"], kkt["B"])

    def _check_gains_call(self, row) -> None:
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < self.batch_size:
            raise ValueError(f"feedback_gains: row: expected an integer in [0, {self.batch_size}), got {row!r}")
        if getattr(self, "_solved", None) is None:
            raise ValueError("feedback_gains: no solved plan yet: call solve() or solve_warm() first")

    def _u_weights(self) -> np.ndarray:
        """(N-1, nu) control weights s_kj of the step (the core's CostModel::u_weight)."""
        if self._u_cost_vec is not None:
            return np.broadcast_to(np.asarray(self._u_cost_vec, dtype=np.float64), (self.N - 1, self.nu))
        if self._knot_weights is not None:
            return np.repeat(np.asarray(self._knot_weights, dtype=np.float64)[:self.N - 1, 2:3], self.nu, axis=1)
        return np.full((self.N - 1, self.nu), float(self.params.u_cost))
