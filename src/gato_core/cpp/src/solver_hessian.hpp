// The exact-Hessian ('eh') variant of BatchSolverImpl (docs/solver_method.md, "Exact
// Hessian"): the second-order terms of the Lagrangian in the stage Hessians, their
// positive-definite modification and the condensed stage block the Schur complement reads.
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

// The modified, condensed stage block of knot k. G = the Gauss-Newton block as the step sees it
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
