// Small dense kernels for the solver's per-knot blocks (nv x nv and
// nx x nx: 7 x 7 and 14 x 14 for a 7-DoF arm), where Eigen's general LLT,
// triangular solves and inverses spend more on their blocking and loops than
// on the arithmetic. Column-oriented, so fixed-size columns vectorize.
#pragma once

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

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

// tmp -= E E' for 14 x 14 column-major double blocks (bdsv's E_k E_k' on a 7-DoF arm), on and
// below the diagonal only: columns two at a time (8 FMA chains in flight; Eigen's
// coefficient-based product runs one column, 4 chains of 14 dependent FMAs, latency-bound), rows
// from the 4-row packet holding the diagonal down (rows 12-13 as a 2-row packet). Each entry it
// writes is computed in the order of tmp.noalias() -= E.lazyProduct(E.transpose()): E(i,0) E(j,0),
// one FMA per k = 1..13, then the subtraction, so those entries are bit-identical to it
// (bench/stage_floors.cpp times both and compares them). Entries above the diagonal's packet keep
// tmp's values: cholesky_lower never reads them. False (nothing done) without AVX2 + FMA.
inline bool sub_aat_lower14(const double* e, double* t) {
#if defined(__AVX2__) && defined(__FMA__)
  constexpr int n = 14;
  for (int j = 0; j < n; j += 2) {
    const int p0 = (j / 4) * 4;
    __m256d a0[3], a1[3];
    const __m256d b0 = _mm256_set1_pd(e[j]), b1 = _mm256_set1_pd(e[j + 1]);
    for (int p = p0; p < 12; p += 4) {
      const __m256d x = _mm256_loadu_pd(e + p);
      a0[p / 4] = _mm256_mul_pd(x, b0);
      a1[p / 4] = _mm256_mul_pd(x, b1);
    }
    const __m128d x2 = _mm_loadu_pd(e + 12);
    __m128d c0 = _mm_mul_pd(x2, _mm256_castpd256_pd128(b0)), c1 = _mm_mul_pd(x2, _mm256_castpd256_pd128(b1));
    for (int k = 1; k < n; ++k) {
      const __m256d g0 = _mm256_set1_pd(e[k * n + j]), g1 = _mm256_set1_pd(e[k * n + j + 1]);
      for (int p = p0; p < 12; p += 4) {
        const __m256d x = _mm256_loadu_pd(e + k * n + p);
        a0[p / 4] = _mm256_fmadd_pd(x, g0, a0[p / 4]);
        a1[p / 4] = _mm256_fmadd_pd(x, g1, a1[p / 4]);
      }
      const __m128d y = _mm_loadu_pd(e + k * n + 12);
      c0 = _mm_fmadd_pd(y, _mm256_castpd256_pd128(g0), c0);
      c1 = _mm_fmadd_pd(y, _mm256_castpd256_pd128(g1), c1);
    }
    double* t0 = t + j * n;
    double* t1 = t + (j + 1) * n;
    for (int p = p0; p < 12; p += 4) {
      _mm256_storeu_pd(t0 + p, _mm256_sub_pd(_mm256_loadu_pd(t0 + p), a0[p / 4]));
      _mm256_storeu_pd(t1 + p, _mm256_sub_pd(_mm256_loadu_pd(t1 + p), a1[p / 4]));
    }
    _mm_storeu_pd(t0 + 12, _mm_sub_pd(_mm_loadu_pd(t0 + 12), c0));
    _mm_storeu_pd(t1 + 12, _mm_sub_pd(_mm_loadu_pd(t1 + 12), c1));
  }
  return true;
#else
  (void)e;
  (void)t;
  return false;
#endif
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
