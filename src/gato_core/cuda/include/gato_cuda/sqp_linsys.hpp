// Steps 2-3 of the CUDA backend's SQP iteration (sqp.hpp), host and device (GATO_HD): the
// Schur complement M = -S (block tridiagonal) with its right-hand side, the linear solves on
// M lam = rhs (PCG with the stair preconditioner, the block Cholesky bdsv) and the primal step
// recovered from the dual (recover_step).
#pragma once

#include "gato_cuda/sqp_kkt.hpp"

namespace gato {
namespace cuda {

// ---------------------------------------------------------------------------------------
// Step 2: Schur complement.

/// out = Qtilde_k^-1 v (dense position block, diagonal velocity block).
template <typename S>
GATO_HD void apply_Qinv(const SqpShared<S>& P, const SqpWork<S>& w, int k, const S* v, S* out) {
  const int nv = P.nv;
  const S* Qi = w.Qpp_inv + k * nv * nv;
  for (int i = 0; i < nv; ++i) {
    S s = 0;
    for (int j = 0; j < nv; ++j) s += Qi[i * nv + j] * v[j];
    out[i] = s;
    out[nv + i] = w.qvv_inv[k * nv + i] * v[nv + i];
  }
}

template <typename S>
GATO_HD bool factor_schur(const SqpShared<S>& P, SqpEntry<S>& e) {
  const int nv = P.nv, nx = P.nx, nu = P.nu, N = P.N;
  SqpWork<S>& w = e.w;
  const S rho = e.st->rho;
  const bool vel_barrier = P.vel_lim_cost > 0, ctrl_barrier = P.ctrl_lim_cost > 0;
  if (P.u_ref_gravity) {
    // Eliminate the cost cross block per knot, in place (setup_kkt rebuilds the blocks):
    // du = dv + K dx_q, K = -Rt^-1 Suq (Rt: R with the zero-weight lift, diagonal here),
    // Qpp += Suq' K, q_q += K' r, A[:, q] += B K (docs/solver_method.md).
    for (int k = 0; k < N - 1; ++k) {
      S* K = w.Kg + k * nu * nv;
      const S* Sk = w.Suq + k * nu * nv;
      for (int j = 0; j < nu; ++j) {
        S r = w.Rd[k * nu + j];
        if (!ctrl_barrier) {
          const S wj = P.u_weight(k, j);
          if (wj < P.u_prox) r += P.u_prox - wj;
        }
        if (!(r > S(0))) return false;
        for (int b = 0; b < nv; ++b) K[j * nv + b] = -Sk[j * nv + b] / r;
      }
      S* Qk = w.Qpp + k * nv * nv;
      S* qk = w.qg + k * nx;
      const S* rk = w.rg + k * nu;
      for (int a = 0; a < nv; ++a) {
        S sq = 0;
        for (int j = 0; j < nu; ++j) sq += K[j * nv + a] * rk[j];
        qk[a] += sq;
        for (int b = 0; b < nv; ++b) {
          S s = 0;
          for (int j = 0; j < nu; ++j) s += Sk[j * nv + a] * K[j * nv + b];
          Qk[a * nv + b] += s;
        }
      }
      S* A = w.A + k * nx * nx;
      const S* B = w.Bm + k * nx * nu;
      for (int i = 0; i < nx; ++i)
        for (int b = 0; b < nv; ++b) {
          S s = 0;
          for (int j = 0; j < nu; ++j) s += B[i * nu + j] * K[j * nv + b];
          A[i * nx + b] += s;
        }
    }
  }
  for (int k = 0; k < N; ++k) {
    S* T = w.tmp;
    for (int i = 0; i < nv * nv; ++i) T[i] = w.Qpp[k * nv * nv + i];
    for (int i = 0; i < nv; ++i) T[i * nv + i] += rho;
    if (!dense::cholesky(T, w.tmp2, nv)) return false;
    dense::chol_inverse(w.tmp2, w.Qpp_inv + k * nv * nv, w.vx, nv);
    for (int i = 0; i < nv; ++i) {
      S q = w.qvv[k * nv + i];
      if (!vel_barrier && P.qd_weight(k) == S(0)) q += rho;
      if (!(q > S(0))) return false;
      w.qvv_inv[k * nv + i] = S(1) / q;
    }
    if (k < N - 1) {
      for (int j = 0; j < nu; ++j) {
        S r = w.Rd[k * nu + j];
        if (!ctrl_barrier) {
          const S wj = P.u_weight(k, j);
          if (wj < P.u_prox) r += P.u_prox - wj;
        }
        if (!(r > S(0))) return false;
        w.Rinv[k * nu + j] = S(1) / r;
      }
    }
  }
  // M_00 = Qtilde_0^-1, rhs_0 = Qtilde_0^-1 q_0 - c_0.
  S* M0 = w.Md;
  for (int i = 0; i < nx * nx; ++i) M0[i] = S(0);
  for (int i = 0; i < nv; ++i) {
    for (int j = 0; j < nv; ++j) M0[i * nx + j] = w.Qpp_inv[i * nv + j];
    M0[(nv + i) * nx + nv + i] = w.qvv_inv[i];
  }
  apply_Qinv(P, w, 0, w.qg, w.vx);
  for (int i = 0; i < nx; ++i) w.rhs[i] = w.vx[i] - w.c[i];
  for (int k = 0; k < N - 1; ++k) {
    const S* A = w.A + k * nx * nx;
    const S* B = w.Bm + k * nx * nu;
    S* phi = w.phi + k * nx * nx;
    S* BR = w.BRinv + k * nx * nu;
    const S* Qi = w.Qpp_inv + k * nv * nv;
    for (int i = 0; i < nx; ++i) {
      for (int j = 0; j < nv; ++j) {
        S s = 0;
        for (int l = 0; l < nv; ++l) s += A[i * nx + l] * Qi[l * nv + j];
        phi[i * nx + j] = s;
        phi[i * nx + nv + j] = A[i * nx + nv + j] * w.qvv_inv[k * nv + j];
      }
      for (int j = 0; j < nu; ++j) BR[i * nu + j] = B[i * nu + j] * w.Rinv[k * nu + j];
    }
    S* Mk = w.Md + (k + 1) * nx * nx;
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < nx; ++j) {
        S s = 0;
        for (int l = 0; l < nx; ++l) s += phi[i * nx + l] * A[j * nx + l];
        for (int l = 0; l < nu; ++l) s += BR[i * nu + l] * B[j * nu + l];
        Mk[i * nx + j] = s;
      }
    const S* Qn = w.Qpp_inv + (k + 1) * nv * nv;
    for (int i = 0; i < nv; ++i) {
      for (int j = 0; j < nv; ++j) Mk[i * nx + j] += Qn[i * nv + j];
      Mk[(nv + i) * nx + nv + i] += w.qvv_inv[(k + 1) * nv + i];
    }
    // rhs_{k+1} = Qtilde_{k+1}^-1 q_{k+1} - (c_{k+1} + phi_k q_k + B R^-1 r_k)
    apply_Qinv(P, w, k + 1, w.qg + (k + 1) * nx, w.vx);
    const S* qk = w.qg + k * nx;
    const S* rk = w.rg + k * nu;
    for (int i = 0; i < nx; ++i) {
      S s = w.c[(k + 1) * nx + i];
      for (int l = 0; l < nx; ++l) s += phi[i * nx + l] * qk[l];
      for (int l = 0; l < nu; ++l) s += BR[i * nu + l] * rk[l];
      w.rhs[(k + 1) * nx + i] = w.vx[i] - s;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Step 3: linear solves on M lam = rhs.

/// out = M p: M_kk p_k - phi_{k-1} p_{k-1} - phi_k' p_{k+1}.
template <typename S>
GATO_HD void matvec(const SqpShared<S>& P, const SqpWork<S>& w, const S* p, S* out) {
  const int nx = P.nx, N = P.N;
  for (int k = 0; k < N; ++k) {
    const S* Mk = w.Md + k * nx * nx;
    for (int i = 0; i < nx; ++i) {
      S s = 0;
      for (int j = 0; j < nx; ++j) s += Mk[i * nx + j] * p[k * nx + j];
      if (k > 0) {
        const S* ph = w.phi + (k - 1) * nx * nx;
        for (int j = 0; j < nx; ++j) s -= ph[i * nx + j] * p[(k - 1) * nx + j];
      }
      if (k < N - 1) {
        const S* ph = w.phi + k * nx * nx;
        for (int j = 0; j < nx; ++j) s -= ph[j * nx + i] * p[(k + 1) * nx + j];
      }
      out[k * nx + i] = s;
    }
  }
}

template <typename S>
GATO_HD S dotn(const S* a, const S* b, int n) {
  S s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// Preconditioner diagonal D_k = M_kk + rho Ibar, inverted.
template <typename S>
GATO_HD bool factor_preconditioner(const SqpShared<S>& P, SqpEntry<S>& e) {
  const int nx = P.nx, nv = P.nv;
  SqpWork<S>& w = e.w;
  for (int k = 0; k < P.N; ++k) {
    for (int i = 0; i < nx * nx; ++i) w.tmp[i] = w.Md[k * nx * nx + i];
    for (int i = 0; i < nv; ++i) w.tmp[i * nx + i] += e.st->rho;
    if (!dense::cholesky(w.tmp, w.tmp2, nx)) return false;
    dense::chol_inverse(w.tmp2, w.Dinv + k * nx * nx, w.vx, nx);
  }
  return true;
}

/// out = (D^-1 - D^-1 O D^-1) r (O: the off-diagonal part of M).
template <typename S>
GATO_HD void precondition(const SqpShared<S>& P, SqpWork<S>& w, const S* r, S* out) {
  const int nx = P.nx, N = P.N;
  for (int k = 0; k < N; ++k) {
    const S* D = w.Dinv + k * nx * nx;
    for (int i = 0; i < nx; ++i) w.y[k * nx + i] = dotn(D + i * nx, r + k * nx, nx);
  }
  for (int k = 0; k < N; ++k)
    for (int i = 0; i < nx; ++i) {
      S s = 0;
      if (k > 0) {
        const S* ph = w.phi + (k - 1) * nx * nx;
        for (int j = 0; j < nx; ++j) s -= ph[i * nx + j] * w.y[(k - 1) * nx + j];
      }
      if (k < N - 1) {
        const S* ph = w.phi + k * nx * nx;
        for (int j = 0; j < nx; ++j) s -= ph[j * nx + i] * w.y[(k + 1) * nx + j];
      }
      w.w[k * nx + i] = s;
    }
  for (int k = 0; k < N; ++k) {
    const S* D = w.Dinv + k * nx * nx;
    for (int i = 0; i < nx; ++i) out[k * nx + i] = w.y[k * nx + i] - dotn(D + i * nx, w.w + k * nx, nx);
  }
}

/// PCG from the warm dual (r = rhs - M lam and z = P^-1 r set by the caller).
template <typename S>
GATO_HD int solve_pcg(const SqpShared<S>& P, SqpEntry<S>& e) {
  SqpWork<S>& w = e.w;
  const int n = P.N * P.nx;
  S rz = dotn(w.r, w.z, n);
  const S rz0 = hd_abs(rz);
  if (rz0 < P.pcg_floor) return 0;
  for (int i = 0; i < n; ++i) w.p[i] = w.z[i];
  int it = 0;
  while (it < P.max_pcg_iters) {
    matvec(P, w, w.p, w.Mp);
    const S pMp = dotn(w.p, w.Mp, n);
    if (!(pMp > S(0))) break;  // lost positive definiteness numerically: keep lam
    const S alpha = rz / pMp;
    for (int i = 0; i < n; ++i) {
      e.lam[i] += alpha * w.p[i];
      w.r[i] -= alpha * w.Mp[i];
    }
    precondition(P, w, w.r, w.z);
    const S rz_new = dotn(w.r, w.z, n);
    ++it;
    if (hd_abs(rz_new) < P.pcg_floor + e.st->pcg_tol * rz0) break;
    const S beta = rz_new / rz;
    for (int i = 0; i < n; ++i) w.p[i] = w.z[i] + beta * w.p[i];
    rz = rz_new;
  }
  return it;
}

/// Block Cholesky of M (block Thomas) and lam += M^-1 r; sets converged from r' M^-1 r.
template <typename S>
GATO_HD bool solve_bdsv(const SqpShared<S>& P, SqpEntry<S>& e) {
  const int nx = P.nx, N = P.N, n2 = nx * nx;
  SqpWork<S>& w = e.w;
  for (int k = 0; k < N; ++k) {
    for (int i = 0; i < n2; ++i) w.tmp[i] = w.Md[k * n2 + i];
    if (k > 0) {
      S* E = w.E + k * n2;
      for (int i = 0; i < n2; ++i) E[i] = -w.phi[(k - 1) * n2 + i];
      dense::right_solve_lower_t(w.Lc + (k - 1) * n2, E, nx, nx);
      for (int i = 0; i < nx; ++i)
        for (int j = 0; j < nx; ++j) w.tmp[i * nx + j] -= dotn(E + i * nx, E + j * nx, nx);
    }
    if (!dense::cholesky(w.tmp, w.Lc + k * n2, nx)) return false;
  }
  for (int k = 0; k < N; ++k) {  // y_k = L_k^-1 (r_k - E_k y_{k-1})
    S* yk = w.y + k * nx;
    for (int i = 0; i < nx; ++i) {
      S s = w.r[k * nx + i];
      if (k > 0) s -= dotn(w.E + k * n2 + i * nx, w.y + (k - 1) * nx, nx);
      yk[i] = s;
    }
    dense::solve_lower(w.Lc + k * n2, yk, nx);
  }
  for (int k = N - 1; k >= 0; --k) {  // d_k = L_k^-T (y_k - E_{k+1}' d_{k+1})
    S* dk = w.w + k * nx;
    for (int i = 0; i < nx; ++i) {
      S s = w.y[k * nx + i];
      if (k < N - 1) {
        const S* E = w.E + (k + 1) * n2;
        for (int j = 0; j < nx; ++j) s -= E[j * nx + i] * w.w[(k + 1) * nx + j];
      }
      dk[i] = s;
    }
    dense::solve_lower_t(w.Lc + k * n2, dk, nx);
  }
  const int n = N * nx;
  for (int i = 0; i < n; ++i)
    if (!hd_isfinite(w.w[i])) return false;
  e.stats->converged = hd_abs(dotn(w.r, w.w, n)) < P.pcg_floor;
  for (int i = 0; i < n; ++i) e.lam[i] += w.w[i];
  return true;
}

/// The primal step from the dual: dx_0 = -c_0, dx_k = -Qtilde^-1 (q_k - lam_k + A_k' lam_{k+1}),
/// du_k = -R^-1 (r_k + B_k' lam_{k+1}).
template <typename S>
GATO_HD void recover_step(const SqpShared<S>& P, SqpEntry<S>& e) {
  const int nx = P.nx, nu = P.nu, N = P.N;
  SqpWork<S>& w = e.w;
  for (int k = 0; k < N; ++k) {
    S* dx = w.dz + k * (nx + nu);
    if (k == 0) {
      for (int i = 0; i < nx; ++i) dx[i] = -w.c[i];
    } else {
      for (int i = 0; i < nx; ++i) {
        S s = w.qg[k * nx + i] - e.lam[k * nx + i];
        if (k < N - 1) {
          const S* A = w.A + k * nx * nx;
          for (int j = 0; j < nx; ++j) s += A[j * nx + i] * e.lam[(k + 1) * nx + j];
        }
        w.vx[i] = s;
      }
      apply_Qinv(P, w, k, w.vx, w.vx2);
      for (int i = 0; i < nx; ++i) dx[i] = -w.vx2[i];
    }
    if (k < N - 1) {
      const S* B = w.Bm + k * nx * nu;
      for (int j = 0; j < nu; ++j) {
        S s = w.rg[k * nu + j];
        for (int i = 0; i < nx; ++i) s += B[i * nu + j] * e.lam[(k + 1) * nx + i];
        dx[nx + j] = -w.Rinv[k * nu + j] * s;
      }
      if (P.u_ref_gravity) {  // du = dv + K dx_q
        const S* K = w.Kg + k * nu * P.nv;
        for (int j = 0; j < nu; ++j)
          for (int b = 0; b < P.nv; ++b) dx[nx + j] += K[j * P.nv + b] * dx[b];
      }
    }
  }
}

}  // namespace cuda
}  // namespace gato
