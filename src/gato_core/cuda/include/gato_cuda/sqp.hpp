// One SQP iteration of BSQP for one batch entry, on plain arrays, host and device
// (GATO_HD): the method of docs/solver_method.md as the CPU backend runs it
// (src/gato_core/cpp/src/solver_*.hpp) without constraint row groups:
//   1. KKT blocks: Gauss-Newton stage cost (EE tracking, EE orientation, posture anchor,
//      joint-limit barriers, velocity and control effort, per-knot / per-joint weights) and the
//      Euler / semi-implicit Euler / RK4 linearization of the dynamics (rbd.hpp);
//   2. Schur complement M = -S (block tridiagonal), right-hand side -gamma;
//   3. linear solve: PCG with the stair preconditioner (warm-started dual), or the block
//      Cholesky (bdsv), or bdsv on the first iteration and PCG after;
//   4. merit phi(alpha) = cost + mu |defects|_1 at alpha = 2^-i, i = 0..7 (best, or the
//      first strict decrease), accepted on strict decrease only;
//   5. trust-region rho update.
// The batch loop (step 6: solve_ratio, iteration cap) is the caller's: the host driver
// (host_batch.hpp) and the kernel launcher (kernels.cu) both call sqp_iterate.
// Step 1 (cost, dynamics, KKT blocks) is sqp_kkt.hpp, steps 2-3 (Schur complement, linear
// solves, step recovery) sqp_linsys.hpp; this header holds steps 4-5 and the iteration.
// Matrices are row-major. One entry = one call; the first GPU version runs one CUDA
// thread per batch entry (docs/cuda.md).
#pragma once

#include "gato_cuda/sqp_linsys.hpp"

namespace gato {
namespace cuda {

// ---------------------------------------------------------------------------------------
// Step 4: merit of xu + alpha dz.

template <typename S>
GATO_HD S trial_merit(const SqpShared<S>& P, SqpEntry<S>& e, S alpha) {
  const int nv = P.nv, nx = P.nx, nu = P.nu, N = P.N, L = P.L;
  const S h = P.dt, c2 = P.integrator == 0 ? h * h / S(2) : h * h;
  S* t = e.w.trial;
  for (int i = 0; i < L; ++i) t[i] = e.xu[i] + alpha * e.w.dz[i];
  FdScratch<S> fs;
  S qdd[kMaxBodies], ee[3], Rot[9];
  const S* rot = P.rot_on ? Rot : nullptr;
  S cost = 0, defect = 0;
  for (int k = 0; k < N; ++k) {
    const S* x = t + k * (nx + nu);
    if (k < N - 1) {
      const S* u = x + nx;
      const S* fx = P.has_fext ? e.fext + k * 6 * nv : nullptr;
      const S* x1 = x + nx + nu;
      if (P.integrator == 2) {
        if (!rk4_value(P.model, fs, h, x, u, fx, e.w.vx, ee)) return S(1) / S(0);
        for (int i = 0; i < nx; ++i) defect += hd_abs(x1[i] - e.w.vx[i]);
      } else {
        if (!forward_dynamics(P.model, fs, x, x + nv, u, fx, qdd, ee)) return S(1) / S(0);
        for (int i = 0; i < nv; ++i) defect += hd_abs(x1[i] - (x[i] + h * x[nv + i] + c2 * qdd[i]));
        for (int i = 0; i < nv; ++i) defect += hd_abs(x1[nv + i] - (x[nv + i] + h * qdd[i]));
      }
      S l = 0, gq[kMaxBodies];
      if (P.u_ref_gravity) gravity(P.model, x, gq, static_cast<S*>(nullptr));
      if (P.rot_on) {
        if (P.integrator == 2) kinematics(P.model, x, fs.w);  // RK4's last stage is elsewhere
        ee_rotation(P.model, fs.w, Rot);
      }
      stage_cost<S, false>(P, k, x, u, ee, e.ref + 6 * k, nullptr, l, nullptr, nullptr, nullptr, nullptr, nullptr,
                           P.u_ref_gravity ? gq : nullptr, nullptr, nullptr, rot);
      cost += l;
    } else {
      kinematics(P.model, x, fs.w);
      ee_position(P.model, fs.w, ee);
      if (P.rot_on) ee_rotation(P.model, fs.w, Rot);
      S l = 0;
      stage_cost<S, false>(P, k, x, nullptr, ee, e.ref + 6 * k, nullptr, l, nullptr, nullptr, nullptr, nullptr,
                           nullptr, nullptr, nullptr, nullptr, rot);
      cost += l;
    }
  }
  for (int i = 0; i < nx; ++i) defect += hd_abs(t[i] - e.xs[i]);
  const S m = cost + e.st->mu * defect;
  return hd_isfinite(m) ? m : S(1) / S(0);
}

// ---------------------------------------------------------------------------------------
// Steps 1-5 for one entry at SQP iteration it (solver_iteration.hpp's iterate()).

template <typename S>
GATO_HD void sqp_iterate(const SqpShared<S>& P, SqpEntry<S>& e, int it) {
  SqpEntryStats<S>& st = *e.stats;
  SqpEntryState<S>& s = *e.st;
  SqpWork<S>& w = e.w;
  const S merit0 = setup_kkt(P, e);
  if (it == 0) st.merit_initial = merit0;
  st.iters = it + 1;
  if (!hd_isfinite(merit0)) {  // diverged: nothing sensible to step from
    st.stopped = 1;
    e.step_size[it] = S(-1);
    e.min_merit[it] = merit0;
    st.merit_final = merit0;
    return;
  }
  bool ok = factor_schur(P, e);
  int mode = P.linsys;
  if (mode == 2) mode = it == 0 ? 1 : 0;
  int pcg_it = 0;
  const int n = P.N * P.nx;
  if (ok) {
    matvec(P, w, e.lam, w.Mp);
    for (int i = 0; i < n; ++i) w.r[i] = w.rhs[i] - w.Mp[i];
    if (mode == 0) {
      ok = factor_preconditioner(P, e);
      if (ok) {
        precondition(P, w, w.r, w.z);
        st.converged = hd_abs(dotn(w.r, w.z, n)) < P.pcg_floor;
        pcg_it = solve_pcg(P, e);
      }
    } else {
      ok = solve_bdsv(P, e);
    }
  }
  e.pcg_iters[it] = pcg_it;
  if (!ok) {  // not positive definite: keep z and lam, regularize harder
    s.rho = hd_min(s.rho * S(100), S(kRhoMaxD));
    e.step_size[it] = S(-1);
    e.min_merit[it] = merit0;
    st.merit_final = merit0;
    st.converged = 0;
    return;
  }
  recover_step(P, e);
  S best = S(1) / S(0), best_alpha = 0, alpha = 1;
  for (int i = 0; i < kLsSteps; ++i, alpha *= S(0.5)) {
    const S m = trial_merit(P, e, alpha);
    if (m < best) {  // strict: ties keep the larger alpha
      best = m;
      best_alpha = alpha;
    }
    if (P.line_search == 1 && best < merit0) break;
  }
  const bool accept = best < merit0;
  e.min_merit[it] = best;
  if (accept) {
    for (int i = 0; i < P.L; ++i) e.xu[i] += best_alpha * w.dz[i];
    e.step_size[it] = best_alpha;
    st.merit_final = best;
  } else {
    e.step_size[it] = S(-1);
    st.merit_final = merit0;
  }
  if (P.adapt_rho) {
    const S f = s.drho_factor;
    if (accept) {
      s.drho = hd_min(s.drho / f, S(1) / f);
    } else {
      s.drho = hd_max(s.drho * f, f);
    }
    s.rho = hd_min(hd_max(s.rho * s.drho, S(kRhoMinD)), S(kRhoMaxD));
    if (!accept && s.rho >= S(kRhoMaxD)) s.rho = S(kRhoResetD);
  }
}

}  // namespace cuda
}  // namespace gato
