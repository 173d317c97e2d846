// The time-varying feedback gains of a plan on the CUDA backend's numeric core, host and
// device (GATO_HD): the finite-horizon LQR of one entry's Gauss-Newton model taken at the
// plan (docs/solver_method.md, "Feedback gains"; the CPU backend's solver_gains.hpp), on the
// very blocks setup_kkt (sqp_kkt.hpp) assembles for step 1: no trust region rho (a step
// term, not part of the model), the zero-weight control floor kept (factor_schur's). One
// entry = one call: HostBatch runs it on the CPU, kernels.cu in one CUDA thread.
#pragma once

#include "gato_cuda/dense.hpp"
#include "gato_cuda/sqp_kkt.hpp"

namespace gato {
namespace cuda {

/// riccati_gains' code when the plan's linearisation is not finite (the dynamics fail or the
/// cost / defects are NaN / Inf at the plan).
constexpr int kGainsNotFinite = -2;

/// K_k (row-major (N-1) x nu x nx: du_k = K_k dx_k, u = u_k + K_k (x - x_k)) of the plan
/// e.xu (L) from e.xs (nx) toward e.ref (6N), with e.fext (6 nv per knot, or null) and the
/// weights of P. The model: Q_k = [[Qpp_k, 0], [0, diag(qvv_k)]], R_k = diag(Rd_k) (+ the
/// zero-weight floor u_prox - s_kj where s_kj < u_prox and no control barrier), S_k =
/// [Suq_k, 0] (u_ref = gravity), A_k, B_k of the integrator; then P_{N-1} = Q_{N-1} and for
/// k = N-2 .. 0: Quu = R_k + B' P B, Qux = S_k + B' P A, K_k = -Quu^-1 Qux,
/// P <- Q_k + A' P A + Qux' K_k (symmetrized).
/// Reads e.xs, e.ref, e.fext, e.xu (not written); e.w is the workspace (overwritten);
/// e.lam, e.st, e.stats and the per-iteration arrays are not used. Returns -1 on success,
/// the knot k whose Quu is not positive definite (the model has no unique minimizer), or
/// kGainsNotFinite.
template <typename S>
GATO_HD int riccati_gains(const SqpShared<S>& P, SqpEntry<S> e, S* K) {
  const int nv = P.nv, nx = P.nx, nu = P.nu, N = P.N;
  SqpEntryState<S> st{};  // setup_kkt's merit reads mu (0 here: only its finiteness is used)
  e.st = &st;
  if (!hd_isfinite(setup_kkt(P, e))) return kGainsNotFinite;
  SqpWork<S>& w = e.w;
  // Scratch from the arrays only steps 2-3 use (factor_schur / PCG / bdsv are not run here).
  S* Pm = w.Md;     // P_{k+1} (nx x nx)
  S* PA = w.Dinv;   // P A (nx x nx)
  S* PB = w.BRinv;  // P B (nx x nu)
  S* Qux = w.phi;   // nu x nx
  S* Quu = w.E;     // nu x nu
  S* Lq = w.E + nu * nu;
  S* y = w.vx;      // one column (nu)
  const int last = N - 1;
  for (int i = 0; i < nx * nx; ++i) Pm[i] = S(0);
  for (int a = 0; a < nv; ++a) {
    for (int b = 0; b < nv; ++b) Pm[a * nx + b] = w.Qpp[last * nv * nv + a * nv + b];
    Pm[(nv + a) * nx + nv + a] = w.qvv[last * nv + a];
  }
  const bool ctrl_barrier = P.ctrl_lim_cost > 0;
  for (int k = N - 2; k >= 0; --k) {
    const S* A = w.A + k * nx * nx;
    const S* Bm = w.Bm + k * nx * nu;
    for (int i = 0; i < nx; ++i) {
      for (int j = 0; j < nu; ++j) {
        S s = 0;
        for (int l = 0; l < nx; ++l) s += Pm[i * nx + l] * Bm[l * nu + j];
        PB[i * nu + j] = s;
      }
      for (int j = 0; j < nx; ++j) {
        S s = 0;
        for (int l = 0; l < nx; ++l) s += Pm[i * nx + l] * A[l * nx + j];
        PA[i * nx + j] = s;
      }
    }
    for (int i = 0; i < nu; ++i) {
      for (int j = 0; j < nu; ++j) {
        S s = 0;
        for (int l = 0; l < nx; ++l) s += Bm[l * nu + i] * PB[l * nu + j];
        Quu[i * nu + j] = s;
      }
      S r = w.Rd[k * nu + i];
      if (!ctrl_barrier) {  // the step's zero-weight floor (factor_schur)
        const S wi = P.u_weight(k, i);
        if (wi < P.u_prox) r += P.u_prox - wi;
      }
      Quu[i * nu + i] += r;
      for (int j = 0; j < nx; ++j) {  // Qux = (P B)' A
        S s = 0;
        for (int l = 0; l < nx; ++l) s += PB[l * nu + i] * A[l * nx + j];
        Qux[i * nx + j] = s;
      }
      if (P.u_ref_gravity)
        for (int j = 0; j < nv; ++j) Qux[i * nx + j] += w.Suq[k * nu * nv + i * nv + j];
    }
    if (!dense::cholesky(Quu, Lq, nu)) return k;  // reads the lower triangle, as Eigen's LLT does
    S* Kk = K + k * nu * nx;
    for (int c = 0; c < nx; ++c) {
      for (int i = 0; i < nu; ++i) y[i] = Qux[i * nx + c];
      dense::solve_lower(Lq, y, nu);
      dense::solve_lower_t(Lq, y, nu);
      for (int i = 0; i < nu; ++i) Kk[i * nx + c] = -y[i];
    }
    // P <- Q_k + A' (P A) + Qux' K_k, symmetrized.
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < nx; ++j) {
        S s = 0;
        for (int l = 0; l < nx; ++l) s += A[l * nx + i] * PA[l * nx + j];
        for (int l = 0; l < nu; ++l) s += Qux[l * nx + i] * Kk[l * nx + j];
        Pm[i * nx + j] = s;  // the old P is no longer read (PA holds what is needed)
      }
    for (int a = 0; a < nv; ++a) {
      for (int b = 0; b < nv; ++b) Pm[a * nx + b] += w.Qpp[k * nv * nv + a * nv + b];
      Pm[(nv + a) * nx + nv + a] += w.qvv[k * nv + a];
    }
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < i; ++j) Pm[i * nx + j] = Pm[j * nx + i] = S(0.5) * (Pm[i * nx + j] + Pm[j * nx + i]);
  }
  for (int i = 0; i < (N - 1) * nu * nx; ++i)
    if (!hd_isfinite(K[i])) return kGainsNotFinite;
  return -1;
}

}  // namespace cuda
}  // namespace gato
