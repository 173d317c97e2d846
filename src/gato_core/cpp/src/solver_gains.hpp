// The time-varying feedback gains of a plan (docs/solver_method.md, "Feedback gains"): the
// finite-horizon LQR of one entry's Gauss-Newton model at the plan, from the KKT blocks
// setup_kkt assembles for the step (no trust region rho; the zero-weight control floor kept).
// Included by solver_impl.hpp only.
#pragma once

namespace gato {

template <typename S, int NV>
int BatchSolverImpl<S, NV>::feedback_gains(int b, const S* xu, const S* x_s, const S* ref, S* K) {
  using MatUX = Eigen::Matrix<S, NU, NX>;
  using RowMat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  if (b < 0 || b >= B_) throw std::invalid_argument("feedback_gains: row out of range");
  const int nv = nv_, nx = nx_, nu = nu_;
  Entry& e = *entries_[b];
  e.xs = x_s;
  e.ref = ref;
  e.xu = Eigen::Map<const Vec>(xu, L_);
  setup_kkt(e);  // Q, R, A, B (and S with u_ref = gravity, the rows' Hessians) at the plan
  const bool ctrl_barrier = set_.ctrl_lim_cost > 0;
  const S u_prox = S(std::is_same_v<S, float> ? kZeroControlProx32 : kZeroControlProx64);
  MatXX P = e.Q[N_ - 1];
  MatXX AP(nx, nx);
  MatXU PB(nx, nu);
  MatUU Quu(nu, nu);
  MatUX Qux(nu, nx), Kk(nu, nx);
  Eigen::LLT<MatUU> llt(nu);
  for (int k = N_ - 2; k >= 0; --k) {
    const MatXX& A = e.A[k];
    const MatXU& B = e.Bm[k];
    PB.noalias() = P * B;
    Quu = e.R[k];
    if (!ctrl_barrier) {
      for (int j = 0; j < nu; ++j) {
        const S w = cost_.u_weight(k, j);  // the step's floor (solver_schur.hpp)
        if (w < u_prox) Quu(j, j) += u_prox - w;
      }
    }
    Quu.noalias() += B.transpose() * PB;
    Qux.noalias() = PB.transpose() * A;
    if (gravity_on()) Qux.leftCols(nv) += e.Suq[k];
    llt.compute(Quu);
    if (llt.info() != Eigen::Success) return k;
    Kk = -llt.solve(Qux);
    Eigen::Map<RowMat>(K + size_t(k) * nu * nx, nu, nx) = Kk;
    AP.noalias() = A.transpose() * P;
    P = e.Q[k];
    P.noalias() += AP * A;
    P.noalias() += Qux.transpose() * Kk;
    AP = P.transpose();  // symmetrize
    P = S(0.5) * (P + AP);
  }
  return -1;
}

}  // namespace gato
