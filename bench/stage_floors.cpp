// The floors of bench/bench_stage_floors.py: each CPU solver stage's arithmetic alone, on hot
// data, with no solver around it. Built by that script into build/stage_floors/ as a shared
// library (ctypes) linked against the installed gato._core_avx2, so the dynamics kernels timed
// here are the very ones the solver calls (gato::lean::kernels, the plant's lean model), and
// the small dense kernels are the solver's own (src/small_dense.hpp), compiled with
// _core_avx2's flags (-O3 -mavx2 -mfma). Times are per call of the whole horizon [us].
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <immintrin.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "gato/lean_model.hpp"
#include "gato/plant.hpp"
#include "small_dense.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct Ctx {
  std::unique_ptr<gato::Plant<double>> plant;
  gato::lean::View<double> view{};
  gato::lean::Kernels<double> k{};
  gato::lean::Scratch scr;
  int n = 0, W = 0;
};

constexpr int NV = 7, NX = 14;
using MatXX = Eigen::Matrix<double, NX, NX>;
using MatXU = Eigen::Matrix<double, NX, NV>;
using MatVV = Eigen::Matrix<double, NV, NV>;
using VecNX = Eigen::Matrix<double, NX, 1>;
using VecNV = Eigen::Matrix<double, NV, 1>;

template <typename Mat>
Mat spd(std::mt19937& g) {
  std::normal_distribution<double> d;
  Mat X;
  for (int i = 0; i < X.size(); ++i) X.data()[i] = d(g);
  Mat A = X * X.transpose();
  A.diagonal().array() += double(X.rows());
  return A;
}
template <typename Mat>
Mat rnd(std::mt19937& g, double s = 1.0) {
  std::normal_distribution<double> d;
  Mat X;
  for (int i = 0; i < X.size(); ++i) X.data()[i] = s * d(g);
  return X;
}
volatile double g_sink = 0;
}  // namespace

extern "C" {

// Core clock [GHz] from a chain of dependent integer adds (one cycle each): the fastest of
// `chunks` chunks of `iters` x 8 adds (a chunk the scheduler interrupted is slower, not faster).
double floors_clock_ghz(long iters, int chunks) {
  std::uint64_t x = 0;
  double best = 1e300;
  for (int c = 0; c < chunks; ++c) {
    const auto t0 = Clock::now();
    for (long i = 0; i < iters; ++i) {
      asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                   "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    }
    best = std::min(best, us(t0));
  }
  g_sink = double(x);
  return 8.0 * double(iters) / (best * 1e3);
}

// Peak double-precision flops [GFLOP/s] of one core: 12 independent 4-wide FMA chains (AVX2, the
// width of _core_avx2's block algebra), 96 flops per iteration; the fastest of `chunks` chunks.
double floors_peak_gflops(long iters, int chunks) {
  __m256d a0 = _mm256_set1_pd(1), a1 = _mm256_set1_pd(2), a2 = _mm256_set1_pd(3), a3 = _mm256_set1_pd(4),
          a4 = _mm256_set1_pd(5), a5 = _mm256_set1_pd(6), a6 = _mm256_set1_pd(7), a7 = _mm256_set1_pd(8),
          a8 = _mm256_set1_pd(9), a9 = _mm256_set1_pd(10), a10 = _mm256_set1_pd(11), a11 = _mm256_set1_pd(12);
  const __m256d m = _mm256_set1_pd(0.999999), b = _mm256_set1_pd(1e-7);
  double best = 1e300;
  for (int c = 0; c < chunks; ++c) {
    const auto t0 = Clock::now();
    for (long it = 0; it < iters; ++it) {
      a0 = _mm256_fmadd_pd(a0, m, b); a1 = _mm256_fmadd_pd(a1, m, b); a2 = _mm256_fmadd_pd(a2, m, b);
      a3 = _mm256_fmadd_pd(a3, m, b); a4 = _mm256_fmadd_pd(a4, m, b); a5 = _mm256_fmadd_pd(a5, m, b);
      a6 = _mm256_fmadd_pd(a6, m, b); a7 = _mm256_fmadd_pd(a7, m, b); a8 = _mm256_fmadd_pd(a8, m, b);
      a9 = _mm256_fmadd_pd(a9, m, b); a10 = _mm256_fmadd_pd(a10, m, b); a11 = _mm256_fmadd_pd(a11, m, b);
      asm volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
      asm volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
    }
    best = std::min(best, us(t0));
  }
  __m256d s = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)),
                            _mm256_add_pd(_mm256_add_pd(a4, a5), _mm256_add_pd(a6, a7)));
  s = _mm256_add_pd(s, _mm256_add_pd(_mm256_add_pd(a8, a9), _mm256_add_pd(a10, a11)));
  g_sink = _mm256_cvtsd_f64(s);
  return 96.0 * double(iters) / (best * 1e3);
}

void* floors_plant(const char* urdf, const char* ee) {
  auto* c = new Ctx;
  c->plant = std::make_unique<gato::Plant<double>>(urdf, ee);
  const auto* m = c->plant->lean_model();
  if (!m) {
    delete c;
    return nullptr;
  }
  c->view = m->view();
  c->n = m->n;
  c->k = gato::lean::kernels<double>(0, m->n);  // what the solver's lanes get (BatchSolverImpl::lk_)
  c->W = c->k.W;
  c->scr = gato::lean::Scratch(c->k.scratch_bytes);
  return c;
}
int floors_lanes(void* p) { return static_cast<Ctx*>(p)->W; }
void floors_free(void* p) { delete static_cast<Ctx*>(p); }

// KKT floor: the dynamics derivatives of N knots, W knots per call (ceil(N / W) calls of
// Kernels::derivs, as BatchSolverImpl::linearize_lanes), with the EE position and Jacobian.
void floors_kkt(void* p, int N, int reps, const double* x0, double* out) {
  Ctx& c = *static_cast<Ctx*>(p);
  const int n = c.n, W = c.W;
  std::vector<double> q(n * W), v(n * W), u(n * W), qdd(n * W), dq(n * n * W), dv(n * n * W), Mi(n * n * W),
      ee(3 * W), J(3 * n * W);
  for (int j = 0; j < n; ++j)
    for (int l = 0; l < W; ++l) {
      q[j * W + l] = x0[j] + 0.01 * l;
      v[j * W + l] = x0[n + j] + 0.02 * l;
      u[j * W + l] = 0.1 * (j - l);
    }
  const int calls = (N + W - 1) / W;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      c.k.derivs(c.view, c.scr.data(), q.data(), v.data(), u.data(), nullptr, qdd.data(), dq.data(), dv.data(),
                 Mi.data(), ee.data(), J.data());
    out[r] = us(t0);
  }
  g_sink = dq[0] + Mi[1];
}

// Line-search floor: the 8 step sizes' rollouts alone: per knot one integrator step of 8 lanes
// (8 / W calls; semi-implicit Euler, step h) with the EE position, the last knot its EE position
// only (BatchSolverImpl::trial_merits_lanes without the merit sums).
void floors_ls(void* p, int N, int integ, double h, int reps, const double* x0, double* out) {
  Ctx& c = *static_cast<Ctx*>(p);
  const int n = c.n, W = c.W, nx = 2 * n;
  std::vector<double> X(nx * W), U(n * W), XN(nx * W), EE(3 * W);
  for (int i = 0; i < nx; ++i)
    for (int l = 0; l < W; ++l) X[i * W + l] = x0[i] + 0.01 * l;
  for (int i = 0; i < n; ++i)
    for (int l = 0; l < W; ++l) U[i * W + l] = 0.1 * (i - l);
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int k = 0; k < N; ++k)
      for (int g0 = 0; g0 < 8; g0 += W) {
        if (k < N - 1) {
          c.k.step(c.view, c.scr.data(), integ, h, X.data(), U.data(), nullptr, XN.data(), EE.data(), nullptr);
        } else {
          c.k.ee(c.view, c.scr.data(), X.data(), EE.data());
        }
      }
    out[r] = us(t0);
  }
  g_sink = XN[0] + EE[0];
}

// The floor of Schur and the block-tridiagonal solve: N Cholesky factorizations of
// nx x nx SPD blocks. which = 0: linsys::cholesky_lower (the solver's own), 1: Eigen's LLT.
void floors_chol(int N, int which, int reps, double* out) {
  std::mt19937 g(1);
  std::vector<MatXX> A(N), L(N);
  for (int k = 0; k < N; ++k) A[k] = spd<MatXX>(g);
  Eigen::LLT<MatXX> llt;
  double s = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    if (which == 0) {
      for (int k = 0; k < N; ++k) gato::linsys::cholesky_lower(A[k], L[k]);
    } else {
      for (int k = 0; k < N; ++k) {
        llt.compute(A[k]);
        L[k] = llt.matrixLLT();
      }
    }
    out[r] = us(t0);
    s += L[N - 1](NX - 1, NX - 1);
  }
  g_sink = s;
}

// The stages' arithmetic as the solver writes it (BatchSolverImpl::factor_schur without the
// zero-weight and gravity branches, and matvec + factor_bdsv + backsolve_bdsv), on N knots of
// hot, seeded data in the solver's layout (one std::vector per block kind): what the stage
// would take with every block in cache and nothing else around it. which = 0: Schur, 1: the
// linear solve (bdsv).
void floors_stage_replica(int N, int which, int reps, double* out) {
  std::mt19937 g(2);
  std::vector<MatXX> Q(N), A(N), phi(N), Md(N), E(N), Lc(N);
  std::vector<MatXU> Bm(N), BRinv(N);
  std::vector<MatVV> Rinv(N), Qpp_inv(N);
  std::vector<VecNV> qvv_inv(N), rv(N);
  std::vector<VecNX> qv(N), c(N);
  for (int k = 0; k < N; ++k) {
    Q[k] = spd<MatXX>(g);
    A[k] = MatXX::Identity() + rnd<MatXX>(g, 0.01);
    Bm[k] = rnd<MatXU>(g, 0.01);
    Rinv[k].setZero();
    Rinv[k].diagonal().setConstant(1e3);
    qv[k] = rnd<VecNX>(g);
    rv[k] = rnd<VecNV>(g);
    c[k] = rnd<VecNX>(g, 1e-3);
  }
  Eigen::Matrix<double, Eigen::Dynamic, 1> rhs(N * NX), lam(N * NX), Mp(N * NX), res(N * NX), y(N * NX),
      w(N * NX);
  lam.setZero();
  MatVV tmpv, tL, tY;
  MatXX tmp;
  VecNX t1, t2;
  const double rho = 1e-3;
  auto schur = [&]() {
    for (int k = 0; k < N; ++k) {
      tmpv = Q[k].topLeftCorner<NV, NV>();
      tmpv.diagonal().array() += rho;
      gato::linsys::spd_inverse(tmpv, tL, tY, Qpp_inv[k]);
      qvv_inv[k] = Q[k].bottomRightCorner<NV, NV>().diagonal().cwiseInverse();
    }
    auto qinv = [&](int k, const VecNX& a, VecNX& o) {
      o.head<NV>().noalias() = Qpp_inv[k] * a.head<NV>();
      o.tail<NV>() = qvv_inv[k].cwiseProduct(a.tail<NV>());
    };
    Md[0].setZero();
    Md[0].topLeftCorner<NV, NV>() = Qpp_inv[0];
    Md[0].bottomRightCorner<NV, NV>().diagonal() = qvv_inv[0];
    qinv(0, qv[0], t1);
    rhs.segment<NX>(0) = t1 - c[0];
    for (int k = 0; k < N - 1; ++k) {
      phi[k].leftCols<NV>().noalias() = A[k].leftCols<NV>() * Qpp_inv[k];
      phi[k].rightCols<NV>() = A[k].rightCols<NV>() * qvv_inv[k].asDiagonal();
      BRinv[k].noalias() = Bm[k].lazyProduct(Rinv[k]);
      MatXX& M = Md[k + 1];
      // as factor_schur: both products two columns at a time (linsys::abt14)
      if (!(gato::linsys::abt14<NX, false>(phi[k].data(), A[k].data(), M.data()) &&
            gato::linsys::abt14<NV, true>(BRinv[k].data(), Bm[k].data(), M.data()))) {
        M.noalias() = phi[k].lazyProduct(A[k].transpose());
        M.noalias() += BRinv[k].lazyProduct(Bm[k].transpose());
      }
      M.topLeftCorner<NV, NV>() += Qpp_inv[k + 1];
      M.bottomRightCorner<NV, NV>().diagonal() += qvv_inv[k + 1];
      t2 = c[k + 1];
      t2.noalias() += phi[k] * qv[k];
      t2.noalias() += BRinv[k] * rv[k];
      qinv(k + 1, qv[k + 1], t1);
      rhs.segment<NX>((k + 1) * NX) = t1 - t2;
    }
  };
  auto bdsv = [&]() {
    for (int k = 0; k < N; ++k) {  // matvec: the residual of the warm dual
      auto o = Mp.segment<NX>(k * NX);
      o.noalias() = Md[k] * lam.segment<NX>(k * NX);
      if (k > 0) o.noalias() -= phi[k - 1] * lam.segment<NX>((k - 1) * NX);
      if (k < N - 1) o.noalias() -= phi[k].transpose() * lam.segment<NX>((k + 1) * NX);
    }
    res = rhs - Mp;
    for (int k = 0; k < N; ++k) {  // factor_bdsv
      tmp = Md[k];
      if (k > 0) {
        E[k] = -phi[k - 1];
        gato::linsys::solve_right_lower_t(Lc[k - 1], E[k]);
        gato::linsys::sub_aat_lower14(E[k].data(), tmp.data());  // as factor_bdsv (a4d47cc)
      }
      gato::linsys::cholesky_lower(tmp, Lc[k]);
    }
    for (int k = 0; k < N; ++k) {  // backsolve_bdsv
      auto yk = y.segment<NX>(k * NX);
      yk = res.segment<NX>(k * NX);
      if (k > 0) yk.noalias() -= E[k] * y.segment<NX>((k - 1) * NX);
      Lc[k].triangularView<Eigen::Lower>().solveInPlace(yk);
    }
    for (int k = N - 1; k >= 0; --k) {
      auto dk = w.segment<NX>(k * NX);
      dk = y.segment<NX>(k * NX);
      if (k < N - 1) dk.noalias() -= E[k + 1].transpose() * w.segment<NX>((k + 1) * NX);
      Lc[k].transpose().triangularView<Eigen::Upper>().solveInPlace(dk);
    }
    g_sink = res.dot(w);
  };
  schur();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    if (which == 0) {
      schur();
    } else {
      bdsv();
    }
    out[r] = us(t0);
  }
}
}

// factor_bdsv's tmp -= E E': Eigen's coefficient-based 14 x 14 product (what the solver ran
// before a4d47cc; one column at a time, 4 dependent FMA chains of 14, latency-bound) against the
// solver's linsys::sub_aat_lower14 (two columns at a time, on and below the diagonal, each entry
// in the lazy product's order).
extern "C" {
// N products tmp -= E E' on seeded blocks: out_eigen / out_two [us per N products, REPS each];
// returns the number of lower-triangle entries (over `checks` random blocks of wide-range
// entries) where the two differ in any bit.
long floors_eet(int N, int reps, int checks, double* out_eigen, double* out_two) {
  std::mt19937 g(4);
  std::normal_distribution<double> d;
  long mism = 0;
  for (int c = 0; c < checks; ++c) {
    MatXX E, T;
    for (int i = 0; i < NX * NX; ++i) {
      E.data()[i] = d(g) * std::exp(2 * d(g));
      T.data()[i] = d(g);
    }
    MatXX A = T, B = T;
    A.noalias() -= E.lazyProduct(E.transpose());
    gato::linsys::sub_aat_lower14(E.data(), B.data());
    for (int j = 0; j < NX; ++j)
      for (int i = j; i < NX; ++i) mism += std::memcmp(&A(i, j), &B(i, j), sizeof(double)) != 0;
  }
  std::vector<MatXX> E(N), T(N), A(N);
  for (int k = 0; k < N; ++k) {
    E[k] = rnd<MatXX>(g);
    T[k] = spd<MatXX>(g);
  }
  for (int r = 0; r < reps; ++r) {
    A = T;
    auto t0 = Clock::now();
    for (int k = 0; k < N; ++k) A[k].noalias() -= E[k].lazyProduct(E[k].transpose());
    out_eigen[r] = us(t0);
    A = T;
    t0 = Clock::now();
    for (int k = 0; k < N; ++k) gato::linsys::sub_aat_lower14(E[k].data(), A[k].data());
    out_two[r] = us(t0);
  }
  g_sink = A[N - 1](NX - 1, NX - 1);
  return mism;
}
}
