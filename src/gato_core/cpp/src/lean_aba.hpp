// Lean articulated-body algorithm (forward dynamics without derivatives) for
// kinematic trees of 1-DoF revolute / prismatic joints, the robots gato
// supports. It computes what pinocchio::aba computes (to rounding), in plain
// 3x3 blocks on the canonical model of gato/lean_model.hpp.
//
// Everything is templated on the lane type T: T = S (one evaluation) or a GCC
// vector of W scalars (W evaluations at once, e.g. the line-search trial
// points), so one code serves both. No pinocchio, no Eigen, no library
// templates: lean_kernels_avx2.cpp includes this file with AVX2 enabled, in
// its own inline namespace (GATO_LEAN_ISA), so that no function compiled for
// AVX2 can stand in for a generic one at link time.
#pragma once

#include <cmath>
#include <cstring>

#include "gato/lean_model.hpp"

#ifndef GATO_LEAN_ISA
#define GATO_LEAN_ISA isa_generic
#endif

namespace gato {
namespace lean {
inline namespace GATO_LEAN_ISA {

typedef double d2 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));
typedef float f8 __attribute__((vector_size(32)));
typedef double d8 __attribute__((vector_size(64)));  // AVX-512 (lean_kernels_avx512.cpp only)

template <typename T>
struct Lanes {  // T is a scalar
  static constexpr int W = 1;
  static void sincos(const T& x, T& s, T& c) {
    s = std::sin(x);
    c = std::cos(x);
  }
};
template <typename T, int WW>
struct VecLanes {
  static constexpr int W = WW;
  static void sincos(const T& x, T& s, T& c) {
    for (int l = 0; l < W; ++l) {
      s[l] = std::sin(x[l]);
      c[l] = std::cos(x[l]);
    }
  }
};
typedef long long i2 __attribute__((vector_size(16)));
typedef long long i4 __attribute__((vector_size(32)));
typedef long long i8 __attribute__((vector_size(64)));

// sin and cos of every lane of a double vector: Cephes' sin/cos (reduction by
// pi/4 in three parts, degree-5 polynomials in z^2), within an ulp or two of
// libm; lanes beyond |x| = 2^30 (or NaN) fall back to libm. The libm calls
// cost as much as the rest of the lean ABA otherwise.
template <typename T, typename I, int WW>
struct VecLanesD {
  static constexpr int W = WW;
  static void sincos(const T& x, T& s, T& c) {
    for (int l = 0; l < W; ++l) {
      if (!(std::abs(x[l]) < 1073741824.0)) {
        for (int k = 0; k < W; ++k) {
          s[k] = std::sin(x[k]);
          c[k] = std::cos(x[k]);
        }
        return;
      }
    }
    // Octant arithmetic in doubles (no double <-> int64 conversion before AVX-512):
    // y = the even integer nearest to |x| 4/pi (ties either way: |z| = pi/4 then),
    // m = (y / 2) mod 4 selects the polynomial and the signs.
    const T zero = T{};
    const T magic = zero + 6755399441055744.0;  // 1.5 * 2^52: (v + magic) - magic = rint(v)
    const I neg = x < zero;
    const T ax = neg ? -x : x;
    const T k = ((ax * 0.636619772367581343076) + magic) - magic;  // rint(|x| 2/pi) = y / 2
    const T y = k + k;
    const T m = k - 4.0 * (((k * 0.25 - 0.375) + magic) - magic);  // k mod 4, exact
    const T z = ((ax - y * 7.85398125648498535156E-1) - y * 3.77489470793079817668E-8) -
                y * 2.69515142907905952645E-15;
    const T zz = z * z;
    T ps = ((((1.58962301576546568060E-10 * zz - 2.50507477628578072866E-8) * zz +
              2.75573136213857245213E-6) * zz - 1.98412698295895385996E-4) * zz +
            8.33333333332211858878E-3) * zz - 1.66666666666666307295E-1;
    T pc = ((((-1.13585365213876817300E-11 * zz + 2.08757008419747316778E-9) * zz -
              2.75573141792967388112E-7) * zz + 2.48015872888517045348E-5) * zz -
            1.38888888888730564116E-3) * zz + 4.16666666666665929218E-2;
    const T sn = z + z * zz * ps;                   // sin z
    const T cs = 1.0 - 0.5 * zz + zz * zz * pc;     // cos z
    const I hi = m > 1.5;                              // octants 4..7: both signs flip
    const I swap = (m == 1.0) | (m == 3.0);            // octants 2, 6: sin <-> cos
    const T s0 = swap ? cs : sn;
    const T c0 = swap ? sn : cs;
    const I sneg = neg ^ hi;
    const I cneg = swap ^ hi;
    s = sneg ? -s0 : s0;
    c = cneg ? -c0 : c0;
  }
};
template <> struct Lanes<d2> : VecLanesD<d2, i2, 2> {};
template <> struct Lanes<d4> : VecLanesD<d4, i4, 4> {};
template <> struct Lanes<d8> : VecLanesD<d8, i8, 8> {};
template <> struct Lanes<f4> : VecLanes<f4, 4> {};
template <> struct Lanes<f8> : VecLanes<f8, 8> {};

/// Per-body scratch of one evaluation (of W lanes).
template <typename T>
struct Body {
  T R[9], p[3];            // joint placement in the parent frame at q
  T oR[9], op[3];          // world placement (only when the EE is asked for)
  T vl[3], w[3];           // body velocity (linear, angular)
  T cl[3], ca[3];          // bias acceleration v x S qd
  T A[9], B[9], C[9];      // articulated inertia [[A, B], [B', C]]
  T fl[3], fa[3];          // articulated bias force
  T Ul[3], Ua[3];          // U = Ia S
  T Dinv, u;
  T al[3], aa[3];          // spatial acceleration
};

namespace ops {
// y = M x
template <typename T, typename M>
inline void mv(const M* m, const T* x, T* y) {
  for (int r = 0; r < 3; ++r) y[r] = m[3 * r] * x[0] + m[3 * r + 1] * x[1] + m[3 * r + 2] * x[2];
}
// y = M' x
template <typename T, typename M>
inline void mtv(const M* m, const T* x, T* y) {
  for (int r = 0; r < 3; ++r) y[r] = m[r] * x[0] + m[3 + r] * x[1] + m[6 + r] * x[2];
}
template <typename T>
inline void cross(const T* a, const T* b, T* c) {
  c[0] = a[1] * b[2] - a[2] * b[1];
  c[1] = a[2] * b[0] - a[0] * b[2];
  c[2] = a[0] * b[1] - a[1] * b[0];
}
// C = A B
template <typename T>
inline void mm(const T* a, const T* b, T* c) {
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) c[3 * r + k] = a[3 * r] * b[k] + a[3 * r + 1] * b[3 + k] + a[3 * r + 2] * b[6 + k];
}
// C = A B'
template <typename T>
inline void mmt(const T* a, const T* b, T* c) {
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k)
      c[3 * r + k] = a[3 * r] * b[3 * k] + a[3 * r + 1] * b[3 * k + 1] + a[3 * r + 2] * b[3 * k + 2];
}
// C = R X R'
template <typename T>
inline void rot(const T* R, const T* X, T* out) {
  T t[9];
  mm(R, X, t);
  mmt(t, R, out);
}
// P X with P = [p]x: column-wise p x X(:, k)
template <typename T>
inline void skew_left(const T* p, const T* X, T* out) {
  for (int k = 0; k < 3; ++k) {
    out[k] = p[1] * X[6 + k] - p[2] * X[3 + k];
    out[3 + k] = p[2] * X[k] - p[0] * X[6 + k];
    out[6 + k] = p[0] * X[3 + k] - p[1] * X[k];
  }
}
// X P with P = [p]x: row r of X P = (X(r,:) P) = -(p x X(r,:)')' = X(r,:)' x p
template <typename T>
inline void skew_right(const T* X, const T* p, T* out) {
  for (int r = 0; r < 3; ++r) {
    const T* x = X + 3 * r;
    out[3 * r] = x[1] * p[2] - x[2] * p[1];
    out[3 * r + 1] = x[2] * p[0] - x[0] * p[2];
    out[3 * r + 2] = x[0] * p[1] - x[1] * p[0];
  }
}
}  // namespace ops

/// A spatial motion of the parent (linear l, angular a, parent frame) seen in
/// body b's frame: oa = R' a, ol = R' (l - p x a) (b.R, b.p: b's placement).
template <typename T>
inline void motion_to_child(const Body<T>& b, const T* l, const T* a, T* ol, T* oa) {
  T t[3], pa[3];
  ops::mtv(b.R, a, oa);
  ops::cross(b.p, a, pa);
  for (int r = 0; r < 3; ++r) t[r] = l[r] - pa[r];
  ops::mtv(b.R, t, ol);
}

/// Kinematics pass only: the world placement of every body (Body::oR, op).
/// Body i's placement in its parent (b.R, b.p) at joint position qi: the fixed
/// placement Rt, pt composed with the joint's motion about / along local +z.
template <typename S, typename T>
inline void joint_placement(const View<S>& m, int i, const T& qi, Body<T>& b) {
  const S* Rt = &m.Rt[9 * i];
  const S* pt = &m.pt[3 * i];
  if (m.prismatic[i]) {
    for (int k = 0; k < 9; ++k) b.R[k] = T{} + Rt[k];
    for (int r = 0; r < 3; ++r) b.p[r] = pt[r] + Rt[3 * r + 2] * qi;
  } else {
    T s, c;
    Lanes<T>::sincos(qi, s, c);
    for (int r = 0; r < 3; ++r) {
      b.R[3 * r] = Rt[3 * r] * c + Rt[3 * r + 1] * s;
      b.R[3 * r + 1] = Rt[3 * r + 1] * c - Rt[3 * r] * s;
      b.R[3 * r + 2] = T{} + Rt[3 * r + 2];
      b.p[r] = T{} + pt[r];
    }
  }
}

template <typename S, typename T>
void forward_kinematics(const View<S>& m, Body<T>* bd, const T* q) {
  for (int i = 0; i < m.n; ++i) {
    Body<T>& b = bd[i];
    joint_placement(m, i, q[m.idx[i]], b);
    const int pi = m.parent[i];
    if (pi < 0) {
      for (int k = 0; k < 9; ++k) b.oR[k] = b.R[k];
      for (int r = 0; r < 3; ++r) b.op[r] = b.p[r];
    } else {
      const Body<T>& pb = bd[pi];
      ops::mm(pb.oR, b.R, b.oR);
      T t[3];
      ops::mv(pb.oR, b.p, t);
      for (int r = 0; r < 3; ++r) b.op[r] = t[r] + pb.op[r];
    }
  }
}

/// World position of the EE point after forward_kinematics or aba(..., ee).
template <typename S, typename T>
void ee_position(const View<S>& m, const Body<T>* bd, T* ee) {
  if (m.ee_body < 0) {
    for (int r = 0; r < 3; ++r) ee[r] = T{} + m.ee_p[r];
    return;
  }
  const Body<T>& b = bd[m.ee_body];
  T pe[3] = {T{} + m.ee_p[0], T{} + m.ee_p[1], T{} + m.ee_p[2]};
  ops::mv(b.oR, pe, ee);
  for (int r = 0; r < 3; ++r) ee[r] += b.op[r];
}

/// World rotation of the EE frame (world <- EE, row-major) after forward_kinematics or
/// aba(..., ee): the EE body's oR times the frame's fixed axes View::ee_R.
template <typename S, typename T>
void ee_rotation(const View<S>& m, const Body<T>* bd, T* R) {
  if (m.ee_body < 0) {
    for (int k = 0; k < 9; ++k) R[k] = T{} + m.ee_R[k];
    return;
  }
  const T* oR = bd[m.ee_body].oR;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      R[3 * r + c] = oR[3 * r] * m.ee_R[c] + oR[3 * r + 1] * m.ee_R[3 + c] + oR[3 * r + 2] * m.ee_R[6 + c];
}

/// World angular Jacobian of the EE frame (3 x n row-major, column = velocity index)
/// after forward_kinematics: a revolute ancestor of the EE body (or the body itself)
/// contributes its world axis (+z of its canonical frame), a prismatic one nothing.
template <typename S, typename T>
void ee_angular_jacobian(const View<S>& m, const Body<T>* bd, T* Jw) {
  const int n = m.n;
  for (int k = 0; k < 3 * n; ++k) Jw[k] = T{};
  for (int j = m.ee_body; j >= 0; j = m.parent[j]) {
    if (m.prismatic[j]) continue;
    const T* oR = bd[j].oR;
    for (int r = 0; r < 3; ++r) Jw[r * n + m.idx[j]] = oR[3 * r + 2];
  }
}

/// The external force on body i in its canonical frame: fa (moment), fl
/// (force), from fext's 6 numbers per body in the pinocchio joint-local frame,
/// [angular; linear].
template <typename S, typename F>
inline void joint_fext(const View<S>& m, int i, const F* fext, F* fa, F* fl) {
  const F* f = fext + 6 * i;
  if (m.rotated[i]) {
    const S* Rf = &m.Rf[9 * i];
    ops::mv(Rf, f, fa);
    ops::mv(Rf, f + 3, fl);
  } else {
    for (int r = 0; r < 3; ++r) {
      fa[r] = f[r];
      fl[r] = f[3 + r];
    }
  }
}

/// qdd = FD(q, qd, tau, fext). q, qd, tau, qdd: nv lanes each, indexed like
/// pinocchio's velocity vector. fext: nullptr or 6 per body in the pinocchio
/// joint-local frame, [angular; linear]; F = S: the same for every lane,
/// F = T: per lane. ee (nullable): the EE world position (3 lanes).
template <typename S, typename T, typename F = S>
void aba(const View<S>& m, Body<T>* bd, const T* q, const T* qd, const T* tau, const F* fext,
         T* qdd, T* ee = nullptr) {
  using namespace ops;
  const int n = m.n;
  const bool world = ee != nullptr;
  // Pass 1: kinematics, velocities, bias accelerations and forces.
  for (int i = 0; i < n; ++i) {
    Body<T>& b = bd[i];
    const int j = m.idx[i];
    const T qi = q[j], vi = qd[j];
    const bool pris = m.prismatic[i];
    joint_placement(m, i, qi, b);
    const int pi = m.parent[i];
    if (pi < 0) {
      for (int r = 0; r < 3; ++r) b.vl[r] = b.w[r] = T{};
    } else {
      motion_to_child(b, bd[pi].vl, bd[pi].w, b.vl, b.w);
    }
    if (pris) {
      b.vl[2] += vi;
      b.cl[0] = vi * b.w[1];
      b.cl[1] = -vi * b.w[0];
      b.cl[2] = T{};
      b.ca[0] = b.ca[1] = b.ca[2] = T{};
    } else {
      b.w[2] += vi;
      b.cl[0] = vi * b.vl[1];
      b.cl[1] = -vi * b.vl[0];
      b.cl[2] = T{};
      b.ca[0] = vi * b.w[1];
      b.ca[1] = -vi * b.w[0];
      b.ca[2] = T{};
    }
    // Body inertia and the bias force v x* (I v) - fext.
    const S mass = m.mass[i];
    const S* B0 = &m.B0[9 * i];
    const S* C0 = &m.C0[9 * i];
    for (int k = 0; k < 9; ++k) {
      b.A[k] = T{};
      b.B[k] = T{} + B0[k];
      b.C[k] = T{} + C0[k];
    }
    b.A[0] = b.A[4] = b.A[8] = T{} + mass;
    T hl[3], ha[3], t1[3], t2[3];
    mv(B0, b.w, t1);
    for (int r = 0; r < 3; ++r) hl[r] = mass * b.vl[r] + t1[r];
    mtv(B0, b.vl, t1);
    mv(C0, b.w, t2);
    for (int r = 0; r < 3; ++r) ha[r] = t1[r] + t2[r];
    cross(b.w, hl, b.fl);
    cross(b.w, ha, b.fa);
    cross(b.vl, hl, t1);
    for (int r = 0; r < 3; ++r) b.fa[r] += t1[r];
    if (fext) {
      F fa[3], fl[3];
      joint_fext(m, i, fext, fa, fl);
      for (int r = 0; r < 3; ++r) {
        b.fl[r] -= fl[r];
        b.fa[r] -= fa[r];
      }
    }
    if (world) {
      if (pi < 0) {
        for (int k = 0; k < 9; ++k) b.oR[k] = b.R[k];
        for (int r = 0; r < 3; ++r) b.op[r] = b.p[r];
      } else {
        const Body<T>& pb = bd[pi];
        mm(pb.oR, b.R, b.oR);
        T t[3];
        mv(pb.oR, b.p, t);
        for (int r = 0; r < 3; ++r) b.op[r] = t[r] + pb.op[r];
      }
    }
  }
  // Pass 2: articulated inertias and bias forces, leaves to root.
  for (int i = n - 1; i >= 0; --i) {
    Body<T>& b = bd[i];
    const int j = m.idx[i];
    T D;
    if (m.prismatic[i]) {
      for (int r = 0; r < 3; ++r) {
        b.Ul[r] = b.A[3 * r + 2];
        b.Ua[r] = b.B[6 + r];  // (B')(:, 2) = B(2, :)
      }
      D = b.Ul[2] + m.armature[i];
      b.u = tau[j] - b.fl[2];
    } else {
      for (int r = 0; r < 3; ++r) {
        b.Ul[r] = b.B[3 * r + 2];
        b.Ua[r] = b.C[3 * r + 2];
      }
      D = b.Ua[2] + m.armature[i];
      b.u = tau[j] - b.fa[2];
    }
    b.Dinv = T{} + S(1) / D;
    const int pi = m.parent[i];
    if (pi < 0) continue;
    Body<T>& pb = bd[pi];
    const T ud = b.Dinv * b.u;
    T Ul[3], Ua[3];  // U D^-1
    for (int r = 0; r < 3; ++r) {
      Ul[r] = b.Ul[r] * b.Dinv;
      Ua[r] = b.Ua[r] * b.Dinv;
    }
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) {
        b.A[3 * r + k] -= Ul[r] * b.Ul[k];
        b.B[3 * r + k] -= Ul[r] * b.Ua[k];
        b.C[3 * r + k] -= Ua[r] * b.Ua[k];
      }
    // pa = f + Ia c + U D^-1 u
    T pl[3], pa[3], t1[3], t2[3];
    mv(b.A, b.cl, t1);
    mv(b.B, b.ca, t2);
    for (int r = 0; r < 3; ++r) pl[r] = b.fl[r] + t1[r] + t2[r] + b.Ul[r] * ud;
    mtv(b.B, b.cl, t1);
    mv(b.C, b.ca, t2);
    for (int r = 0; r < 3; ++r) pa[r] = b.fa[r] + t1[r] + t2[r] + b.Ua[r] * ud;
    // Parent += X* Ia X^-1: rotate, then translate by p:
    //   A' = A, B' = B - A P, C' = C + P B - B'' P   (P = [p]x).
    T Ar[9], Br[9], Cr[9], Bn[9], t9[9], u9[9];
    rot(b.R, b.A, Ar);
    rot(b.R, b.B, Br);
    rot(b.R, b.C, Cr);
    skew_right(Ar, b.p, t9);
    for (int k = 0; k < 9; ++k) Bn[k] = Br[k] - t9[k];
    skew_left(b.p, Br, t9);
    // B'' P: (B')' P, row r of B'' is column r of B'.
    T BnT[9];
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) BnT[3 * r + k] = Bn[3 * k + r];
    skew_right(BnT, b.p, u9);
    for (int k = 0; k < 9; ++k) {
      pb.A[k] += Ar[k];
      pb.B[k] += Bn[k];
      pb.C[k] += Cr[k] + t9[k] - u9[k];
    }
    // Parent force += X* pa: f = R pl, n = R pa + p x (R pl).
    mv(b.R, pl, t1);
    mv(b.R, pa, t2);
    T pc[3];
    cross(b.p, t1, pc);
    for (int r = 0; r < 3; ++r) {
      pb.fl[r] += t1[r];
      pb.fa[r] += t2[r] + pc[r];
    }
  }
  // Pass 3: accelerations, root to leaves.
  for (int i = 0; i < n; ++i) {
    Body<T>& b = bd[i];
    const int pi = m.parent[i];
    if (pi < 0) {
      T g[3] = {T{} + m.g[0], T{} + m.g[1], T{} + m.g[2]};
      mtv(b.R, g, b.al);
      b.aa[0] = b.aa[1] = b.aa[2] = T{};
    } else {
      motion_to_child(b, bd[pi].al, bd[pi].aa, b.al, b.aa);
    }
    for (int r = 0; r < 3; ++r) {
      b.al[r] += b.cl[r];
      b.aa[r] += b.ca[r];
    }
    T ua = b.u;
    for (int r = 0; r < 3; ++r) ua -= b.Ul[r] * b.al[r] + b.Ua[r] * b.aa[r];
    const T a = b.Dinv * ua;
    qdd[m.idx[i]] = a;
    if (m.prismatic[i]) {
      b.al[2] += a;
    } else {
      b.aa[2] += a;
    }
  }
  if (world) ee_position(m, bd, ee);
}

}  // namespace GATO_LEAN_ISA
}  // namespace lean
}  // namespace gato
