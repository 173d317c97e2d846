// The Schur complement of BatchSolverImpl (docs/solver_method.md, step 2): the
// blocks of M = -S, the zero-weight regularization, the right-hand side -gamma
// and the primal step (dx, du) recovered from the dual lambda. Included by
// solver_impl.hpp only.
#pragma once

namespace gato {

// Blocks of M = -S (docs/solver_method.md, step 2) and the preconditioner.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::factor_schur(Entry& e) {
  const int nv = nv_, nx = nx_;
  auto pos = [&](auto& M) -> decltype(auto) {  // the position (top-left nv x nv) block
    if constexpr (NV == Eigen::Dynamic) {
      return M.topLeftCorner(nv, nv);
    } else {
      return M.template topLeftCorner<NV, NV>();
    }
  };
  auto vel_diag = [&](auto& M) {
    if constexpr (NV == Eigen::Dynamic) {
      return M.bottomRightCorner(nv, nv).diagonal();
    } else {
      return M.template bottomRightCorner<NV, NV>().diagonal();
    }
  };
  // Zero-weight blocks (docs/solver_method.md, "Zero weights"): a velocity or control
  // diagonal whose cost weight is 0 with its barrier off would make Q_vv or R singular.
  // The velocity block takes the trust region rho like the position block; a control weight
  // below a fixed tiny floor is lifted to it in the step (rho would damp torques by orders of
  // magnitude: an RTI loop could not reach gravity compensation; below the floor float32's
  // Schur complement loses the step). Both only shape the step (the merit keeps the
  // true cost), so a converged plan is that of the zero weight.
  const bool vel_barrier = set_.vel_lim_cost > 0, ctrl_barrier = set_.ctrl_lim_cost > 0;
  const S u_prox = S(std::is_same_v<S, float> ? kZeroControlProx32 : kZeroControlProx64);
  const bool grav = gravity_on();
  for (int k = 0; k < N_; ++k) {
    if (k < N_ - 1) {
      if (!ctrl_barrier) {
        // In place: R is rebuilt by the next setup_kkt and read only through Rinv after this.
        for (int j = 0; j < nu_; ++j) {
          const S w = cost_.u_weight(k, j);  // lifted to u_prox in the step (zero or tiny weights)
          if (w < u_prox) e.R[k](j, j) += u_prox - w;
        }
      }
      // R is diagonal unless a row group folds a dense G'G into it. The exact Hessian
      // factors the whole stage block below (factor_stage_eh).
      if (!eh_ && linsys::exactly_diagonal(e.R[k])) {
        if (!(e.R[k].diagonal().array() > 0).all()) return false;
        e.Rinv[k].setZero();
        e.Rinv[k].diagonal() = e.R[k].diagonal().cwiseInverse();
      } else if (!eh_) {
        e.llt_nu.compute(e.R[k]);
        if (e.llt_nu.info() != Eigen::Success) return false;
        e.Rinv[k].setIdentity();
        e.llt_nu.solveInPlace(e.Rinv[k]);
      }
    }
    if (eh_) {
      if (!factor_stage_eh(e, k)) return false;
      continue;
    }
    e.tmpv = pos(e.Q[k]);
    if (grav && k < N_ - 1) {
      // u_ref = gravity: eliminate the cross block S_uq of the knot (du = dv + K dx_q,
      // K = -R^-1 S_uq): Q_qq - S_uq' R^-1 S_uq, A + B [K 0]; q + [K' r; 0] in q_el().
      e.Kg[k].noalias() = -(e.Rinv[k] * e.Suq[k]);
      e.tmpv.noalias() += e.Suq[k].transpose() * e.Kg[k];
      e.At[k] = e.A[k];
      if constexpr (NV == Eigen::Dynamic) {
        e.At[k].leftCols(nv).noalias() += e.Bm[k] * e.Kg[k];
      } else {
        e.At[k].template leftCols<NV>().noalias() += e.Bm[k] * e.Kg[k];
      }
    }
    e.tmpv.diagonal().array() += e.rho;
    if (!linsys::spd_inverse(e.tmpv, e.tmpv_L, e.tmpv_Y, e.Qpp_inv[k])) return false;
    e.qvv_inv[k] = vel_diag(e.Q[k]);
    if (!vel_barrier && cost_.qd_weight(k) == S(0)) e.qvv_inv[k].array() += e.rho;
    if (!(e.qvv_inv[k].minCoeff() > 0)) return false;
    e.qvv_inv[k] = e.qvv_inv[k].cwiseInverse();
  }
  // M_00 = Qtilde_0^-1; rhs = -gamma.
  if (eh_) {
    e.Md[0] = e.eh.Qinv[0];
  } else {
    e.Md[0].setZero();
    pos(e.Md[0]) = e.Qpp_inv[0];
    vel_diag(e.Md[0]) = e.qvv_inv[0];
  }
  e.apply_Qinv(0, q_el(e, 0), e.t_nx);
  blk(e.rhs, 0, nx) = e.t_nx - e.c[0];
  for (int k = 0; k < N_ - 1; ++k) {
    MatXX& phi = e.phi[k];
    const MatXX& Ak = A_el(e, k);
    if (eh_) {
      phi.noalias() = Ak * e.eh.Qinv[k];
    } else if constexpr (NV == Eigen::Dynamic) {
      phi.leftCols(nv).noalias() = Ak.leftCols(nv) * e.Qpp_inv[k];
      phi.rightCols(nv) = Ak.rightCols(nv) * e.qvv_inv[k].asDiagonal();
    } else {
      phi.template leftCols<NV>().noalias() = Ak.template leftCols<NV>() * e.Qpp_inv[k];
      phi.template rightCols<NV>() = Ak.template rightCols<NV>() * e.qvv_inv[k].asDiagonal();
    }
    // Coefficient-wise (lazy) products: Eigen's blocked GEMM costs more than
    // it saves at these sizes (14 x 14 for a 7-DoF arm).
    e.BRinv[k].noalias() = e.Bm[k].lazyProduct(e.Rinv[k]);
    MatXX& M = e.Md[k + 1];
    // 14 x 14 doubles (a 7-DoF arm): both products two columns at a time, each entry in the
    // lazy product's order, so the same bits (linsys::abt14, small_dense.hpp).
    bool done = false;
    if constexpr (NX == 14 && std::is_same_v<S, double>)
      done = linsys::abt14<14, false>(phi.data(), Ak.data(), M.data()) &&
             linsys::abt14<NU, true>(e.BRinv[k].data(), e.Bm[k].data(), M.data());
    if (!done) {
      M.noalias() = phi.lazyProduct(Ak.transpose());
      M.noalias() += e.BRinv[k].lazyProduct(e.Bm[k].transpose());
    }
    if (eh_) {
      M += e.eh.Qinv[k + 1];
    } else {
      pos(M) += e.Qpp_inv[k + 1];
      vel_diag(M) += e.qvv_inv[k + 1];
    }
    // gamma_{k+1} = c_{k+1} + phi_k q_k + B R^-1 r_k - Qtilde_{k+1}^-1 q_{k+1}
    e.t_nx2 = e.c[k + 1];
    e.t_nx2.noalias() += phi * q_el(e, k);
    e.t_nx2.noalias() += e.BRinv[k] * e.rv[k];
    e.apply_Qinv(k + 1, q_el(e, k + 1), e.t_nx);
    blk(e.rhs, k + 1, nx) = e.t_nx - e.t_nx2;
  }
  return true;
}

// rhs = -gamma from the current gradients (the blocks of factor_schur are kept):
// the ADMM inner loop changes q and r only.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::build_rhs(Entry& e) {
  const int nx = nx_;
  e.apply_Qinv(0, q_el(e, 0), e.t_nx);
  blk(e.rhs, 0, nx) = e.t_nx - e.c[0];
  for (int k = 0; k < N_ - 1; ++k) {
    e.t_nx2 = e.c[k + 1];
    e.t_nx2.noalias() += e.phi[k] * q_el(e, k);
    e.t_nx2.noalias() += e.BRinv[k] * e.rv[k];
    e.apply_Qinv(k + 1, q_el(e, k + 1), e.t_nx);
    blk(e.rhs, k + 1, nx) = e.t_nx - e.t_nx2;
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::recover_step(Entry& e) {
  const int nx = nx_, nu = nu_;
  for (int k = 0; k < N_; ++k) {
    auto dx = Eigen::Map<VecNX>(e.dz.data() + k * (nx + nu), nx);
    if (k == 0) {
      // Knot 0 is data: take dx_0 = -c_0 from the constraint row itself, so an
      // inexact (PCG) dual cannot move the plan off the measured state.
      dx = -e.c[0];
    } else {
      e.t_nx = q_el(e, k) - blk(e.lam, k, nx);
      if (k < N_ - 1) e.t_nx.noalias() += A_el(e, k).transpose() * blk(e.lam, k + 1, nx);
      e.apply_Qinv(k, e.t_nx, e.t_nx2);
      dx = -e.t_nx2;
    }
    if (k < N_ - 1) {
      e.t_nu = e.rv[k];
      e.t_nu.noalias() += e.Bm[k].transpose() * blk(e.lam, k + 1, nx);
      auto du = Eigen::Map<VecNU>(e.dz.data() + k * (nx + nu) + nx, nu);
      du.noalias() = -(e.Rinv[k] * e.t_nu);
      if (eh_) {  // du = dv + K dx (the eliminated dense cross block)
        du.noalias() += e.eh.K[k] * dx;
      } else if (gravity_on()) {  // du = dv + K dx_q (the eliminated cross block)
        if constexpr (NV == Eigen::Dynamic) {
          du.noalias() += e.Kg[k] * dx.head(nv_);
        } else {
          du.noalias() += e.Kg[k] * dx.template head<NV>();
        }
      }
    }
  }
}

}  // namespace gato
