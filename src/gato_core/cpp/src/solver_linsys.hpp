// The linear solves of BatchSolverImpl (docs/solver_method.md, step 3): the
// block-tridiagonal Schur matrix-vector product, the stair preconditioner, PCG
// and the block Cholesky (bdsv). Included by solver_impl.hpp only.
#pragma once

namespace gato {


// Preconditioner diagonal of PCG: D_k = M_kk + rho * Ibar, inverted once per iteration.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::factor_preconditioner(Entry& e) {
  for (int k = 0; k < N_; ++k) {
    e.tmp = e.Md[k];
    if constexpr (NV == Eigen::Dynamic) {
      e.tmp.topLeftCorner(nv_, nv_).diagonal().array() += e.rho;
    } else {
      e.tmp.template topLeftCorner<NV, NV>().diagonal().array() += e.rho;
    }
    if (!linsys::spd_inverse(e.tmp, e.tmp_L, e.tmp_Y, e.Dinv[k])) return false;
  }
  return true;
}

// out = M p, M block tridiagonal: M_kk p_k - phi_{k-1} p_{k-1} - phi_k^T p_{k+1}.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::matvec(Entry& e, const Vec& p, Vec& out) const {
  const int nx = nx_;
  for (int k = 0; k < N_; ++k) {
    auto o = blk(out, k, nx);
    o.noalias() = e.Md[k] * blk(p, k, nx);
    if (k > 0) o.noalias() -= e.phi[k - 1] * blk(p, k - 1, nx);
    if (k < N_ - 1) o.noalias() -= e.phi[k].transpose() * blk(p, k + 1, nx);
  }
}

// out = (D^-1 - D^-1 O D^-1) r, O the off-diagonal part of M.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::precondition(Entry& e, const Vec& r, Vec& out) const {
  const int nx = nx_;
  for (int k = 0; k < N_; ++k) blk(e.y, k, nx).noalias() = e.Dinv[k] * blk(r, k, nx);
  for (int k = 0; k < N_; ++k) {
    auto wk = blk(e.w, k, nx);
    wk.setZero();
    if (k > 0) wk.noalias() -= e.phi[k - 1] * blk(e.y, k - 1, nx);
    if (k < N_ - 1) wk.noalias() -= e.phi[k].transpose() * blk(e.y, k + 1, nx);
  }
  for (int k = 0; k < N_; ++k) {
    auto ok = blk(out, k, nx);
    ok = blk(e.y, k, nx);
    ok.noalias() -= e.Dinv[k] * blk(e.w, k, nx);
  }
}

template <typename S, int NV>
int BatchSolverImpl<S, NV>::solve_pcg(Entry& e) {
  // r = rhs - M lam and z = P^-1 r were computed by the caller.
  S rz = e.r.dot(e.z);
  const S rz0 = std::abs(rz);
  if (rz0 < pcg_floor()) return 0;
  e.p = e.z;
  int it = 0;
  while (it < set_.max_pcg_iters) {
    matvec(e, e.p, e.Mp);
    const S pMp = e.p.dot(e.Mp);
    if (!(pMp > 0)) break;  // lost positive definiteness numerically: keep lam
    const S alpha = rz / pMp;
    e.lam.noalias() += alpha * e.p;
    e.r.noalias() -= alpha * e.Mp;
    precondition(e, e.r, e.z);
    const S rz_new = e.r.dot(e.z);
    ++it;
    if (std::abs(rz_new) < pcg_floor() + e.pcg_tol * rz0) break;
    e.p = e.z + (rz_new / rz) * e.p;
    rz = rz_new;
  }
  return it;
}

// Block Cholesky of M (block Thomas). Solves for the correction of the warm
// dual, M d = r (r = rhs - M lam, set by the caller), so r'd is the exact
// energy of the residual: the convergence test comes with the solve.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::solve_bdsv(Entry& e) {
  if (!factor_bdsv(e)) return false;
  return backsolve_bdsv(e);
}

// The block Cholesky factor of M (E_k, L_k), kept for back-solves.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::factor_bdsv(Entry& e) {
  for (int k = 0; k < N_; ++k) {
    e.tmp = e.Md[k];
    if (k > 0) {
      // E_k = M_{k,k-1} L_{k-1}^-T, with M_{k,k-1} = -phi_{k-1}.
      e.E[k] = -e.phi[k - 1];
      linsys::solve_right_lower_t(e.Lc[k - 1], e.E[k]);
      // The lower triangle of tmp - E E' (all cholesky_lower reads), the same bits as the
      // lazy product's (small_dense.hpp).
      bool done = false;
      if constexpr (NX == 14 && std::is_same_v<S, double>) done = linsys::sub_aat_lower14(e.E[k].data(), e.tmp.data());
      if (!done) e.tmp.noalias() -= e.E[k].lazyProduct(e.E[k].transpose());
    }
    if (!linsys::cholesky_lower(e.tmp, e.Lc[k])) return false;
  }
  return true;
}

// lam += M^-1 r with the factor of factor_bdsv; sets converged from r'M^-1 r.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::backsolve_bdsv(Entry& e) {
  const int nx = nx_;
  // Forward: y_k = L_k^-1 (r_k - E_k y_{k-1}).
  for (int k = 0; k < N_; ++k) {
    auto yk = blk(e.y, k, nx);
    yk = blk(e.r, k, nx);
    if (k > 0) yk.noalias() -= e.E[k] * blk(e.y, k - 1, nx);
    e.Lc[k].template triangularView<Eigen::Lower>().solveInPlace(yk);
  }
  // Back: d_k = L_k^-T (y_k - E_{k+1}^T d_{k+1}).
  for (int k = N_ - 1; k >= 0; --k) {
    auto dk = blk(e.w, k, nx);
    dk = blk(e.y, k, nx);
    if (k < N_ - 1) dk.noalias() -= e.E[k + 1].transpose() * blk(e.w, k + 1, nx);
    e.Lc[k].transpose().template triangularView<Eigen::Upper>().solveInPlace(dk);
  }
  if (!e.w.allFinite()) return false;
  e.converged = std::abs(e.r.dot(e.w)) < pcg_floor();
  e.lam += e.w;
  return true;
}

}  // namespace gato
