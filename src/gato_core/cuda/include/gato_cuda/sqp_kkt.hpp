// Step 1 of the CUDA backend's SQP iteration (sqp.hpp), host and device (GATO_HD): the
// shared problem data and per-entry workspace (SqpShared, SqpEntry, carve), the stage cost
// (the CPU backend's cost_terms.hpp, same terms, same order; the EE orientation term on
// so3.hpp), the Euler / semi-implicit Euler /
// RK4 linearization of the dynamics (rbd.hpp) and the KKT blocks (setup_kkt).
#pragma once

#include "gato_cuda/dense.hpp"
#include "gato_cuda/hd.hpp"
#include "gato_cuda/rbd.hpp"
#include "gato_cuda/so3.hpp"

namespace gato {
namespace cuda {

constexpr int kLsSteps = 8;  // alpha = 2^-i, i = 0..7 (gato::kLineSearchSteps)
constexpr double kRhoMinD = 1e-8, kRhoMaxD = 10.0, kRhoResetD = 1e-3;  // gato/types.hpp
constexpr double kBarrierEpsD = 1e-3;                                 // gato::kBarrierEps
constexpr double kMarginD = 0.1;                                       // gato::kLimitMargin

/// What the whole batch shares (trivially copyable: a kernel argument). knot_w points
/// to N x 3 [ee, qd, u] weights in the memory the iteration runs in, or is null; rot_knot_w
/// likewise to N per-knot orientation weights (the table's 4th column), or is null.
template <typename S>
struct SqpShared {
  DevModel<S> model;
  int N = 0, nv = 0, nx = 0, nu = 0, L = 0;
  S dt = 0;
  int max_pcg_iters = 200;
  int linsys = 1;       // 0 pcg, 1 bdsv, 2 bdsv_first (gato::LinSys)
  int integrator = 0;   // 0 Euler (constant acceleration), 1 semi-implicit Euler, 2 RK4
  int line_search = 0;  // 0 best of all 8, 1 first strict decrease
  int adapt_rho = 1;
  double q_cost = 2, qd_cost = 0.01, u_cost = 2e-6, N_cost = 50;
  double q_lim_cost = 0.01, vel_lim_cost = 0, ctrl_lim_cost = 0;
  S lo_q[kMaxBodies] = {}, hi_q[kMaxBodies] = {}, max_qd[kMaxBodies] = {}, max_u[kMaxBodies] = {};
  double q_pos_w[kMaxBodies] = {}, q_nom[kMaxBodies] = {};
  int has_u_vec = 0;
  double u_vec[kMaxBodies] = {};
  const double* knot_w = nullptr;
  int has_fext = 0;  // fext: 6 per body per knot per entry (pinocchio joint-local frame)
  S u_prox = 0;      // gato::kZeroControlProx{32,64}
  S pcg_floor = 0;
  int u_ref_gravity = 0;  // gato::URef::kGravity: the control cost is 1/2 s (u - g(q))^2
  // The EE orientation term 1/2 w_k sum_a c_a e_a^2 (cpp/src/cost_terms.hpp EeOrientationTerm).
  double rot_cost = 0, N_rot_cost = 0;  // running / terminal weights [1/rad^2]
  double rot_axis[3] = {1, 1, 1};       // per-axis factors c (tool frame)
  const double* rot_knot_w = nullptr;   // N per-knot weights (overrides the scalars), or null
  int rot_on = 0;  // some knot has a weight > 0 (set by the host): the EE rotation is computed only then

  GATO_HD S ee_weight(int k) const { return S(knot_w ? knot_w[3 * k] : (k == N - 1 ? N_cost : q_cost)); }
  GATO_HD S rot_weight(int k) const { return S(rot_knot_w ? rot_knot_w[k] : (k == N - 1 ? N_rot_cost : rot_cost)); }
  GATO_HD S qd_weight(int k) const { return S(knot_w ? knot_w[3 * k + 1] : qd_cost); }
  GATO_HD S u_weight(int k, int j) const {
    if (has_u_vec) return S(u_vec[j]);
    return S(knot_w ? knot_w[3 * k + 2] : u_cost);
  }
};

/// Per-entry state kept across solves.
template <typename S>
struct SqpEntryState {
  S rho, drho, drho_factor, mu, pcg_tol;
};

/// Per-solve statistics of one entry (the per-iteration arrays hold max_sqp_iters).
template <typename S>
struct SqpEntryStats {
  int converged, stopped, iters;
  S merit_initial, merit_final;
};

/// The per-entry arrays, carved from one buffer (work_size gives its length).
template <typename S>
struct SqpWork {
  S *Qpp, *qvv, *qg, *Rd, *rg, *A, *Bm, *c, *Qpp_inv, *qvv_inv, *Rinv, *Md, *phi, *BRinv, *Dinv, *Lc, *E;
  S *rhs, *r, *z, *p, *Mp, *y, *w, *dz, *trial, *tmp, *tmp2, *vx, *vx2;
  S *rk_dk, *rk_duk;  // RK4 stage Jacobians (4 nx x nx, 4 nx x nu)
  S *Suq, *Kg;        // u_ref = gravity: cost cross blocks d2l/du dq and K = -R^-1 S ((N-1) nu x nv)
};

template <typename S>
GATO_HD long work_size(int N, int nv) {
  const long nx = 2 * nv, nu = nv;
  return N * (nv * nv) * 2 + N * nv * 2 + N * nx + (N - 1) * (nu * 3) + (N - 1) * nx * nx * 2 +
         (N - 1) * nx * nu * 2 + N * nx + N * nx * nx * 4 + 7 * N * nx + 2 * (N * (nx + nu)) + 2 * nx * nx +
         2 * nx + 4 * nx * nx + 4 * nx * nu + 2 * (N - 1) * nu * nv;
}

template <typename S>
GATO_HD void carve(SqpWork<S>& w, S* base, int N, int nv) {
  const long nx = 2 * nv, nu = nv;
  S* p = base;
  auto take = [&p](long n) {
    S* r = p;
    p += n;
    return r;
  };
  w.Qpp = take(N * nv * nv);
  w.Qpp_inv = take(N * nv * nv);
  w.qvv = take(N * nv);
  w.qvv_inv = take(N * nv);
  w.qg = take(N * nx);
  w.Rd = take((N - 1) * nu);
  w.rg = take((N - 1) * nu);
  w.Rinv = take((N - 1) * nu);
  w.A = take((N - 1) * nx * nx);
  w.phi = take((N - 1) * nx * nx);
  w.Bm = take((N - 1) * nx * nu);
  w.BRinv = take((N - 1) * nx * nu);
  w.c = take(N * nx);
  w.Md = take(N * nx * nx);
  w.Dinv = take(N * nx * nx);
  w.Lc = take(N * nx * nx);
  w.E = take(N * nx * nx);
  w.rhs = take(N * nx);
  w.r = take(N * nx);
  w.z = take(N * nx);
  w.p = take(N * nx);
  w.Mp = take(N * nx);
  w.y = take(N * nx);
  w.w = take(N * nx);
  w.dz = take(N * (nx + nu));
  w.trial = take(N * (nx + nu));
  w.tmp = take(nx * nx);
  w.tmp2 = take(nx * nx);
  w.vx = take(nx);
  w.vx2 = take(nx);
  w.rk_dk = take(4 * nx * nx);
  w.rk_duk = take(4 * nx * nu);
  w.Suq = take((N - 1) * nu * nv);
  w.Kg = take((N - 1) * nu * nv);
}

/// One entry's inputs and outputs for one iteration.
template <typename S>
struct SqpEntry {
  const S* xs;    // measured state (nx)
  const S* ref;   // reference (6 N)
  const S* fext;  // 6 nv per knot, or null
  S* xu;          // trajectory (L), updated in place
  S* lam;         // dual (N nx), kept across solves
  SqpEntryState<S>* st;
  SqpEntryStats<S>* stats;
  int* pcg_iters;  // per iteration (max_sqp_iters)
  S* min_merit;
  S* step_size;
  SqpWork<S> w;
};

// ---------------------------------------------------------------------------------------
// Cost (src/gato_core/cpp/src/cost_terms.hpp, the same terms in the same order).

/// Relaxed log barrier b(d) = -log d (d >= eps), C2 quadratic extension below.
template <typename S>
GATO_HD S relaxed_log(S d, S* db, S* ddb) {
  const S delta = S(kBarrierEpsD);
  if (d >= delta) {
    const S inv = S(1) / d;
    *db = -inv;
    *ddb = inv * inv;
    return -hd_log(d);
  }
  const S e = d - delta, inv = S(1) / delta;
  *db = -inv + e * inv * inv;
  *ddb = inv * inv;
  return -hd_log(delta) - e * inv + S(0.5) * e * e * inv * inv;
}

/// weight * beta(x) on [lo, hi]; adds weight * gradient / Hessian diagonal into g / h (nullable).
template <typename S>
GATO_HD S box_barrier(S x, S lo, S hi, S weight, S* g, S* h) {
  S d1, dd1, d2, dd2;
  const S v = relaxed_log(x - lo, &d1, &dd1) + relaxed_log(hi - x, &d2, &dd2);
  if (g) *g += weight * (d1 - d2);
  if (h) *h += weight * (dd1 + dd2);
  return weight * v;
}

/// u_ref = gravity, G = dg/dq (row-major), e = s (u - g): q-gradient -G' e, Gauss-Newton
/// Qpp += G' diag(s) G, cross block Suq = -diag(s) G (cpp/src/cost_terms.hpp, gravity_coupling).
template <typename S>
GATO_HD void gravity_coupling(const SqpShared<S>& P, int k, const S* u, const S* uref, const S* dg, S* Qpp, S* qg,
                              S* Suq) {
  const int nv = P.nv;
  for (int a = 0; a < nv; ++a) {
    S ga = 0;
    for (int j = 0; j < P.nu; ++j) ga += dg[j * nv + a] * P.u_weight(k, j) * (u[j] - uref[j]);
    qg[a] -= ga;
    for (int b = 0; b < nv; ++b) {
      S h = 0;
      for (int j = 0; j < P.nu; ++j) h += dg[j * nv + a] * P.u_weight(k, j) * dg[j * nv + b];
      Qpp[a * nv + b] += h;
    }
  }
  for (int j = 0; j < P.nu; ++j)
    for (int b = 0; b < nv; ++b) Suq[j * nv + b] = -P.u_weight(k, j) * dg[j * nv + b];
}

/// The EE orientation term at knot k with weight w > 0: 1/2 w sum_a c_a e_a^2, e = log(R_ref' R)
/// (rad, tool frame), R the EE rotation (row-major, world <- EE), R_ref = exp(ref[3:6]) (the
/// reference's rotation vector, world frame). With D, Gauss-Newton with J_e = Jr^-1(e) R' Jw
/// (Jw the 3 x nv world angular Jacobian): qg[:nv] += J_e' (w c o e), Qpp += J_e' diag(w c) J_e
/// (cpp/src/cost_terms.hpp EeOrientationTerm, the same formulas in the same order).
template <typename S, bool D>
GATO_HD void orientation_term(const SqpShared<S>& P, S w, const S* R, const S* ref, const S* Jw, S& acc, S* Qpp,
                              S* qg) {
  const int nv = P.nv;
  S Rt[9], E[9], e[3], we[3];
  so3::exp(ref + 3, Rt);
  for (int r = 0; r < 3; ++r)  // E = Rt' R
    for (int c = 0; c < 3; ++c) E[3 * r + c] = Rt[r] * R[c] + Rt[3 + r] * R[3 + c] + Rt[6 + r] * R[6 + c];
  so3::log(E, e);
  for (int a = 0; a < 3; ++a) {
    we[a] = w * S(P.rot_axis[a]) * e[a];
    acc += S(0.5) * we[a] * e[a];
  }
  if (!D) return;
  S Ji[9], A[9], Je[3 * kMaxBodies];
  so3::jr_inv(e, Ji);
  for (int r = 0; r < 3; ++r)  // A = Jr^-1(e) R'
    for (int c = 0; c < 3; ++c) A[3 * r + c] = Ji[3 * r] * R[3 * c] + Ji[3 * r + 1] * R[3 * c + 1] + Ji[3 * r + 2] * R[3 * c + 2];
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < nv; ++j) Je[r * nv + j] = A[3 * r] * Jw[j] + A[3 * r + 1] * Jw[nv + j] + A[3 * r + 2] * Jw[2 * nv + j];
  for (int a = 0; a < nv; ++a) {
    for (int b = 0; b < nv; ++b) {
      S h = 0;
      for (int r = 0; r < 3; ++r) h += Je[r * nv + a] * (w * S(P.rot_axis[r])) * Je[r * nv + b];
      Qpp[a * nv + b] += h;
    }
    qg[a] += Je[a] * we[0] + Je[nv + a] * we[1] + Je[2 * nv + a] * we[2];
  }
}

/// Adds l_k(x, u) to acc (u null at the last knot). With D: the Gauss-Newton blocks
/// Qpp (nv x nv), qvv (nv, diagonal), qg (nx), Rd (nu, diagonal), rg (nu) are written
/// (J: the 3 x nv EE Jacobian). uref (nu, nullable): the control reference g(q) of
/// u_ref = gravity; with D also dg (nv x nv row-major dg/dq) and Suq (nu x nv, written).
/// R (9, nullable: P.rot_on = 0): the EE rotation for the orientation term; with D also
/// Jw (3 x nv, the EE world angular Jacobian).
template <typename S, bool D>
GATO_HD void stage_cost(const SqpShared<S>& P, int k, const S* x, const S* u, const S* ee, const S* ref, const S* J,
                        S& acc, S* Qpp, S* qvv, S* qg, S* Rd, S* rg, const S* uref = nullptr,
                        const S* dg = nullptr, S* Suq = nullptr, const S* R = nullptr, const S* Jw = nullptr) {
  const int nv = P.nv;
  const S w = P.ee_weight(k);
  S d[3];
  for (int i = 0; i < 3; ++i) {
    d[i] = ee[i] - ref[i];
    acc += S(0.5) * w * d[i] * d[i];
  }
  if (D) {
    for (int a = 0; a < nv; ++a) {
      for (int b = 0; b < nv; ++b)
        Qpp[a * nv + b] = w * (J[a] * J[b] + J[nv + a] * J[nv + b] + J[2 * nv + a] * J[2 * nv + b]);
      qg[a] = w * (J[a] * d[0] + J[nv + a] * d[1] + J[2 * nv + a] * d[2]);
      qg[nv + a] = S(0);
      qvv[a] = S(0);
    }
  }
  if (R) {
    const S wr = P.rot_weight(k);
    if (wr > S(0)) orientation_term<S, D>(P, wr, R, ref, Jw, acc, Qpp, qg);
  }
  const S ql = S(P.q_lim_cost), vl = S(P.vel_lim_cost), cl = S(P.ctrl_lim_cost), vw = P.qd_weight(k);
  for (int j = 0; j < nv; ++j) {
    S* gq = D ? &qg[j] : nullptr;
    S* hq = D ? &Qpp[j * nv + j] : nullptr;
    S* gv = D ? &qg[nv + j] : nullptr;
    S* hv = D ? &qvv[j] : nullptr;
    // posture anchor, q barrier, velocity, velocity barrier
    const S a = S(P.q_pos_w[j]), dq = x[j] - S(P.q_nom[j]);
    acc += S(0.5) * a * dq * dq;
    if (D) {
      *hq += a;
      *gq += a * dq;
    }
    if (ql > S(0)) acc += box_barrier(x[j], P.lo_q[j], P.hi_q[j], ql, gq, hq);
    const S z = x[nv + j];
    acc += S(0.5) * vw * z * z;
    if (D) {
      *hv += vw;
      *gv += vw * z;
    }
    if (vl > S(0)) acc += box_barrier(z, -P.max_qd[j], P.max_qd[j], vl, gv, hv);
  }
  if (!u) return;
  for (int j = 0; j < P.nu; ++j) {
    S* g = D ? &rg[j] : nullptr;
    S* h = D ? &Rd[j] : nullptr;
    if (D) {
      *g = S(0);
      *h = S(0);
    }
    const S s = P.u_weight(k, j);
    const S z = uref ? u[j] - uref[j] : u[j];
    acc += S(0.5) * s * z * z;
    if (D) {
      *h += s;
      *g += s * z;
    }
    if (cl > S(0)) acc += box_barrier(u[j], -P.max_u[j], P.max_u[j], cl, g, h);
  }
  if (D && uref) gravity_coupling(P, k, u, uref, dg, Qpp, qg, Suq);
}

// ---------------------------------------------------------------------------------------
// RK4 (docs/solver_method.md, "Dynamics"; the CPU backend's integrator.hpp): stage i at
// x_i = x + c_i k_{i-1}, c = (0, h/2, h/2, h), k_i = [qd_i; qdd_i]; ee (nullable) at stage 0.

/// x+ = x + h/6 (k_0 + 2 k_1 + 2 k_2 + k_3) without derivatives. False when FD fails.
template <typename S>
GATO_HD bool rk4_value(const DevModel<S>& m, FdScratch<S>& fs, S h, const S* x, const S* u, const S* fx, S* xn,
                       S* ee) {
  const int nv = m.n, nx = 2 * nv;
  const S c[4] = {S(0), h / S(2), h / S(2), h}, wgt[4] = {S(1), S(2), S(2), S(1)};
  S k[2 * kMaxBodies], xs[2 * kMaxBodies], acc[2 * kMaxBodies], qdd[kMaxBodies];
  for (int j = 0; j < nx; ++j) acc[j] = S(0);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < nx; ++j) xs[j] = i == 0 ? x[j] : x[j] + c[i] * k[j];
    if (!forward_dynamics(m, fs, xs, xs + nv, u, fx, qdd, i == 0 ? ee : static_cast<S*>(nullptr))) return false;
    for (int j = 0; j < nv; ++j) {
      k[j] = xs[nv + j];
      k[nv + j] = qdd[j];
    }
    for (int j = 0; j < nx; ++j) acc[j] += wgt[i] * k[j];
  }
  for (int j = 0; j < nx; ++j) xn[j] = x[j] + (h / S(6)) * acc[j];
  return true;
}

/// The RK4 step and its Jacobians A = dx+/dx (nx x nx), B = dx+/du (nx x nu), chained through
/// the stages: dk_i/dx = Jk_i (I + c_i dk_{i-1}/dx), dk_i/du = Jk_i c_i dk_{i-1}/du + [0; M_i^-1],
/// Jk = [[0, I], [dqdd/dq, dqdd/dqd]]; ee / J (nullable) at stage 0.
template <typename S>
GATO_HD bool rk4_linearize(const SqpShared<S>& P, SqpWork<S>& w, FdScratch<S>& fs, const S* x, const S* u,
                           const S* fx, S* xn, S* A, S* B, S* ee, S* J) {
  const int nv = P.nv, nx = P.nx, nu = P.nu;
  const S h = P.dt;
  const S c[4] = {S(0), h / S(2), h / S(2), h}, wgt[4] = {S(1), S(2), S(2), S(1)};
  S k[2 * kMaxBodies], xs[2 * kMaxBodies], acc[2 * kMaxBodies];
  S qdd[kMaxBodies], dq[kMaxBodies * kMaxBodies], dv[kMaxBodies * kMaxBodies], Mi[kMaxBodies * kMaxBodies];
  S* X = w.tmp;   // I + c_i dk_{i-1}/dx (nx x nx)
  S* U = w.tmp2;  // c_i dk_{i-1}/du (nx x nu)
  for (int j = 0; j < nx; ++j) acc[j] = S(0);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < nx; ++j) xs[j] = i == 0 ? x[j] : x[j] + c[i] * k[j];
    if (!forward_dynamics_derivatives(P.model, fs, xs, xs + nv, u, fx, qdd, dq, dv, Mi,
                                      i == 0 ? ee : static_cast<S*>(nullptr), i == 0 ? J : static_cast<S*>(nullptr)))
      return false;
    for (int j = 0; j < nv; ++j) {
      k[j] = xs[nv + j];
      k[nv + j] = qdd[j];
    }
    for (int j = 0; j < nx; ++j) acc[j] += wgt[i] * k[j];
    S* dk = w.rk_dk + i * nx * nx;
    S* du = w.rk_duk + i * nx * nu;
    if (i == 0) {
      for (int r = 0; r < nx * nx; ++r) X[r] = S(0);
      for (int r = 0; r < nx; ++r) X[r * nx + r] = S(1);
      for (int r = 0; r < nx * nu; ++r) U[r] = S(0);
    } else {
      const S* dkp = w.rk_dk + (i - 1) * nx * nx;
      const S* dup = w.rk_duk + (i - 1) * nx * nu;
      for (int r = 0; r < nx * nx; ++r) X[r] = c[i] * dkp[r];
      for (int r = 0; r < nx; ++r) X[r * nx + r] += S(1);
      for (int r = 0; r < nx * nu; ++r) U[r] = c[i] * dup[r];
    }
    // Jk * X and Jk * U: top rows = the velocity rows, bottom rows = [dq dv] times them.
    for (int r = 0; r < nv; ++r) {
      for (int col = 0; col < nx; ++col) {
        dk[r * nx + col] = X[(nv + r) * nx + col];
        S sacc = 0;
        for (int l = 0; l < nv; ++l) sacc += dq[r * nv + l] * X[l * nx + col] + dv[r * nv + l] * X[(nv + l) * nx + col];
        dk[(nv + r) * nx + col] = sacc;
      }
      for (int col = 0; col < nu; ++col) {
        du[r * nu + col] = U[(nv + r) * nu + col];
        S sacc = Mi[r * nv + col];
        for (int l = 0; l < nv; ++l) sacc += dq[r * nv + l] * U[l * nu + col] + dv[r * nv + l] * U[(nv + l) * nu + col];
        du[(nv + r) * nu + col] = sacc;
      }
    }
  }
  const S h6 = h / S(6);
  for (int j = 0; j < nx; ++j) xn[j] = x[j] + h6 * acc[j];
  for (int r = 0; r < nx * nx; ++r) {
    const S* d = w.rk_dk;
    A[r] = h6 * (d[r] + S(2) * d[nx * nx + r] + S(2) * d[2 * nx * nx + r] + d[3 * nx * nx + r]);
  }
  for (int r = 0; r < nx; ++r) A[r * nx + r] += S(1);
  for (int r = 0; r < nx * nu; ++r) {
    const S* d = w.rk_duk;
    B[r] = h6 * (d[r] + S(2) * d[nx * nu + r] + S(2) * d[2 * nx * nu + r] + d[3 * nx * nu + r]);
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Step 1: KKT blocks; returns the merit at xu (infinity when the dynamics fail).

template <typename S>
GATO_HD S setup_kkt(const SqpShared<S>& P, SqpEntry<S>& e) {
  const int nv = P.nv, nx = P.nx, nu = P.nu, N = P.N;
  const S h = P.dt, c2 = P.integrator == 0 ? h * h / S(2) : h * h;
  SqpWork<S>& w = e.w;
  FdScratch<S> fs;
  S qdd[kMaxBodies], dq[kMaxBodies * kMaxBodies], dv[kMaxBodies * kMaxBodies], Mi[kMaxBodies * kMaxBodies];
  S ee[3], J[3 * kMaxBodies], Rot[9], Jw[3 * kMaxBodies];
  S cost = 0, defect = 0;
  for (int k = 0; k < N; ++k) {
    const S* x = e.xu + k * (nx + nu);
    const S* fx = P.has_fext ? e.fext + k * 6 * nv : nullptr;
    const S* rot = P.rot_on ? Rot : nullptr;
    if (k < N - 1) {
      const S* u = x + nx;
      S* A = w.A + k * nx * nx;
      S* B = w.Bm + k * nx * nu;
      S* ck = w.c + (k + 1) * nx;
      const S* x1 = x + nx + nu;
      if (P.integrator == 2) {
        if (!rk4_linearize(P, w, fs, x, u, fx, w.vx, A, B, ee, J)) return S(1) / S(0);
        for (int i = 0; i < nx; ++i) ck[i] = x1[i] - w.vx[i];
      } else if (!forward_dynamics_derivatives(P.model, fs, x, x + nv, u, fx, qdd, dq, dv, Mi, ee, J)) {
        return S(1) / S(0);
      }
      for (int i = 0; i < nv && P.integrator != 2; ++i) {
        const S vn = x[nv + i] + h * qdd[i];
        const S qn = x[i] + h * x[nv + i] + c2 * qdd[i];
        ck[i] = x1[i] - qn;
        ck[nv + i] = x1[nv + i] - vn;
        for (int j = 0; j < nv; ++j) {
          const S I = i == j ? S(1) : S(0);
          A[i * nx + j] = c2 * dq[i * nv + j] + I;
          A[i * nx + nv + j] = c2 * dv[i * nv + j] + h * I;
          A[(nv + i) * nx + j] = h * dq[i * nv + j];
          A[(nv + i) * nx + nv + j] = h * dv[i * nv + j] + I;
          B[i * nu + j] = c2 * Mi[i * nv + j];
          B[(nv + i) * nu + j] = h * Mi[i * nv + j];
        }
      }
      for (int i = 0; i < nx; ++i) defect += hd_abs(ck[i]);
      S gq[kMaxBodies], dg[kMaxBodies * kMaxBodies];
      if (P.u_ref_gravity) gravity(P.model, x, gq, dg);
      if (P.rot_on) {
        // fs.w holds the kinematics at x after Euler's dynamics; RK4's last stage is elsewhere.
        if (P.integrator == 2) kinematics(P.model, x, fs.w);
        ee_rotation(P.model, fs.w, Rot);
        ee_angular_jacobian(P.model, fs.w, Jw);
      }
      stage_cost<S, true>(P, k, x, u, ee, e.ref + 6 * k, J, cost, w.Qpp + k * nv * nv, w.qvv + k * nv,
                          w.qg + k * nx, w.Rd + k * nu, w.rg + k * nu, P.u_ref_gravity ? gq : nullptr, dg,
                          w.Suq + k * nu * nv, rot, Jw);
    } else {
      kinematics(P.model, x, fs.w);
      ee_position(P.model, fs.w, ee);
      ee_jacobian(P.model, fs.w, ee, J);
      if (P.rot_on) {
        ee_rotation(P.model, fs.w, Rot);
        ee_angular_jacobian(P.model, fs.w, Jw);
      }
      stage_cost<S, true>(P, k, x, nullptr, ee, e.ref + 6 * k, J, cost, w.Qpp + k * nv * nv, w.qvv + k * nv,
                          w.qg + k * nx, nullptr, nullptr, nullptr, nullptr, nullptr, rot, Jw);
    }
  }
  for (int i = 0; i < nx; ++i) {
    w.c[i] = e.xu[i] - e.xs[i];
    defect += hd_abs(w.c[i]);
  }
  return cost + e.st->mu * defect;
}

}  // namespace cuda
}  // namespace gato
