// Analytic derivatives of the lean forward dynamics (lean_aba.hpp): what
// pinocchio::computeABADerivatives computes, for the same trees of 1-DoF
// revolute / prismatic joints, in plain 3-vectors and 3x3 blocks, W lanes at a
// time (the KKT stage linearizes several knots per call).
//
// Method (docs/solver_method.md, "How the C++ core computes it"):
//   qdd = M^-1 (tau - b(q, qd, fext))  =>  dqdd/dq = -M^-1 dID/dq,
//   dqdd/dqd = -M^-1 dID/dqd, dqdd/dtau = M^-1,
// with ID the inverse dynamics evaluated at (q, qd, qdd). dID/dq and dID/dqd
// come from the world-frame RNEA derivatives (Carpentier & Mansard, RSS 2018):
// every spatial quantity is expressed at the world origin in world axes, where
// moving q_j rotates a whole subtree about joint j's axis S_j. For a body k
// below joint j, the rigid part of that motion (S_j x .) cancels in tau_i =
// S_i . F_i, and what is left is
//   dID_i/dq_j  = S_i . (Ic_i dA_j + Dc_i dV_j)        (j an ancestor of i or i)
//   dID_i/dq_j  = S_i . (Ic_j dA_j + Dc_j dV_j + S_j x* F_j)   (j below i)
// and the same for qd with dA/dqd_j = 2 dV_j and dV/dqd_j = S_j, where
//   dV_j = v_parent(j) x S_j, dA_j = a_parent(j) x S_j + v_parent(j) x dV_j,
// Ic_i is the composite inertia of i's subtree and Dc_i the composite of
// D_k = v_k x* I_k - I_k v_k x + (. x* h_k), h_k = I_k v_k. D_k has only three
// non-zero columns (it ignores the linear part of what it acts on):
//   D_k [dl; da] = [2 da x p_l ; Y_k da],
//   Y_k = [w]C - C[w] - ([l][c] + [c][l]) - [p_a]
// (v = [l; w], inertia (m, c = m com, C about the origin), h = [p_l; p_a]),
// so a subtree's Dc is 12 numbers and composes by addition, as Ic does.
// M comes from the same pass (M_ij = (Ic_i S_i) . S_j), and M^-1 from its
// LDL' factorization (no square root: the lanes need only +, *, /).
#pragma once

#include "lean_aba.hpp"

namespace gato {
namespace lean {
inline namespace GATO_LEAN_ISA {

/// World-frame quantities of one body for the derivative passes (W lanes).
/// Spatial vectors are [linear; angular] at the world origin, world axes.
template <typename T>
struct DBody {
  T Sl[3], Sa[3];      // joint motion subspace
  T vl[3], va[3];      // body velocity
  T al[3], aa[3];      // body acceleration minus the gravity field
  T dVl[3], dVa[3];    // dV_j = v_parent x S (dA/dqd_j = 2 dV_j)
  T dAl[3], dAa[3];    // dA_j = a_parent x S + v_parent x dV_j
  T m, c[3], C[9];     // composite inertia: mass, first moment, rotational inertia at the origin
  T Fl[3], Fa[3];      // composite force (sum of the bodies' I a + v x* I v - fext)
  T Pl[3];             // composite linear momentum (the top block of Dc)
  T Y[9];              // bottom block of Dc
  T dFql[3], dFqa[3];  // dF/dq_j column of this joint (plus S_j x* F_j once the row is done)
  T dFvl[3], dFva[3];  // dF/dqd_j column
};

namespace dops {
template <typename T>
inline T dot3(const T* a, const T* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
template <typename T>
inline T dot6(const T* al, const T* aa, const T* bl, const T* ba) {
  return dot3(al, bl) + dot3(aa, ba);
}
// Spatial motion cross product: o = x x y.
template <typename T>
inline void mcross(const T* xl, const T* xa, const T* yl, const T* ya, T* ol, T* oa) {
  T t[3];
  ops::cross(xa, yl, ol);
  ops::cross(xl, ya, t);
  for (int r = 0; r < 3; ++r) ol[r] += t[r];
  ops::cross(xa, ya, oa);
}
// Spatial force cross product, accumulated: o += x x* f,
// x x* f = [xa x fl; xa x fa + xl x fl].
template <typename T>
inline void fcross_add(const T* xl, const T* xa, const T* fl, const T* fa, T* ol, T* oa) {
  T t[3], u[3], w[3];
  ops::cross(xa, fl, t);
  ops::cross(xa, fa, u);
  ops::cross(xl, fl, w);
  for (int r = 0; r < 3; ++r) {
    ol[r] += t[r];
    oa[r] += u[r] + w[r];
  }
}
// Inertia action o = I y, I = (m, c = m com, C at the origin):
// [m yl - c x ya; c x yl + C ya].
template <typename T>
inline void iact(const T& m, const T* c, const T* C, const T* yl, const T* ya, T* ol, T* oa) {
  T t[3], u[3];
  ops::cross(c, ya, t);
  ops::cross(c, yl, u);
  ops::mv(C, ya, oa);
  for (int r = 0; r < 3; ++r) {
    ol[r] = m * yl[r] - t[r];
    oa[r] += u[r];
  }
}
// o += D y with D = [[0, -2 [Pl]], [0, Y]] (the composite Dc of the header).
template <typename T>
inline void dact_add(const T* Pl, const T* Y, const T* ya, T* ol, T* oa) {
  T t[3], u[3];
  ops::cross(ya, Pl, t);
  ops::mv(Y, ya, u);
  for (int r = 0; r < 3; ++r) {
    ol[r] += 2 * t[r];
    oa[r] += u[r];
  }
}
}  // namespace dops

/// qdd = FD(q, qd, tau, fext) and dq = dqdd/dq, dv = dqdd/dqd, Minv =
/// dqdd/dtau (n x n row-major, rows and columns indexed like pinocchio's
/// velocity vector), ee = the EE world position, J (nullable) its 3 x n
/// world-axes position Jacobian. fext: nullptr or 6 per body in the pinocchio
/// joint-local frame, [angular; linear] (F = S: shared, F = T: per lane).
/// work: 4 n^2 + n lane values.
template <typename S, typename T, typename F>
void aba_derivatives(const View<S>& m, Body<T>* bd, DBody<T>* db, const T* q, const T* qd,
                     const T* tau, const F* fext, T* qdd, T* ee, T* dq, T* dv, T* Minv, T* J,
                     T* work) {
  using namespace ops;
  using namespace dops;
  const int n = m.n;
  // qdd and the world placements of the bodies (Body::oR, op) and the EE.
  aba<S, T, F>(m, bd, q, qd, tau, fext, qdd, ee);

  // Forward pass: world motion subspaces, velocities, accelerations, the
  // dV / dA columns, each body's inertia, force, momentum and Y block.
  for (int i = 0; i < n; ++i) {
    const Body<T>& b = bd[i];
    DBody<T>& d = db[i];
    const T z[3] = {b.oR[2], b.oR[5], b.oR[8]};  // the joint axis (+z of the canonical frame)
    if (m.prismatic[i]) {
      for (int r = 0; r < 3; ++r) {
        d.Sl[r] = z[r];
        d.Sa[r] = T{};
      }
    } else {
      cross(b.op, z, d.Sl);
      for (int r = 0; r < 3; ++r) d.Sa[r] = z[r];
    }
    const int pi = m.parent[i];
    const T zero[3] = {T{}, T{}, T{}};
    const T g[3] = {T{} + m.g[0], T{} + m.g[1], T{} + m.g[2]};
    const T* vpl = pi < 0 ? zero : db[pi].vl;
    const T* vpa = pi < 0 ? zero : db[pi].va;
    const T* apl = pi < 0 ? g : db[pi].al;
    const T* apa = pi < 0 ? zero : db[pi].aa;
    const int j = m.idx[i];
    const T qdi = qd[j], qddi = qdd[j];
    mcross(vpl, vpa, d.Sl, d.Sa, d.dVl, d.dVa);
    T tl[3], ta[3];
    mcross(apl, apa, d.Sl, d.Sa, d.dAl, d.dAa);
    mcross(vpl, vpa, d.dVl, d.dVa, tl, ta);
    for (int r = 0; r < 3; ++r) {
      d.dAl[r] += tl[r];
      d.dAa[r] += ta[r];
      d.vl[r] = vpl[r] + d.Sl[r] * qdi;
      d.va[r] = vpa[r] + d.Sa[r] * qdi;
      d.al[r] = apl[r] + d.dVl[r] * qdi + d.Sl[r] * qddi;
      d.aa[r] = apa[r] + d.dVa[r] * qdi + d.Sa[r] * qddi;
    }
    // The body's inertia at the world origin: c = m com_w, C = R Ic R' + m (|com_w|^2 - com_w com_w').
    const S mass = m.mass[i];
    T cw[3], Rt[9];
    {
      T cl[3] = {T{} + m.com[3 * i], T{} + m.com[3 * i + 1], T{} + m.com[3 * i + 2]};
      mv(b.oR, cl, cw);
      T Ic[9];
      for (int k = 0; k < 9; ++k) Ic[k] = T{} + m.Icom[9 * i + k];
      mm(b.oR, Ic, Rt);
      mmt(Rt, b.oR, d.C);
    }
    for (int r = 0; r < 3; ++r) cw[r] += b.op[r];
    const T cc = dot3(cw, cw);
    for (int r = 0; r < 3; ++r) {
      for (int k = 0; k < 3; ++k) d.C[3 * r + k] -= mass * cw[r] * cw[k];
      d.C[4 * r] += mass * cc;
      d.c[r] = mass * cw[r];
    }
    d.m = T{} + mass;
    // Momentum h = I v and force f = I a + v x* h - fext.
    T pl[3], pa[3];
    iact(d.m, d.c, d.C, d.vl, d.va, pl, pa);
    iact(d.m, d.c, d.C, d.al, d.aa, d.Fl, d.Fa);
    fcross_add(d.vl, d.va, pl, pa, d.Fl, d.Fa);
    for (int r = 0; r < 3; ++r) d.Pl[r] = pl[r];
    if (fext) {
      F fa[3], fl[3];
      joint_fext(m, i, fext, fa, fl);
      T wl[3], wa[3], wc[3];
      T fl_t[3] = {T{} + fl[0], T{} + fl[1], T{} + fl[2]};
      T fa_t[3] = {T{} + fa[0], T{} + fa[1], T{} + fa[2]};
      mv(b.oR, fl_t, wl);
      mv(b.oR, fa_t, wa);
      cross(b.op, wl, wc);
      for (int r = 0; r < 3; ++r) {
        d.Fl[r] -= wl[r];
        d.Fa[r] -= wa[r] + wc[r];
      }
    }
    // Y = [w]C - C[w] - ([l][c] + [c][l]) - [p_a], [l][c] + [c][l] = c l' + l c' - 2 (l.c) I.
    T WC[9], CW[9];
    skew_left(d.va, d.C, WC);
    skew_right(d.C, d.va, CW);
    const T lc = dot3(d.vl, d.c);
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k)
        d.Y[3 * r + k] = WC[3 * r + k] - CW[3 * r + k] - d.c[r] * d.vl[k] - d.vl[r] * d.c[k];
    for (int r = 0; r < 3; ++r) d.Y[4 * r] += 2 * lc;
    d.Y[1] += pa[2];
    d.Y[2] -= pa[1];
    d.Y[3] -= pa[2];
    d.Y[5] += pa[0];
    d.Y[6] += pa[1];
    d.Y[7] -= pa[0];
  }

  // Backward pass: composite quantities, dID/dq, dID/dqd and M, row by row.
  T* Tq = work;
  T* Tv = Tq + n * n;
  T* M = Tv + n * n;
  T* X = M + n * n;
  T* Dd = X + n * n;
  for (int k = 0; k < n * n; ++k) Tq[k] = Tv[k] = M[k] = T{};
  for (int i = n - 1; i >= 0; --i) {
    DBody<T>& d = db[i];
    T fdl[3], fda[3];
    iact(d.m, d.c, d.C, d.Sl, d.Sa, fdl, fda);  // Ic S
    const T two_dVl[3] = {2 * d.dVl[0], 2 * d.dVl[1], 2 * d.dVl[2]};
    const T two_dVa[3] = {2 * d.dVa[0], 2 * d.dVa[1], 2 * d.dVa[2]};
    iact(d.m, d.c, d.C, two_dVl, two_dVa, d.dFvl, d.dFva);
    dact_add(d.Pl, d.Y, d.Sa, d.dFvl, d.dFva);
    iact(d.m, d.c, d.C, d.dAl, d.dAa, d.dFql, d.dFqa);
    dact_add(d.Pl, d.Y, d.dVa, d.dFql, d.dFqa);
    const int ri = m.idx[i];
    for (int j = i; j <= m.last[i]; ++j) {
      const DBody<T>& e = db[j];
      Tv[ri * n + m.idx[j]] = dot6(d.Sl, d.Sa, e.dFvl, e.dFva);
      Tq[ri * n + m.idx[j]] = dot6(d.Sl, d.Sa, e.dFql, e.dFqa);
    }
    // y = Dc' S restricted to its angular part: 2 Pl x Sl + Y' Sa.
    T y[3], u[3];
    cross(d.Pl, d.Sl, y);
    mtv(d.Y, d.Sa, u);
    for (int r = 0; r < 3; ++r) y[r] = 2 * y[r] + u[r];
    M[ri * n + ri] = dot6(fdl, fda, d.Sl, d.Sa) + m.armature[i];
    for (int j = m.parent[i]; j >= 0; j = m.parent[j]) {
      const DBody<T>& e = db[j];
      const int cj = m.idx[j];
      Tq[ri * n + cj] = dot6(fdl, fda, e.dAl, e.dAa) + dot3(y, e.dVa);
      Tv[ri * n + cj] = 2 * dot6(fdl, fda, e.dVl, e.dVa) + dot3(y, e.Sa);
      const T mij = dot6(fdl, fda, e.Sl, e.Sa);
      M[ri * n + cj] = mij;
      M[cj * n + ri] = mij;
    }
    // For the rows above: dF/dq_i also carries the rotation of the subtree's force.
    fcross_add(d.Sl, d.Sa, d.Fl, d.Fa, d.dFql, d.dFqa);
    const int pi = m.parent[i];
    if (pi < 0) continue;
    DBody<T>& p = db[pi];
    p.m += d.m;
    for (int r = 0; r < 3; ++r) {
      p.c[r] += d.c[r];
      p.Fl[r] += d.Fl[r];
      p.Fa[r] += d.Fa[r];
      p.Pl[r] += d.Pl[r];
    }
    for (int k = 0; k < 9; ++k) {
      p.C[k] += d.C[k];
      p.Y[k] += d.Y[k];
    }
  }

  // M = L D L' (unit lower L, stored below the diagonal of M), then
  // X = L^-1 and Minv = X' D^-1 X.
  for (int j = 0; j < n; ++j) {
    T dj = M[j * n + j];
    for (int k = 0; k < j; ++k) dj -= M[j * n + k] * M[j * n + k] * Dd[k];
    Dd[j] = dj;
    const T inv = T{} + S(1) / dj;
    for (int i = j + 1; i < n; ++i) {
      T s = M[i * n + j];
      for (int k = 0; k < j; ++k) s -= M[i * n + k] * M[j * n + k] * Dd[k];
      M[i * n + j] = s * inv;
    }
  }
  for (int j = 0; j < n; ++j) Dd[j] = T{} + S(1) / Dd[j];
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      T s = -M[i * n + j];
      for (int k = j + 1; k < i; ++k) s -= M[i * n + k] * X[k * n + j];
      X[i * n + j] = s;
    }
    X[i * n + i] = T{} + S(1);
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j) {
      T s = T{};
      for (int k = i; k < n; ++k) s += X[k * n + i] * X[k * n + j] * Dd[k];
      Minv[i * n + j] = s;
      Minv[j * n + i] = s;
    }
  }
  // dq = -Minv dID/dq, dv = -Minv dID/dqd.
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      T sq = T{}, sv = T{};
      for (int k = 0; k < n; ++k) {
        sq += Minv[i * n + k] * Tq[k * n + j];
        sv += Minv[i * n + k] * Tv[k * n + j];
      }
      dq[i * n + j] = -sq;
      dv[i * n + j] = -sv;
    }
  }
  if (J) {
    for (int k = 0; k < 3 * n; ++k) J[k] = T{};
    for (int j = m.ee_body; j >= 0; j = m.parent[j]) {
      const DBody<T>& e = db[j];
      T t[3];
      cross(e.Sa, ee, t);
      for (int r = 0; r < 3; ++r) J[r * n + m.idx[j]] = e.Sl[r] + t[r];
    }
  }
}

}  // namespace GATO_LEAN_ISA
}  // namespace lean
}  // namespace gato
