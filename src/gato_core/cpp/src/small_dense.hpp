// Small dense kernels for the solver's per-knot blocks (nv x nv and
// nx x nx: 7 x 7 and 14 x 14 for a 7-DoF arm), where Eigen's general LLT,
// triangular solves and inverses spend more on their blocking and loops than
// on the arithmetic. Column-oriented, so fixed-size columns vectorize.
#pragma once

#include <cmath>
#include <type_traits>

#include <Eigen/Core>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace gato {
namespace linsys {
#if defined(__AVX2__) && defined(__FMA__)
// cholesky_lower and solve_right_lower_t for 14 x 14 column-major doubles with AVX2 + FMA: a
// column as three 4-double and one 2-double vector (Eigen's fixed-size column ops use 2-double
// packets here), two columns at a time (their update chains interleaved), each entry with
// the generic versions' operations in their order (c -= L(j,k) L(:,k) as one FMA for k = 0..j-1,
// then the scaling), so the same bits (bench_solver_ab.py --identity). cholesky_lower and
// solve_right_lower_t hand 14 x 14 doubles to them where the TU has AVX2 + FMA.
struct Col14 {
  __m256d a, b, c;
  __m128d d;
};
inline Col14 col14_load(const double* p) {
  return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4), _mm256_loadu_pd(p + 8), _mm_loadu_pd(p + 12)};
}
inline void col14_store(double* p, const Col14& x) {
  _mm256_storeu_pd(p, x.a);
  _mm256_storeu_pd(p + 4, x.b);
  _mm256_storeu_pd(p + 8, x.c);
  _mm_storeu_pd(p + 12, x.d);
}
// x -= s y (one rounding: Eigen's contracted packet op)
inline void col14_fnmadd(Col14& x, double s, const Col14& y) {
  const __m256d v = _mm256_set1_pd(s);
  x.a = _mm256_fnmadd_pd(v, y.a, x.a);
  x.b = _mm256_fnmadd_pd(v, y.b, x.b);
  x.c = _mm256_fnmadd_pd(v, y.c, x.c);
  x.d = _mm_fnmadd_pd(_mm256_castpd256_pd128(v), y.d, x.d);
}
inline void col14_scale(Col14& x, double s) {
  const __m256d v = _mm256_set1_pd(s);
  x.a = _mm256_mul_pd(x.a, v);
  x.b = _mm256_mul_pd(x.b, v);
  x.c = _mm256_mul_pd(x.c, v);
  x.d = _mm_mul_pd(x.d, _mm256_castpd256_pd128(v));
}
inline double col14_at(const Col14& x, int r) {
  alignas(32) double t[16];
  _mm256_store_pd(t, x.a);
  _mm256_store_pd(t + 4, x.b);
  _mm256_store_pd(t + 8, x.c);
  _mm_store_pd(t + 12, x.d);
  return t[r];
}
inline bool cholesky_lower14(const double* A, double* L) {
  constexpr int n = 14;
  for (int j = 0; j < n; j += 2) {
    Col14 c0 = col14_load(A + j * n), c1 = col14_load(A + (j + 1) * n);
    for (int k = 0; k < j; ++k) {
      const Col14 lk = col14_load(L + k * n);
      col14_fnmadd(c0, L[k * n + j], lk);
      col14_fnmadd(c1, L[k * n + j + 1], lk);
    }
    const double d0 = col14_at(c0, j);
    if (!(d0 > 0)) return false;
    col14_scale(c0, 1.0 / std::sqrt(d0));
    col14_store(L + j * n, c0);
    col14_fnmadd(c1, L[j * n + j + 1], c0);
    const double d1 = col14_at(c1, j + 1);
    if (!(d1 > 0)) return false;
    col14_scale(c1, 1.0 / std::sqrt(d1));
    col14_store(L + (j + 1) * n, c1);
  }
  return true;
}
// X <- X L^-T (solve_right_lower_t's operations and order)
inline void solve_right_lower_t14(const double* L, double* X) {
  constexpr int n = 14;
  for (int j = 0; j < n; j += 2) {
    Col14 c0 = col14_load(X + j * n), c1 = col14_load(X + (j + 1) * n);
    for (int k = 0; k < j; ++k) {
      const Col14 xk = col14_load(X + k * n);
      col14_fnmadd(c0, L[k * n + j], xk);
      col14_fnmadd(c1, L[k * n + j + 1], xk);
    }
    col14_scale(c0, 1.0 / L[j * n + j]);
    col14_store(X + j * n, c0);
    col14_fnmadd(c1, L[j * n + j + 1], c0);
    col14_scale(c1, 1.0 / L[(j + 1) * n + j + 1]);
    col14_store(X + (j + 1) * n, c1);
  }
}
#endif

// L = the lower Cholesky factor of the symmetric positive definite A,
// left-looking on whole columns: fixed-size columns vectorize, which beats
// Eigen's LLT at the 14 x 14 of a 7-DoF arm. The strictly upper part of L
// is left as scratch and never read. False when A is not positive definite.
template <typename Mat>
bool cholesky_lower(const Mat& A, Mat& L) {
  using S = typename Mat::Scalar;
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<Mat, Eigen::Matrix<double, 14, 14>>) return cholesky_lower14(A.data(), L.data());
#endif
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
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<Mat, Eigen::Matrix<double, 14, 14>>) {
    solve_right_lower_t14(L.data(), X.data());
    return;
  }
#endif
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

// out = X Y' (Add: out += X Y') for column-major doubles, X and Y 14 x K, out 14 x 14: the whole
// block, columns two at a time (8 FMA chains in flight; Eigen's coefficient-based product runs
// one 2-row packet at a time, a chain of K dependent FMAs, latency-bound). Each entry is computed
// in the order of out.noalias() (+)= X.lazyProduct(Y.transpose()): X(i,0) Y(j,0), one FMA per
// k = 1..K-1 in order, then (Add) the addition to out's entry, so it is bit-identical to it.
// False (nothing done) without AVX2 + FMA.
template <int K, bool Add>
inline bool abt14(const double* x, const double* y, double* out) {
#if defined(__AVX2__) && defined(__FMA__)
  constexpr int n = 14;
  for (int j = 0; j < n; j += 2) {
    __m256d a0[3], a1[3];
    const __m256d b0 = _mm256_set1_pd(y[j]), b1 = _mm256_set1_pd(y[j + 1]);
    for (int p = 0; p < 12; p += 4) {
      const __m256d v = _mm256_loadu_pd(x + p);
      a0[p / 4] = _mm256_mul_pd(v, b0);
      a1[p / 4] = _mm256_mul_pd(v, b1);
    }
    const __m128d v2 = _mm_loadu_pd(x + 12);
    __m128d c0 = _mm_mul_pd(v2, _mm256_castpd256_pd128(b0)), c1 = _mm_mul_pd(v2, _mm256_castpd256_pd128(b1));
    for (int k = 1; k < K; ++k) {
      const __m256d g0 = _mm256_set1_pd(y[k * n + j]), g1 = _mm256_set1_pd(y[k * n + j + 1]);
      for (int p = 0; p < 12; p += 4) {
        const __m256d v = _mm256_loadu_pd(x + k * n + p);
        a0[p / 4] = _mm256_fmadd_pd(v, g0, a0[p / 4]);
        a1[p / 4] = _mm256_fmadd_pd(v, g1, a1[p / 4]);
      }
      const __m128d w = _mm_loadu_pd(x + k * n + 12);
      c0 = _mm_fmadd_pd(w, _mm256_castpd256_pd128(g0), c0);
      c1 = _mm_fmadd_pd(w, _mm256_castpd256_pd128(g1), c1);
    }
    double* o0 = out + j * n;
    double* o1 = out + (j + 1) * n;
    for (int p = 0; p < 12; p += 4) {
      if (Add) {
        _mm256_storeu_pd(o0 + p, _mm256_add_pd(_mm256_loadu_pd(o0 + p), a0[p / 4]));
        _mm256_storeu_pd(o1 + p, _mm256_add_pd(_mm256_loadu_pd(o1 + p), a1[p / 4]));
      } else {
        _mm256_storeu_pd(o0 + p, a0[p / 4]);
        _mm256_storeu_pd(o1 + p, a1[p / 4]);
      }
    }
    if (Add) {
      _mm_storeu_pd(o0 + 12, _mm_add_pd(_mm_loadu_pd(o0 + 12), c0));
      _mm_storeu_pd(o1 + 12, _mm_add_pd(_mm_loadu_pd(o1 + 12), c1));
    } else {
      _mm_storeu_pd(o0 + 12, c0);
      _mm_storeu_pd(o1 + 12, c1);
    }
  }
  return true;
#else
  (void)x;
  (void)y;
  (void)out;
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
