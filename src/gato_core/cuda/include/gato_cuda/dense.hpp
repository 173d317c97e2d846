// Small dense kernels on row-major plain arrays (n x n, n <= 2 kMaxBodies) for the
// CUDA backend's dynamics and Schur blocks: Cholesky, triangular solves, SPD inverse.
#pragma once

#include "gato_cuda/hd.hpp"

namespace gato {
namespace cuda {
namespace dense {

/// L (row-major n x n, lower; the strict upper part is zeroed) = chol(A).
/// False when A is not positive definite (a pivot <= 0 or NaN).
template <typename S>
GATO_HD bool cholesky(const S* A, S* L, int n) {
  for (int j = 0; j < n; ++j) {
    S d = A[j * n + j];
    for (int k = 0; k < j; ++k) d -= L[j * n + k] * L[j * n + k];
    if (!(d > S(0))) return false;
    const S ljj = hd_sqrt(d), inv = S(1) / ljj;
    L[j * n + j] = ljj;
    for (int i = j + 1; i < n; ++i) {
      S s = A[i * n + j];
      for (int k = 0; k < j; ++k) s -= L[i * n + k] * L[j * n + k];
      L[i * n + j] = s * inv;
    }
    for (int i = 0; i < j; ++i) L[i * n + j] = S(0);
  }
  return true;
}

/// x <- L^-1 x (forward substitution).
template <typename S>
GATO_HD void solve_lower(const S* L, S* x, int n) {
  for (int i = 0; i < n; ++i) {
    S s = x[i];
    for (int k = 0; k < i; ++k) s -= L[i * n + k] * x[k];
    x[i] = s / L[i * n + i];
  }
}

/// x <- L^-T x (back substitution).
template <typename S>
GATO_HD void solve_lower_t(const S* L, S* x, int n) {
  for (int i = n - 1; i >= 0; --i) {
    S s = x[i];
    for (int k = i + 1; k < n; ++k) s -= L[k * n + i] * x[k];
    x[i] = s / L[i * n + i];
  }
}

/// Ainv = A^-1 (full symmetric) from L = chol(A); y: n scratch.
template <typename S>
GATO_HD void chol_inverse(const S* L, S* Ainv, S* y, int n) {
  for (int c = 0; c < n; ++c) {
    for (int i = 0; i < n; ++i) y[i] = i == c ? S(1) : S(0);
    solve_lower(L, y, n);
    solve_lower_t(L, y, n);
    for (int i = 0; i < n; ++i) Ainv[i * n + c] = y[i];
  }
}

/// X <- X L^-T (rows of X solved against L'), X m x n.
template <typename S>
GATO_HD void right_solve_lower_t(const S* L, S* X, int m, int n) {
  for (int r = 0; r < m; ++r) solve_lower(L, X + r * n, n);
}

}  // namespace dense
}  // namespace cuda
}  // namespace gato
