// Rigid-body dynamics of the CUDA backend for fixed-base trees of 1-DoF revolute /
// prismatic joints, on plain arrays, host and device (GATO_HD):
//   - kinematics: world placements, world motion subspaces, the EE point and Jacobian, the
//     EE rotation and angular Jacobian (the orientation cost);
//   - RNEA in world coordinates (every spatial quantity at the world origin in world
//     axes [linear; angular], so a subtree's force is the plain sum of its bodies');
//   - CRBA in the same coordinates (composite inertias add), M = L L' by Cholesky;
//   - forward dynamics qdd = M^-1 (tau - ID(q, qd, 0, fext));
//   - derivatives dqdd/dq = -M^-1 dID/dq, dqdd/dqd = -M^-1 dID/dqd, dqdd/dtau = M^-1,
//     with dID from ONE RNEA pass on forward-mode dual numbers (dual.hpp) seeded with
//     the 2 nv unit directions of (q, qd): exact to rounding.
// The model is the canonical one the CPU core extracts from the URDF
// (gato/lean_model.hpp: joint axis +z of each canonical frame), copied into the
// fixed-size, trivially copyable DevModel (model_export.hpp fills it).
#pragma once

#include "gato_cuda/dense.hpp"
#include "gato_cuda/dual.hpp"
#include "gato_cuda/hd.hpp"

namespace gato {
namespace cuda {

/// The canonical model (gato/lean_model.hpp's fields, fixed-size) and the URDF limits.
template <typename S>
struct DevModel {
  static constexpr int M = kMaxBodies;
  int n = 0;                       // bodies = joints = nv
  int parent[M] = {};              // parent body, -1 = the universe (parent < child)
  int idx[M] = {};                 // velocity (= configuration) index of the joint
  unsigned char prismatic[M] = {}; // 0 revolute about z, 1 prismatic along z
  unsigned char rotated[M] = {};   // Rf != I
  S Rt[9 * M] = {}, pt[3 * M] = {};// fixed placement in the parent frame (row-major R, p)
  S mass[M] = {}, com[3 * M] = {}, Icom[9 * M] = {};  // inertia in the canonical frame
  S armature[M] = {};
  S Rf[9 * M] = {};                // pinocchio joint frame -> canonical frame (for fext)
  S g[3] = {};                     // linear acceleration of the universe (-gravity)
  int ee_body = -1;                // body of the EE frame (-1: the universe)
  S ee_p[3] = {};                  // EE origin in that body's canonical frame
  // EE frame axes in that body's canonical frame (or world), row-major: R_ee = oR_body ee_R
  // (the CPU's lean::View::ee_R; model_export.hpp calibrates it against the plant).
  S ee_R[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  S q_lo[M] = {}, q_hi[M] = {}, qd_max[M] = {}, u_max[M] = {};  // URDF limits (SI)
};

/// World placement and motion subspace of one body (scalar T: S or a Dual).
template <typename T>
struct WBody {
  T oR[9], op[3];  // world rotation (row-major) and origin
  T Sl[3], Sa[3];  // world motion subspace [linear; angular] at the world origin
};

namespace v3 {
template <typename A, typename B, typename C>
GATO_HD void cross(const A* a, const B* b, C* c) {
  c[0] = a[1] * b[2] - a[2] * b[1];
  c[1] = a[2] * b[0] - a[0] * b[2];
  c[2] = a[0] * b[1] - a[1] * b[0];
}
template <typename T>
GATO_HD T dot(const T* a, const T* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
}  // namespace v3

/// World placements and motion subspaces of every body at q (nv, velocity-indexed).
template <typename S, typename T>
GATO_HD void kinematics(const DevModel<S>& m, const T* q, WBody<T>* w) {
  for (int i = 0; i < m.n; ++i) {
    const S* Rt = &m.Rt[9 * i];
    const S* pt = &m.pt[3 * i];
    const T qi = q[m.idx[i]];
    T R[9], p[3];
    if (m.prismatic[i]) {
      for (int k = 0; k < 9; ++k) R[k] = T(Rt[k]);
      for (int r = 0; r < 3; ++r) p[r] = pt[r] + Rt[3 * r + 2] * qi;
    } else {
      T s, c;
      hd_sincos(qi, &s, &c);
      for (int r = 0; r < 3; ++r) {  // Rt Rz(q)
        R[3 * r] = Rt[3 * r] * c + Rt[3 * r + 1] * s;
        R[3 * r + 1] = Rt[3 * r + 1] * c - Rt[3 * r] * s;
        R[3 * r + 2] = T(Rt[3 * r + 2]);
        p[r] = T(pt[r]);
      }
    }
    WBody<T>& b = w[i];
    const int pi = m.parent[i];
    if (pi < 0) {
      for (int k = 0; k < 9; ++k) b.oR[k] = R[k];
      for (int r = 0; r < 3; ++r) b.op[r] = p[r];
    } else {
      const WBody<T>& pb = w[pi];
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c)
          b.oR[3 * r + c] = pb.oR[3 * r] * R[c] + pb.oR[3 * r + 1] * R[3 + c] + pb.oR[3 * r + 2] * R[6 + c];
        b.op[r] = pb.op[r] + pb.oR[3 * r] * p[0] + pb.oR[3 * r + 1] * p[1] + pb.oR[3 * r + 2] * p[2];
      }
    }
    const T z[3] = {b.oR[2], b.oR[5], b.oR[8]};  // the joint axis in world axes
    if (m.prismatic[i]) {
      for (int r = 0; r < 3; ++r) {
        b.Sl[r] = z[r];
        b.Sa[r] = T(S(0));
      }
    } else {
      v3::cross(b.op, z, b.Sl);  // velocity of the world origin under a unit rotation about the axis
      for (int r = 0; r < 3; ++r) b.Sa[r] = z[r];
    }
  }
}

/// World position of the EE point after kinematics().
template <typename S, typename T>
GATO_HD void ee_position(const DevModel<S>& m, const WBody<T>* w, T* ee) {
  if (m.ee_body < 0) {
    for (int r = 0; r < 3; ++r) ee[r] = T(m.ee_p[r]);
    return;
  }
  const WBody<T>& b = w[m.ee_body];
  for (int r = 0; r < 3; ++r)
    ee[r] = b.op[r] + b.oR[3 * r] * m.ee_p[0] + b.oR[3 * r + 1] * m.ee_p[1] + b.oR[3 * r + 2] * m.ee_p[2];
}

/// The EE position Jacobian (3 x nv row-major, world axes) at the EE point ee.
template <typename S, typename T>
GATO_HD void ee_jacobian(const DevModel<S>& m, const WBody<T>* w, const T* ee, T* J) {
  const int n = m.n;
  for (int k = 0; k < 3 * n; ++k) J[k] = T(S(0));
  for (int j = m.ee_body; j >= 0; j = m.parent[j]) {
    T t[3];
    v3::cross(w[j].Sa, ee, t);
    for (int r = 0; r < 3; ++r) J[r * n + m.idx[j]] = w[j].Sl[r] + t[r];
  }
}

/// World rotation of the EE frame (world <- EE, row-major) after kinematics(): the EE body's
/// oR times the frame's fixed axes ee_R (the orientation cost, sqp_kkt.hpp).
template <typename S, typename T>
GATO_HD void ee_rotation(const DevModel<S>& m, const WBody<T>* w, T* R) {
  if (m.ee_body < 0) {
    for (int k = 0; k < 9; ++k) R[k] = T(m.ee_R[k]);
    return;
  }
  const T* oR = w[m.ee_body].oR;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      R[3 * r + c] = oR[3 * r] * m.ee_R[c] + oR[3 * r + 1] * m.ee_R[3 + c] + oR[3 * r + 2] * m.ee_R[6 + c];
}

/// The EE world angular Jacobian (3 x nv row-major, omega = Jw qd) after kinematics(): each
/// revolute ancestor of the EE body (or the body itself) contributes its world axis, a
/// prismatic one nothing.
template <typename S, typename T>
GATO_HD void ee_angular_jacobian(const DevModel<S>& m, const WBody<T>* w, T* Jw) {
  const int n = m.n;
  for (int k = 0; k < 3 * n; ++k) Jw[k] = T(S(0));
  for (int j = m.ee_body; j >= 0; j = m.parent[j]) {
    if (m.prismatic[j]) continue;
    for (int r = 0; r < 3; ++r) Jw[r * n + m.idx[j]] = w[j].Sa[r];
  }
}

/// Body i's spatial inertia at the world origin: mass, h = m c_w, C = rotational inertia
/// about the origin.
template <typename S, typename T>
GATO_HD void world_inertia(const DevModel<S>& m, int i, const WBody<T>& b, T* h, T* C) {
  const S mass = m.mass[i];
  const S* cl = &m.com[3 * i];
  const S* Ic = &m.Icom[9 * i];
  T cw[3], RI[9];
  for (int r = 0; r < 3; ++r) cw[r] = b.op[r] + b.oR[3 * r] * cl[0] + b.oR[3 * r + 1] * cl[1] + b.oR[3 * r + 2] * cl[2];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) RI[3 * r + c] = b.oR[3 * r] * Ic[c] + b.oR[3 * r + 1] * Ic[3 + c] + b.oR[3 * r + 2] * Ic[6 + c];
  const T cc = v3::dot(cw, cw);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c)
      C[3 * r + c] = RI[3 * r] * b.oR[3 * c] + RI[3 * r + 1] * b.oR[3 * c + 1] + RI[3 * r + 2] * b.oR[3 * c + 2] -
                     mass * (cw[r] * cw[c]);
    C[4 * r] = C[4 * r] + mass * cc;
    h[r] = mass * cw[r];
  }
}

/// o = I y for the inertia (mass, h, C): [mass yl - h x ya; h x yl + C ya].
template <typename S, typename T>
GATO_HD void inertia_apply(S mass, const T* h, const T* C, const T* yl, const T* ya, T* ol, T* oa) {
  T t[3], u[3];
  v3::cross(h, ya, t);
  v3::cross(h, yl, u);
  for (int r = 0; r < 3; ++r) {
    ol[r] = mass * yl[r] - t[r];
    oa[r] = C[3 * r] * ya[0] + C[3 * r + 1] * ya[1] + C[3 * r + 2] * ya[2] + u[r];
  }
}

/// External force on body i in world coordinates at the world origin, from fext's
/// 6 numbers (pinocchio joint-local frame, [angular; linear]).
template <typename S, typename T>
GATO_HD void fext_world(const DevModel<S>& m, int i, const WBody<T>& b, const S* fext, T* wl, T* wa) {
  const S* f = fext + 6 * i;
  S fa[3], fl[3];
  if (m.rotated[i]) {
    const S* Rf = &m.Rf[9 * i];
    for (int r = 0; r < 3; ++r) {
      fa[r] = Rf[3 * r] * f[0] + Rf[3 * r + 1] * f[1] + Rf[3 * r + 2] * f[2];
      fl[r] = Rf[3 * r] * f[3] + Rf[3 * r + 1] * f[4] + Rf[3 * r + 2] * f[5];
    }
  } else {
    for (int r = 0; r < 3; ++r) {
      fa[r] = f[r];
      fl[r] = f[3 + r];
    }
  }
  T c[3];
  for (int r = 0; r < 3; ++r) {
    wl[r] = b.oR[3 * r] * fl[0] + b.oR[3 * r + 1] * fl[1] + b.oR[3 * r + 2] * fl[2];
    wa[r] = b.oR[3 * r] * fa[0] + b.oR[3 * r + 1] * fa[1] + b.oR[3 * r + 2] * fa[2];
  }
  v3::cross(b.op, wl, c);
  for (int r = 0; r < 3; ++r) wa[r] = wa[r] + c[r];
}

/// Inverse dynamics tau = M qdd + c(q, qd) - sum J' fext (gravity from m.g) after
/// kinematics(). qd, qdd: T or S arrays (V, A); fext: nullptr or 6 per body.
template <typename S, typename T, typename V, typename A>
GATO_HD void rnea(const DevModel<S>& m, const WBody<T>* w, const V* qd, const A* qdd, const S* fext, T* tau) {
  const int n = m.n;
  T vl[kMaxBodies][3], va[kMaxBodies][3], Fl[kMaxBodies][3], Fa[kMaxBodies][3];
  for (int i = 0; i < n; ++i) {
    const WBody<T>& b = w[i];
    const int pi = m.parent[i];
    const int j = m.idx[i];
    T al[3], aa[3];
    if (pi < 0) {
      for (int r = 0; r < 3; ++r) {
        vl[i][r] = b.Sl[r] * qd[j];
        va[i][r] = b.Sa[r] * qd[j];
      }
    } else {
      for (int r = 0; r < 3; ++r) {
        vl[i][r] = vl[pi][r] + b.Sl[r] * qd[j];
        va[i][r] = va[pi][r] + b.Sa[r] * qd[j];
      }
    }
    // a_i = a_parent + (v_i x S_i) qd_i + S_i qdd_i, the universe accelerating with -gravity.
    T cl[3], ca[3], t[3];
    v3::cross(va[i], b.Sl, cl);
    v3::cross(vl[i], b.Sa, t);
    for (int r = 0; r < 3; ++r) cl[r] = cl[r] + t[r];
    v3::cross(va[i], b.Sa, ca);
    // a_parent is not stored: the accelerations are accumulated along the chain in Fl/Fa's
    // slots first (aa/al of the parent), then replaced by the forces in the pass below.
    for (int r = 0; r < 3; ++r) {
      const T apl = pi < 0 ? T(m.g[r]) : Fl[pi][r];
      const T apa = pi < 0 ? T(S(0)) : Fa[pi][r];
      al[r] = apl + cl[r] * qd[j] + b.Sl[r] * qdd[j];
      aa[r] = apa + ca[r] * qd[j] + b.Sa[r] * qdd[j];
      Fl[i][r] = al[r];
      Fa[i][r] = aa[r];
    }
  }
  // Forces f_i = I_i a_i + v_i x* I_i v_i - fext_i (every body's acceleration is known now).
  for (int i = 0; i < n; ++i) {
    const WBody<T>& b = w[i];
    T h[3], C[9], pl[3], pa[3], fl[3], fa[3], t[3], u[3];
    world_inertia(m, i, b, h, C);
    inertia_apply(m.mass[i], h, C, vl[i], va[i], pl, pa);
    inertia_apply(m.mass[i], h, C, Fl[i], Fa[i], fl, fa);
    v3::cross(va[i], pl, t);
    for (int r = 0; r < 3; ++r) fl[r] = fl[r] + t[r];
    v3::cross(va[i], pa, t);
    v3::cross(vl[i], pl, u);
    for (int r = 0; r < 3; ++r) fa[r] = fa[r] + t[r] + u[r];
    if (fext) {
      T wl[3], wa[3];
      fext_world(m, i, b, fext, wl, wa);
      for (int r = 0; r < 3; ++r) {
        fl[r] = fl[r] - wl[r];
        fa[r] = fa[r] - wa[r];
      }
    }
    for (int r = 0; r < 3; ++r) {
      Fl[i][r] = fl[r];
      Fa[i][r] = fa[r];
    }
  }
  // Leaves to root: subtree forces add (world coordinates), tau_i = S_i . F_i.
  for (int i = n - 1; i >= 0; --i) {
    const WBody<T>& b = w[i];
    tau[m.idx[i]] = v3::dot(b.Sl, Fl[i]) + v3::dot(b.Sa, Fa[i]);
    const int pi = m.parent[i];
    if (pi < 0) continue;
    for (int r = 0; r < 3; ++r) {
      Fl[pi][r] = Fl[pi][r] + Fl[i][r];
      Fa[pi][r] = Fa[pi][r] + Fa[i][r];
    }
  }
}

/// Joint-space inertia M (n x n row-major, velocity-indexed, armature included) by the
/// composite-rigid-body algorithm after kinematics().
template <typename S>
GATO_HD void crba(const DevModel<S>& m, const WBody<S>* w, S* M) {
  const int n = m.n;
  S cm[kMaxBodies], ch[kMaxBodies][3], cC[kMaxBodies][9];
  for (int k = 0; k < n * n; ++k) M[k] = S(0);  // bodies on different branches do not couple
  for (int i = 0; i < n; ++i) {
    cm[i] = m.mass[i];
    world_inertia(m, i, w[i], ch[i], cC[i]);
  }
  for (int i = n - 1; i >= 0; --i) {
    S Fl[3], Fa[3];
    inertia_apply(cm[i], ch[i], cC[i], w[i].Sl, w[i].Sa, Fl, Fa);  // Ic_i S_i
    const int ri = m.idx[i];
    M[ri * n + ri] = v3::dot(Fl, w[i].Sl) + v3::dot(Fa, w[i].Sa) + m.armature[i];
    for (int j = m.parent[i]; j >= 0; j = m.parent[j]) {
      const S mij = v3::dot(Fl, w[j].Sl) + v3::dot(Fa, w[j].Sa);
      M[ri * n + m.idx[j]] = mij;
      M[m.idx[j] * n + ri] = mij;
    }
    const int pi = m.parent[i];
    if (pi < 0) continue;
    cm[pi] += cm[i];
    for (int r = 0; r < 3; ++r) ch[pi][r] += ch[i][r];
    for (int k = 0; k < 9; ++k) cC[pi][k] += cC[i][k];
  }
}

/// Scratch of one forward-dynamics evaluation.
template <typename S>
struct FdScratch {
  WBody<S> w[kMaxBodies];
  S M[kMaxBodies * kMaxBodies], L[kMaxBodies * kMaxBodies], y[kMaxBodies];
};

/// qdd = FD(q, qd, tau, fext); ee (nullable): the EE world position. False when M is
/// not positive definite (qdd is then left untouched).
template <typename S>
GATO_HD bool forward_dynamics(const DevModel<S>& m, FdScratch<S>& s, const S* q, const S* qd, const S* tau,
                              const S* fext, S* qdd, S* ee) {
  const int n = m.n;
  kinematics(m, q, s.w);
  if (ee) ee_position(m, s.w, ee);
  S zero[kMaxBodies] = {};
  rnea(m, s.w, qd, zero, fext, s.y);  // the bias c(q, qd) - J' fext
  crba(m, s.w, s.M);
  if (!dense::cholesky(s.M, s.L, n)) return false;
  for (int i = 0; i < n; ++i) s.y[i] = tau[i] - s.y[i];
  dense::solve_lower(s.L, s.y, n);
  dense::solve_lower_t(s.L, s.y, n);
  for (int i = 0; i < n; ++i) qdd[i] = s.y[i];
  return true;
}

/// qdd = FD(q, qd, tau, fext) and its derivatives: dq = dqdd/dq, dv = dqdd/dqd,
/// Minv = dqdd/dtau (n x n row-major, velocity-indexed); ee / J (nullable): the EE
/// world position (3) and its position Jacobian (3 x n row-major, world axes).
template <typename S>
GATO_HD bool forward_dynamics_derivatives(const DevModel<S>& m, FdScratch<S>& s, const S* q, const S* qd,
                                          const S* tau, const S* fext, S* qdd, S* dq, S* dv, S* Minv, S* ee,
                                          S* J) {
  typedef Dual<S, 2 * kMaxBodies> D;
  const int n = m.n;
  S e3[3];
  if (!forward_dynamics(m, s, q, qd, tau, fext, qdd, e3)) return false;
  if (ee) {
    for (int r = 0; r < 3; ++r) ee[r] = e3[r];
  }
  if (J) ee_jacobian(m, s.w, e3, J);
  dense::chol_inverse(s.L, Minv, s.y, n);
  // dID/dq, dID/dqd at (q, qd, qdd): one dual pass, direction j = q_j, n + j = qd_j.
  D qD[kMaxBodies], vD[kMaxBodies], tD[kMaxBodies];
  WBody<D> wD[kMaxBodies];
  for (int j = 0; j < n; ++j) {
    qD[j] = D(q[j]);
    qD[j].d[j] = S(1);
    vD[j] = D(qd[j]);
    vD[j].d[n + j] = S(1);
  }
  kinematics(m, qD, wD);
  rnea(m, wD, vD, qdd, fext, tD);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      S sq = 0, sv = 0;
      for (int k = 0; k < n; ++k) {
        sq += Minv[i * n + k] * tD[k].d[j];
        sv += Minv[i * n + k] * tD[k].d[n + j];
      }
      dq[i * n + j] = -sq;
      dv[i * n + j] = -sv;
    }
  }
  return true;
}

/// Generalized gravity g(q) = RNEA(q, 0, 0) (n) and, when dg is not null, dg/dq (n x n
/// row-major, dg[i n + j] = dg_i/dq_j) from one dual pass seeded with the directions of q
/// (the gravity-referenced control cost, sqp.hpp).
template <typename S>
GATO_HD void gravity(const DevModel<S>& m, const S* q, S* g, S* dg) {
  const int n = m.n;
  const S zero[kMaxBodies] = {};
  if (!dg) {
    WBody<S> w[kMaxBodies];
    kinematics(m, q, w);
    rnea(m, w, zero, zero, static_cast<const S*>(nullptr), g);
    return;
  }
  typedef Dual<S, kMaxBodies> D;
  D qD[kMaxBodies], tD[kMaxBodies];
  WBody<D> wD[kMaxBodies];
  for (int j = 0; j < n; ++j) {
    qD[j] = D(q[j]);
    qD[j].d[j] = S(1);
  }
  kinematics(m, qD, wD);
  rnea(m, wD, zero, zero, static_cast<const S*>(nullptr), tD);
  for (int i = 0; i < n; ++i) {
    g[i] = tD[i].v;
    for (int j = 0; j < n; ++j) dg[i * n + j] = tD[i].d[j];
  }
}

}  // namespace cuda
}  // namespace gato
