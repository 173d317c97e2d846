// The exact-Hessian ('eh') variant of BatchSolverImpl (docs/solver_method.md, "Exact
// Hessian"): the second-order terms of the Lagrangian in the stage Hessians, the step they give
// (riccati_eh: a Riccati recursion on the KKT system, the Gauss-Newton blocks where the exact
// reduced Hessian is not positive definite) and, with ADMM rows only, the positive-definite
// modification and the condensed stage block the Schur complement reads (factor_stage_eh).
// Included by solver_impl.hpp only.
//
// The Lagrangian of the step (the Schur dual's sign: stationarity reads q_k - lam_k +
// A_k' lam_{k+1} = 0) is L = cost - sum_k lam_k' c_k with c_{k+1} = x_{k+1} - f(x_k, u_k), so
// its stage Hessian is the cost's plus D_k = sum_i lam_{k+1,i} d2f_i/dz2 (z = (x_k, u_k)), and
// the EE term adds w_k sum_j r_j d2p_j/dq2 (r = p(q) - p_ref) to the Gauss-Newton w_k J'J.
//
// How D_k is computed: central differences of the analytic first derivatives' vector-Jacobian
// product g(z) = [A(z) B(z)]' lam_{k+1} + [J(q)' w_k r; 0; 0] with lam and r frozen at the KKT
// point. The plant's first derivatives are analytic (pinocchio's ABA derivatives) for every
// integrator, so one more differentiation costs a few derivative calls per direction. The
// stencil is the fourth-order one, (8 (g(+h) - g(-h)) - (g(+2h) - g(-2h))) / 12h: the analytic
// derivatives carry rounding noise far above eps where M(q) is ill-conditioned (indy7's light
// wrist: ~1e-11 in A), which a second-order stencil at h = cbrt(eps) turns into ~1e-6 errors;
// the fourth-order one at h = 5e-4 (1 + |z_i|) keeps truncation (h^4) and noise (1e-11 / h)
// both near 1e-9 relative (float32: h = 3e-2, ~1e-5). Forward-mode dual numbers would be exact
// but need the plant (pinocchio) instantiated on a dual scalar: a new ~75 s, 3 GB translation
// unit per scalar type for a term that differences give to ~1e-9. Euler and semi-implicit Euler are affine in u
// (qdd = M(q)^-1 (u - h(q, v))), so only the nx state directions are differenced (d2f/du2 = 0,
// the u-x block is the transpose of the x-u block); RK4 differences all nx + nu directions.
#pragma once

namespace gato {

namespace detail {
// The fourth-order central stencil: offsets (in h) and weights (over 12 h).
inline constexpr double kOffsets[4] = {1.0, -1.0, 2.0, -2.0};
inline constexpr double kWeights[4] = {8.0, -8.0, -1.0, 1.0};
// Rule (a): a cold start (every multiplier zero) takes this many Gauss-Newton steps first.
inline constexpr int kEhColdGnSteps = 2;
}  // namespace detail

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_exact_hessian(bool on) {
  eh_ = on;
  for (auto& e : entries_) {
    if (on) e->size_eh();
    e->eh.on = on;
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::second_order(Entry& e, const S* lam) {
  const int nv = nv_, nx = nx_, nu = nu_, nz = nx + nu;
  auto& w = e.eh;
  const S hrel = S(std::is_same_v<S, float> ? 3e-2 : 5e-4);
  const bool affine_u = set_.integrator != Integrator::kRk4;
  Vec3 mu;
  for (int k = 0; k < N_; ++k) {
    // The EE residual weighted as in the gradient w_k J' r, frozen at the KKT point.
    mu = cost_.ee_weight(k) * (e.ee[k] - Eigen::Map<const Vec3>(e.ref + 6 * k));
    MatX<S>& D = w.D[k];
    D.setZero();
    const S* x = e.x(k);
    if (k == N_ - 1) {
      // The last knot has no dynamics: the EE term only, in q.
      for (int i = 0; i < nv; ++i) {
        const S h = hrel * (S(1) + std::abs(x[i]));
        D.col(i).setZero();
        for (int side = 0; side < 4; ++side) {
          w.xp = Eigen::Map<const VecX<S>>(x, nx);
          w.xp[i] += S(detail::kOffsets[side]) * h;
          plant_->ee_position_jacobian(*e.ws, w.xp.data(), w.eep.data(), w.Jp);
          D.col(i).head(nv).noalias() += (S(detail::kWeights[side]) / (S(12) * h)) * (w.Jp.transpose() * mu);
        }
      }
      w.H.topLeftCorner(nv, nv) = D.topLeftCorner(nv, nv).transpose();
      D.topLeftCorner(nv, nv) = S(0.5) * (D.topLeftCorner(nv, nv) + w.H.topLeftCorner(nv, nv));
      continue;
    }
    const S* u = e.u(k);
    Eigen::Map<const VecNX> lnext(lam + size_t(k + 1) * nx, nx);
    if (use_kkt_lanes()) {
      // Euler / semi-implicit Euler on the lean plant: the stencil's points of one direction go
      // through the multi-lane derivative kernel together (W lanes per call), and the
      // vector-Jacobian product is formed from the continuous derivatives without A and B:
      // with lam_a = c2 lam_q + h lam_v (c2 = h^2/2 Euler, h^2 semi-implicit),
      // A' lam = [lam_q + Qq' lam_a; h lam_q + lam_v + Qv' lam_a], B' lam = Minv' lam_a; the
      // constant parts are the same at every point of the stencil and drop out of it.
      const int W = lk_.W, nf = 6 * plant_->nbodies();
      const S hh = dt_, c2 = set_.integrator == Integrator::kEuler ? hh * hh / 2 : hh * hh;
      VecX<S>& la = w.gm;  // lam_a in its first nv entries
      for (int j = 0; j < nv; ++j) la[j] = c2 * lnext[j] + hh * lnext[nv + j];
      const S* f = fext_ptr(e.b, k);
      for (int i = 0; i < nx; ++i) {
        const S h = hrel * (S(1) + std::abs(x[i]));
        D.col(i).setZero();
        for (int s0 = 0; s0 < 4; s0 += W) {
          for (int l = 0; l < W; ++l) {
            const int side = std::min(s0 + l, 3);
            const S d = S(detail::kOffsets[side]) * h;
            for (int j = 0; j < nv; ++j) {
              e.lanes.kq[j * W + l] = x[j] + (i == j ? d : S(0));
              e.lanes.kv[j * W + l] = x[nv + j] + (i == nv + j ? d : S(0));
              e.lanes.ku[j * W + l] = u[j];
            }
            if (f)
              for (int m = 0; m < nf; ++m) e.lanes.kf[m * W + l] = f[m];
          }
          lk_.derivs(lview_, e.lanes.lscr.data(), e.lanes.kq.data(), e.lanes.kv.data(), e.lanes.ku.data(),
                     f ? e.lanes.kf.data() : nullptr, e.lanes.kqdd.data(), e.lanes.kdq.data(),
                     e.lanes.kdv.data(), e.lanes.kMi.data(), e.lanes.kee.data(), e.lanes.kJ.data());
          for (int l = 0; l < W && s0 + l < 4; ++l) {
            const S cw = S(detail::kWeights[s0 + l]) / (S(12) * h);
            for (int j = 0; j < nv; ++j) {
              S gq = 0, gv = 0, gu = 0;
              for (int r = 0; r < nv; ++r) {
                const int o = (r * nv + j) * W + l;  // (row r, column j) of Qq, Qv, Minv
                gq += e.lanes.kdq[o] * la[r];
                gv += e.lanes.kdv[o] * la[r];
                gu += e.lanes.kMi[o] * la[r];
              }
              for (int r = 0; r < 3; ++r) gq += e.lanes.kJ[(r * nv + j) * W + l] * mu[r];
              D(j, i) += cw * gq;
              D(nv + j, i) += cw * gv;
              D(nx + j, i) += cw * gu;
            }
          }
        }
      }
      D.topRightCorner(nx, nu) = D.bottomLeftCorner(nu, nx).transpose();
      w.H = D.transpose();
      D = S(0.5) * (D + w.H);
      continue;
    }
    const int ndir = affine_u ? nx : nz;
    for (int i = 0; i < ndir; ++i) {
      const S zi = i < nx ? x[i] : u[i - nx];
      const S h = hrel * (S(1) + std::abs(zi));
      D.col(i).setZero();
      for (int side = 0; side < 4; ++side) {
        w.xp = Eigen::Map<const VecX<S>>(x, nx);
        w.up = Eigen::Map<const VecX<S>>(u, nu);
        (i < nx ? w.xp[i] : w.up[i - nx]) += S(detail::kOffsets[side]) * h;
        dynamics_linearize(*plant_, *e.ws, e.dyn, set_.integrator, dt_, w.xp.data(), w.up.data(),
                           fext_ptr(e.b, k), w.xn.data(), w.Ap, w.Bp, w.eep.data(), &w.Jp);
        VecX<S>& g = w.gp;
        g.head(nx).noalias() = w.Ap.transpose() * lnext;
        g.tail(nu).noalias() = w.Bp.transpose() * lnext;
        g.head(nv).noalias() += w.Jp.transpose() * mu;
        D.col(i) += (S(detail::kWeights[side]) / (S(12) * h)) * g;
      }
    }
    if (affine_u) D.topRightCorner(nx, nu) = D.bottomLeftCorner(nu, nx).transpose();
    w.H = D.transpose();
    D = S(0.5) * (D + w.H);
  }
}

// H (nz x nz) = the stage Hessian of knot k as the step sees it: the cost's blocks (Q_k, the
// cross block S_uq with u_ref = gravity, R_k) plus D_k. The last knot fills its nx x nx block
// and a unit control block (no control: decoupled, untouched by the modification).
template <typename S, int NV>
void BatchSolverImpl<S, NV>::assemble_stage(Entry& e, int k, MatX<S>& H) const {
  const int nv = nv_, nx = nx_, nu = nu_;
  H.setZero();
  H.topLeftCorner(nx, nx) = e.Q[k];
  if (k < N_ - 1) {
    H.bottomRightCorner(nu, nu) = e.R[k];
    if (gravity_on()) {
      H.block(nx, 0, nu, nv) = e.Suq[k];
      H.block(0, nx, nv, nu) = e.Suq[k].transpose();
    }
    H += e.eh.D[k];
  } else {
    H.topLeftCorner(nx, nx) += e.eh.D[k].topLeftCorner(nx, nx);
    H.bottomRightCorner(nu, nu).setIdentity();
  }
}

// The modified, condensed stage block of knot k (the Schur-complement path of the exact Hessian,
// taken only with ADMM rows, whose inner loop reuses that factorization; every other solve takes
// riccati_eh below). G = the Gauss-Newton block as the step sees it
// (the cost's blocks + rho on the positions, the zero-weight floors: positive definite, as the
// Gauss-Newton path requires) and H = G + theta D_k with the largest theta in [0, 1] that keeps
// H >= kMargin G: theta = 1 (the exact block, unchanged) when G + D_k is; otherwise
// theta = (1 - kMargin) / -mu_min, mu_min the smallest eigenvalue of L^-1 D_k L^-T (G = L L'). Why this and not eigenvalue clipping or mirroring of
// G + D_k: the exact stage blocks of a converged reaching plan are indefinite (the curvature of
// lam' f in q is negative at most knots; only the reduced Hessian over the whole horizon is
// positive), and measured on iiwa14 (docs/solver_method.md) mirroring them slowed the solve far
// below Gauss-Newton; blending toward G never leaves the Gauss-Newton model's safety and keeps
// every direction of D_k that G can carry. Then the control is eliminated:
// Rinv = H_uu^-1, K = -H_uu^-1 H_ux, Qtilde = H_xx + H_xu K (its inverse in eh.Qinv), At = A + B K.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::factor_stage_eh(Entry& e, int k) {
  const int nv = nv_, nx = nx_, nu = nu_;
  constexpr double kMargin = 0.1;
  auto& w = e.eh;
  MatX<S>& H = w.H;
  assemble_stage(e, k, H);  // G + D
  H.diagonal().head(nv).array() += e.rho;
  if (set_.vel_lim_cost <= 0 && cost_.qd_weight(k) == S(0)) H.diagonal().segment(nv, nv).array() += e.rho;
  if (!H.allFinite()) return false;
  const MatX<S>& D = w.D[k];
  w.W = H - D;  // G
  w.lltz.compute(w.W);
  if (w.lltz.info() != Eigen::Success) return false;
  w.W = D;
  w.lltz.matrixL().solveInPlace(w.W);  // L^-1 D
  w.W.transposeInPlace();
  w.lltz.matrixL().solveInPlace(w.W);  // L^-1 D L^-T (symmetric)
  w.eig.compute(w.W, Eigen::EigenvaluesOnly);
  if (w.eig.info() != Eigen::Success) return false;
  const S mu = w.eig.eigenvalues().minCoeff();
  if (S(1) + mu < S(kMargin)) {  // G + D is not >= kMargin G: blend toward G
    const S theta = S(1 - kMargin) / -mu;
    H.noalias() -= (S(1) - theta) * D;
    ++w.modified;
  }
  if (k < N_ - 1) {
    w.llt.compute(H.bottomRightCorner(nu, nu));
    if (w.llt.info() != Eigen::Success) return false;
    e.Rinv[k].setIdentity();
    w.llt.solveInPlace(e.Rinv[k]);
    w.K[k].noalias() = -(e.Rinv[k] * H.block(nx, 0, nu, nx));
    e.tmp = H.topLeftCorner(nx, nx);
    e.tmp.noalias() += H.block(0, nx, nx, nu) * w.K[k];
    e.At[k] = e.A[k];
    e.At[k].noalias() += e.Bm[k] * w.K[k];
  } else {
    e.tmp = H.topLeftCorner(nx, nx);
  }
  return linsys::spd_inverse(e.tmp, e.tmp_L, e.tmp_Y, w.Qinv[k]);
}

// The exact-Hessian step (docs/solver_method.md, "Exact Hessian"): the KKT system of the QP
//   min sum_k 1/2 z_k' H_k z_k + g_k' z_k  s.t.  dx_0 = -c_0,  dx_{k+1} = A_k dx_k + B_k du_k - c_{k+1},
// H_k the exact stage block (the cost's blocks + D_k) plus the zero-weight control floor of the
// Gauss-Newton path, without its trust region rho (the undamped Newton step, guarded by the line
// search: with rho, which shrinks only by 1.2^k per accepted iteration, the local rate was
// linear; docs/solver_method.md), solved by the Riccati recursion on the cost-to-go
// V_k(dx) = 1/2 dx' P_k dx + p_k' dx (the structure of the feedback gains' recursion,
// solver_gains.hpp, with the defects and gradients):
//   Qzz = H_k + [A B]' P_{k+1} [A B],  qz = g_k + [A B]' (p_{k+1} - P_{k+1} c_{k+1}),
//   K_k = -Quu^-1 Qux,  kff_k = -Quu^-1 qu,  P_k = Qxx + Qux' K_k,  p_k = qx + Qux' kff_k,
// then forward du_k = kff_k + K_k dx_k and the multipliers lam_k = P_k dx_k + p_k (= dV_k/ddx, the
// Schur dual's sign: q_k - lam_k + A_k' lam_{k+1} + (H dz)_x = 0). Unlike the Schur complement
// it needs only the reduced Hessians Quu_k positive definite (then the QP's Hessian on the null
// space of the constraints is), not the stage blocks, which are indefinite at a converged
// reaching plan: there the step is the exact Newton step.
// Inertia control: where a Cholesky of Quu_k fails, the QP is not convex on the constraints'
// null space and its KKT point is no minimizer; the backward pass is then run again on the
// Gauss-Newton blocks with rho (D_k = 0: positive definite stage blocks, so positive definite
// Quu_k), i.e. that iteration takes the Gauss-Newton step (eh.exact_step false: the switch,
// reported per iteration in SolveStats::exact_step). The Gauss-Newton step is also taken in a
// cold start's first two iterations (from all multipliers zero) and where iterate() finds it better than an
// exact step its model does not predict (actual merit decrease of the full step below 3/4 of
// pred, computed here) or the line search cut to alpha <= 1/4 (solver_iteration.hpp). Measured against the usual shift (Quu_k + delta I,
// delta from 1e-8 s up by 10x until the Cholesky succeeds, Ipopt / crocoddyl): far from the
// optimum (the first iterations of a cold start: a large EE residual, large multipliers) the
// shifted exact model gave steps the line search cut to 1/64 or rejected (RK4: 3 of the first 7
// iterations), the Gauss-Newton fallback the Gauss-Newton method's own steps. A block the
// fallback cannot factor either fails the step (the caller rejects the iteration, rho x 100).
// converged: the predicted decrease sum_k kff_k' Quu_k kff_k (= -kff_k' qu_k) below the
// Gauss-Newton test's floor (pcg_floor()) and every defect below its square root.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::riccati_eh(Entry& e) {
  const int nv = nv_, nx = nx_, nu = nu_, N = N_;
  auto& w = e.eh;
  const bool vel_barrier = set_.vel_lim_cost > 0, ctrl_barrier = set_.ctrl_lim_cost > 0;
  const S u_prox = S(std::is_same_v<S, float> ? kZeroControlProx32 : kZeroControlProx64);
  auto stage = [&](int k, bool exact) -> MatX<S>& {  // H_k (or the Gauss-Newton block) with the step terms
    MatX<S>& H = w.H;
    if (exact) {
      assemble_stage(e, k, H);
    } else {
      H.setZero();
      H.topLeftCorner(nx, nx) = e.Q[k];
      if (k < N - 1) {
        H.bottomRightCorner(nu, nu) = e.R[k];
        if (gravity_on()) {
          H.block(nx, 0, nu, nv) = e.Suq[k];
          H.block(0, nx, nv, nu) = e.Suq[k].transpose();
        }
      }
    }
    const S rho = exact ? S(0) : e.rho;  // no trust region on the exact blocks (above)
    H.diagonal().head(nv).array() += rho;
    if (!vel_barrier && cost_.qd_weight(k) == S(0)) H.diagonal().segment(nv, nv).array() += rho;
    if (k < N - 1 && !ctrl_barrier) {
      for (int j = 0; j < nu; ++j) {
        const S wu = cost_.u_weight(k, j);  // the step's floor (solver_schur.hpp)
        if (wu < u_prox) H(nx + j, nx + j) += u_prox - wu;
      }
    }
    return H;
  };
  S decrease = 0;
  auto backward = [&](bool exact) -> bool {
    w.P[N - 1] = stage(N - 1, exact).topLeftCorner(nx, nx);
    w.pv[N - 1] = e.qv[N - 1];
    decrease = 0;
    for (int k = N - 2; k >= 0; --k) {
      const MatX<S>& H = stage(k, exact);
      w.AB.leftCols(nx) = e.A[k];
      w.AB.rightCols(nu) = e.Bm[k];
      w.PAB.noalias() = w.P[k + 1] * w.AB;
      w.Qzz = H;
      w.Qzz.noalias() += w.AB.transpose() * w.PAB;
      w.pc = w.pv[k + 1];
      w.pc.noalias() -= w.P[k + 1] * e.c[k + 1];
      w.qz.head(nx) = e.qv[k];
      w.qz.tail(nu) = e.rv[k];
      w.qz.noalias() += w.AB.transpose() * w.pc;
      if (!w.Qzz.allFinite() || !w.qz.allFinite()) return false;
      w.Quu = w.Qzz.bottomRightCorner(nu, nu);
      w.llt.compute(w.Quu);
      if (w.llt.info() != Eigen::Success) return false;
      w.K[k] = -w.llt.solve(w.Qzz.bottomLeftCorner(nu, nx));
      w.kff[k] = -w.llt.solve(w.qz.tail(nu));
      decrease -= w.kff[k].dot(w.qz.tail(nu));
      w.P[k] = w.Qzz.topLeftCorner(nx, nx);
      w.P[k].noalias() += w.Qzz.bottomLeftCorner(nu, nx).transpose() * w.K[k];
      e.tmp = w.P[k].transpose();  // symmetrize
      w.P[k] = S(0.5) * (w.P[k] + e.tmp);
      w.pv[k] = w.qz.head(nx);
      w.pv[k].noalias() += w.Qzz.bottomLeftCorner(nu, nx).transpose() * w.kff[k];
    }
    return true;
  };
  // The Gauss-Newton blocks outright in a cold start's first two iterations (rule (a): with every
  // multiplier zero D_k would carry no dynamics curvature, only the EE residual's, at the largest
  // residual of the solve; the second iteration's multipliers are those of the first Gauss-Newton
  // QP, whose exact step was measured worse than Gauss-Newton's there) and for iterate()'s
  // comparison with an exact step its model does not predict (force_gn).
  if (!w.force_gn) {
    if (e.lam.isZero(0)) w.gn_left = detail::kEhColdGnSteps;
    w.cold_gn = w.gn_left > 0;
    if (w.cold_gn) --w.gn_left;
  }
  w.exact_step = !w.force_gn && !w.cold_gn && backward(true);
  if (!w.exact_step) {
    ++w.regularized;
    if (!backward(false)) return false;
  }
  // Forward: dx_0 = -c_0 (knot 0 is data), du_k = kff_k + K_k dx_k, the linearized dynamics;
  // the multipliers into e.r (unused on this path) first: a failed step keeps e.lam.
  S cmax = 0;
  w.dxk = -e.c[0];
  for (int k = 0; k < N; ++k) {
    cmax = std::max(cmax, e.c[k].cwiseAbs().maxCoeff());
    Eigen::Map<VecX<S>>(e.dz.data() + size_t(k) * (nx + nu), nx) = w.dxk;
    auto lam = blk(e.r, k, nx);
    lam = w.pv[k];
    lam.noalias() += w.P[k] * w.dxk;
    if (k == N - 1) break;
    w.duk = w.kff[k];
    w.duk.noalias() += w.K[k] * w.dxk;
    Eigen::Map<VecX<S>>(e.dz.data() + size_t(k) * (nx + nu) + nx, nu) = w.duk;
    w.pc = -e.c[k + 1];
    w.pc.noalias() += e.A[k] * w.dxk;
    w.pc.noalias() += e.Bm[k] * w.duk;
    w.dxk = w.pc;
  }
  if (!e.dz.allFinite() || !e.r.allFinite()) return false;
  e.converged = decrease < pcg_floor() && cmax < std::sqrt(pcg_floor());
  if (w.exact_step) {
    // The predicted decrease of the merit for the full step on the exact model (iterate()'s
    // ratio test): -(sum_k g_k' dz_k + 1/2 dz_k' H_k dz_k) + mu ||c||_1 (the step meets the
    // linearized dynamics, so the l1 term of the model drops to zero).
    S q = 0, c1 = 0;
    for (int k = 0; k < N; ++k) {
      const int m = k < N - 1 ? nx + nu : nx;
      const MatX<S>& H = stage(k, true);
      Eigen::Map<const VecX<S>> dzk(e.dz.data() + size_t(k) * (nx + nu), m);
      q += e.qv[k].dot(dzk.head(nx));
      if (k < N - 1) q += e.rv[k].dot(dzk.tail(nu));
      q += S(0.5) * dzk.dot(H.topLeftCorner(m, m) * dzk);
      c1 += e.c[k].template lpNorm<1>();
    }
    w.pred = e.mu * c1 - q;
  }
  return true;
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::debug_stage_hessian(const S* xu, const S* x_s, const S* ref, const S* lam, S* H) {
  using RowMat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int nx = nx_, nz = nx_ + nu_, N = N_;
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.size_eh();
    e.xs = x_s + size_t(b) * nx;
    e.ref = ref + size_t(b) * 6 * N;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    setup_kkt(e);
    second_order(e, lam + size_t(b) * N * nx);
    for (int k = 0; k < N; ++k) {
      assemble_stage(e, k, e.eh.H);
      if (k == N - 1) e.eh.H.bottomRightCorner(nu_, nu_).setZero();
      Eigen::Map<RowMat>(H + (size_t(b) * N + k) * nz * nz, nz, nz) = e.eh.H;
    }
  }
}

}  // namespace gato
