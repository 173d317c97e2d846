// The entry points of gato/lean_model.hpp (Kernels<S>) for lane type T: the
// lane-minor arrays of the caller are copied into aligned T arrays of the
// scratch, so the caller needs no vector types. Included by lean_kernels.cpp
// (scalar and SSE2) and lean_kernels_avx2.cpp (AVX2 + FMA, GATO_LEAN_ISA).
#pragma once

#include "lean_aba.hpp"
#include "lean_derivs.hpp"

namespace gato {
namespace lean {
inline namespace GATO_LEAN_ISA {

template <typename T>
struct Buf {  // scratch layout for n bodies
  static std::size_t bytes(int n) {
    return (sizeof(Body<T>) + sizeof(DBody<T>)) * n + sizeof(T) * (8 * n * n + 24 * n + 16);
  }
};

template <typename S, typename T>
void k_aba(const View<S>& m, void* scratch, const S* q, const S* qd, const S* tau, const S* fext,
           S* qdd, S* ee) {
  const int n = m.n;
  const std::size_t z = sizeof(T) * n;
  Body<T>* bd = static_cast<Body<T>*>(scratch);
  T* Q = reinterpret_cast<T*>(bd + n);
  T *V = Q + n, *U = V + n, *A = U + n, *E = A + n;
  std::memcpy(Q, q, z);
  std::memcpy(V, qd, z);
  std::memcpy(U, tau, z);
  aba<S, T>(m, bd, Q, V, U, fext, A, ee ? E : nullptr);
  std::memcpy(qdd, A, z);
  if (ee) std::memcpy(ee, E, 3 * sizeof(T));
}

template <typename S, typename T>
void k_ee(const View<S>& m, void* scratch, const S* q, S* ee) {
  const int n = m.n;
  Body<T>* bd = static_cast<Body<T>*>(scratch);
  T* Q = reinterpret_cast<T*>(bd + n);
  T* E = Q + n;
  std::memcpy(Q, q, sizeof(T) * n);
  forward_kinematics<S, T>(m, bd, Q);
  ee_position<S, T>(m, bd, E);
  std::memcpy(ee, E, 3 * sizeof(T));
}

// FK, then the EE position, rotation and angular Jacobian (each nullable but R).
template <typename S, typename T>
void k_pose(const View<S>& m, void* scratch, const S* q, S* ee, S* R, S* Jw) {
  const int n = m.n;
  Body<T>* bd = static_cast<Body<T>*>(scratch);
  T* Q = reinterpret_cast<T*>(bd + n);
  T *E = Q + n, *RR = E + 4, *JW = RR + 9;  // 4n + 13 of 8n^2 + 24n + 16
  std::memcpy(Q, q, sizeof(T) * n);
  forward_kinematics<S, T>(m, bd, Q);
  if (ee) {
    ee_position<S, T>(m, bd, E);
    std::memcpy(ee, E, 3 * sizeof(T));
  }
  ee_rotation<S, T>(m, bd, RR);
  std::memcpy(R, RR, 9 * sizeof(T));
  if (Jw) {
    ee_angular_jacobian<S, T>(m, bd, JW);
    std::memcpy(Jw, JW, sizeof(T) * 3 * n);
  }
}

// x+ = f(x, u): the integrators of gato/integrator.hpp (dynamics_step), in
// the same order of operations. integ: Integrator as int. R (with ee): the EE
// rotation from the placements of the pass at x (before RK4's later stages overwrite them).
template <typename S, typename T>
void k_step(const View<S>& m, void* scratch, int integ, S h, const S* x, const S* u, const S* fext,
            S* xn, S* ee, S* R) {
  const int n = m.n, nx = 2 * n;
  Body<T>* bd = static_cast<Body<T>*>(scratch);
  T* X = reinterpret_cast<T*>(bd + n);
  T *U = X + nx, *XN = U + n, *QDD = XN + nx, *E = QDD + n, *XS = E + 4;  // 9n + 4 of 16n + 16
  T* K = XS + nx;  // 4 stages of nx
  T* RR = K + 4 * nx;  // 9: 16n + 13 of 8n^2 + 24n + 16
  const bool rot = ee && R;
  std::memcpy(X, x, sizeof(T) * nx);
  std::memcpy(U, u, sizeof(T) * n);
  T* Eo = ee ? E : nullptr;
  if (integ == 2 /* Integrator::kRk4 */) {
    auto deriv = [&](const T* xi, T* k, T* ee_out) {
      aba<S, T>(m, bd, xi, xi + n, U, fext, QDD, ee_out);
      for (int j = 0; j < n; ++j) {
        k[j] = xi[n + j];
        k[n + j] = QDD[j];
      }
    };
    T *K0 = K, *K1 = K + nx, *K2 = K + 2 * nx, *K3 = K + 3 * nx;
    deriv(X, K0, Eo);
    if (rot) ee_rotation<S, T>(m, bd, RR);
    for (int i = 0; i < nx; ++i) XS[i] = X[i] + (h / 2) * K0[i];
    deriv(XS, K1, nullptr);
    for (int i = 0; i < nx; ++i) XS[i] = X[i] + (h / 2) * K1[i];
    deriv(XS, K2, nullptr);
    for (int i = 0; i < nx; ++i) XS[i] = X[i] + h * K2[i];
    deriv(XS, K3, nullptr);
    for (int i = 0; i < nx; ++i) XN[i] = X[i] + (h / 6) * (K0[i] + 2 * K1[i] + 2 * K2[i] + K3[i]);
  } else {
    aba<S, T>(m, bd, X, X + n, U, fext, QDD, Eo);
    if (rot) ee_rotation<S, T>(m, bd, RR);
    for (int j = 0; j < n; ++j) XN[n + j] = X[n + j] + h * QDD[j];
    if (integ == 0 /* Integrator::kEuler */) {
      for (int j = 0; j < n; ++j) XN[j] = X[j] + h * X[n + j] + (h * h / 2) * QDD[j];
    } else {
      for (int j = 0; j < n; ++j) XN[j] = X[j] + h * XN[n + j];
    }
  }
  std::memcpy(xn, XN, sizeof(T) * nx);
  if (ee) std::memcpy(ee, E, 3 * sizeof(T));
  if (rot) std::memcpy(R, RR, 9 * sizeof(T));
}

template <typename S, typename T>
void k_derivs(const View<S>& m, void* scratch, const S* q, const S* qd, const S* tau,
              const S* fext, S* qdd, S* dq, S* dv, S* Minv, S* ee, S* J) {
  const int n = m.n, nn = n * n;
  Body<T>* bd = static_cast<Body<T>*>(scratch);
  DBody<T>* db = reinterpret_cast<DBody<T>*>(bd + n);
  T* Q = reinterpret_cast<T*>(db + n);
  T *V = Q + n, *U = V + n, *A = U + n, *E = A + n, *FX = E + 4, *DQ = FX + 6 * n;
  T *DV = DQ + nn, *MI = DV + nn, *JJ = MI + nn, *work = JJ + 3 * n;  // + 4 nn + n
  std::memcpy(Q, q, sizeof(T) * n);
  std::memcpy(V, qd, sizeof(T) * n);
  std::memcpy(U, tau, sizeof(T) * n);
  if (fext) std::memcpy(FX, fext, sizeof(T) * 6 * n);
  aba_derivatives<S, T, T>(m, bd, db, Q, V, U, fext ? FX : nullptr, A, E, DQ, DV, MI,
                           J ? JJ : nullptr, work);
  std::memcpy(qdd, A, sizeof(T) * n);
  std::memcpy(dq, DQ, sizeof(T) * nn);
  std::memcpy(dv, DV, sizeof(T) * nn);
  std::memcpy(Minv, MI, sizeof(T) * nn);
  if (ee) std::memcpy(ee, E, 3 * sizeof(T));
  if (J) std::memcpy(J, JJ, sizeof(T) * 3 * n);
}

template <typename S, typename T>
Kernels<S> make_kernels(int n) {
  Kernels<S> k{};
  k.W = Lanes<T>::W;
  k.scratch_bytes = Buf<T>::bytes(n);
  k.aba = &k_aba<S, T>;
  k.ee = &k_ee<S, T>;
  k.step = &k_step<S, T>;
  k.pose = &k_pose<S, T>;
  k.derivs = &k_derivs<S, T>;
  return k;
}

}  // namespace GATO_LEAN_ISA
}  // namespace lean
}  // namespace gato
