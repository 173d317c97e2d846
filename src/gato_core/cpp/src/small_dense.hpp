// Small dense kernels for the solver's per-knot blocks (nv x nv and
// nx x nx: 7 x 7 and 14 x 14 for a 7-DoF arm), where Eigen's general LLT,
// triangular solves and inverses spend more on their blocking and loops than
// on the arithmetic. Column-oriented, so fixed-size columns vectorize.
#pragma once

#include <cmath>

namespace gato {
namespace linsys {
// L = the lower Cholesky factor of the symmetric positive definite A,
// left-looking on whole columns: fixed-size columns vectorize, which beats
// Eigen's LLT at the 14 x 14 of a 7-DoF arm. The strictly upper part of L
// is left as scratch and never read. False when A is not positive definite.
template <typename Mat>
bool cholesky_lower(const Mat& A, Mat& L) {
  using S = typename Mat::Scalar;
  const int n = int(A.rows());
  for (int j = 0; j < n; ++j) {
    L.col(j) = A.col(j);
    for (int k = 0; k < j; ++k) L.col(j) -= L(j, k) * L.col(k);
    const S d = L(j, j);
    if (!(d > 0)) return false;
    L.col(j) *= S(1) / std::sqrt(d);
  }
  return true;
}

// X <- X L^-T for lower triangular L (solves X L' = X), column by column.
template <typename Mat>
void solve_right_lower_t(const Mat& L, Mat& X) {
  using S = typename Mat::Scalar;
  const int n = int(L.rows());
  for (int j = 0; j < n; ++j) {
    for (int k = 0; k < j; ++k) X.col(j) -= L(j, k) * X.col(k);
    X.col(j) *= S(1) / L(j, j);
  }
}

// Ainv = A^-1 for symmetric positive definite A via its Cholesky factor:
// A^-1 = L^-T L^-1 = Y Y' with Y = L^-T. L and Y are scratch of A's size.
// False when A is not positive definite.
template <typename Mat>
bool spd_inverse(const Mat& A, Mat& L, Mat& Y, Mat& Ainv) {
  if (!cholesky_lower(A, L)) return false;
  Y.setIdentity();
  solve_right_lower_t(L, Y);
  Ainv.noalias() = Y.lazyProduct(Y.transpose());
  return true;
}

// True when every off-diagonal entry is exactly zero.
template <typename Mat>
bool exactly_diagonal(const Mat& A) {
  const int n = int(A.rows());
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r)
      if (r != c && A(r, c) != 0) return false;
  return true;
}
}  // namespace linsys

}  // namespace gato
