// SO(3) maps of the orientation cost (docs/solver_method.md, "Orientation cost"): exp, log
// and the inverse right Jacobian of the log map, on rotation vectors (rad). Plain Eigen, no
// pinocchio (the solver's translation units stay light). Included by cost_terms.hpp.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <type_traits>

namespace gato {
namespace so3 {

template <typename S>
using V3 = Eigen::Matrix<S, 3, 1>;
template <typename S>
using M3 = Eigen::Matrix<S, 3, 3>;

template <typename S>
M3<S> hat(const V3<S>& w) {
  M3<S> H;
  H << S(0), -w[2], w[1], w[2], S(0), -w[0], -w[1], w[0], S(0);
  return H;
}

/// exp(w^): the rotation of angle |w| about w / |w| (Rodrigues; series below 1e-6 rad).
template <typename S>
M3<S> exp(const V3<S>& w) {
  const S t2 = w.squaredNorm(), t = std::sqrt(t2);
  S a, b;  // sin t / t, (1 - cos t) / t^2
  if (t < S(1e-6)) {
    a = S(1) - t2 / S(6);
    b = S(0.5) - t2 / S(24);
  } else {
    a = std::sin(t) / t;
    b = (S(1) - std::cos(t)) / t2;
  }
  const M3<S> H = hat(w);
  return M3<S>::Identity() + a * H + b * H * H;
}

/// The pieces of log(R) before its one transcendental: c = cos t (the trace, clamped),
/// v = 2 sin t * axis (the antisymmetric part) and s = |v| / 2 = sin t (t = atan2(s, c)).
template <typename S>
struct LogParts {
  V3<S> v;
  S c, s;
};
template <typename S>
LogParts<S> log_parts(const M3<S>& R) {
  LogParts<S> p;
  p.c = std::min(S(1), std::max(S(-1), (R.trace() - S(1)) / S(2)));
  p.v = V3<S>(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));
  p.s = S(0.5) * p.v.norm();
  return p;
}

/// log(R) from its parts and the angle t = atan2(p.s, p.c) (atan2 is accurate at both ends,
/// acos is not near 0). No further transcendental off the near-pi branch: sin t = s / r and
/// cos t = c / r with r = hypot(s, c) (1 for an exact rotation). jc (optional): the
/// coefficient of e^ e^ in jr_inv(e), 1/t^2 - cot(t/2) / (2 t), from the same pieces
/// (cot(t/2) = (1 + cos t) / sin t = (r + c) / s = s / (r - c)). More accurate than the
/// libm forms near pi, where sin(t) of a rounded t loses digits (test/test_so3_lanes.py).
template <typename S>
V3<S> log_finish(const M3<S>& R, const LogParts<S>& p, S t, S* jc = nullptr) {
  const S c = p.c;
  const V3<S>& v = p.v;
  if (t < S(1e-4)) {
    const V3<S> e = (S(0.5) + t * t / S(12)) * v;
    if (jc) *jc = S(1) / S(12) + e.squaredNorm() / S(720);
    return e;
  }
  if (S(M_PI) - t > S(1e-3)) {
    const S r = std::sqrt(p.s * p.s + c * c), two_s = S(2) * p.s;
    if (jc) {  // cot(t/2) = (r + c) / s = s / (r - c): the form without cancellation
      const S cot_half = c >= S(0) ? (r + c) / p.s : p.s / (r - c);
      *jc = S(1) / (t * t) - cot_half / (S(2) * t);
    }
    return (t * r / two_s) * v;  // t / (2 sin t) v
  }
  // |pi - t| small: v ~ 0 carries no axis; R = c I + (1 - c) n n' + sin(t) n^ gives
  // n_k^2 = (R_kk - c) / (1 - c) on the diagonal and n_i n_k = (R_ik + R_ki) / (2 (1 - c)).
  int k = 0;
  R.diagonal().maxCoeff(&k);
  const S omc = S(1) - c;
  V3<S> n;
  n[k] = std::sqrt(std::max(S(0), (R(k, k) - c) / omc));
  if (v[k] < S(0)) n[k] = -n[k];
  for (int i = 0; i < 3; ++i)
    if (i != k) n[i] = (R(i, k) + R(k, i)) / (S(2) * omc * n[k]);
  const V3<S> e = t * n.normalized();
  if (jc) {
    const S te = e.norm();  // s and 1 + c both vanish at pi: the half-angle form here
    *jc = S(1) / (te * te) - std::cos(te / S(2)) / (S(2) * te * std::sin(te / S(2)));
  }
  return e;
}

/// log(R): the rotation vector w (|w| <= pi) with exp(w^) = R. Near pi the axis comes from the
/// symmetric part (the antisymmetric one vanishes there), its sign from the antisymmetric part.
/// jc: as in log_finish.
template <typename S>
V3<S> log(const M3<S>& R, S* jc = nullptr) {
  const LogParts<S> p = log_parts(R);
  return log_finish(R, p, S(std::atan2(p.s, p.c)), jc);
}

/// Cephes atan2 for y >= 0 (finite inputs; libm's value on the signed zeros too), branch-free: a = min / max
/// of (y, |x|) in [0, 1], atan(a) by Cephes' rational function on a or (a - 1) / (a + 1)
/// (+ pi/4), then pi/2 - . where y > |x| and pi - . where x < 0.
inline double atan2_pos(double y, double x) {
  const double ax = std::abs(x);
  const bool swap = y > ax;
  const double num = swap ? ax : y, den = swap ? y : ax;
  // Both sides of every select are computed (no branch, no masked division): vector code.
  const double a = num / (den > 0 ? den : 1.0);
  const bool big = a > 0.66;
  const double zb = (a - 1.0) / (a + 1.0);
  const double z = big ? zb : a;
  const double zz = z * z;
  const double P = (((-8.750608600031904122785E-1 * zz - 1.615753718733365076637E1) * zz -
                     7.500855792314704667340E1) * zz - 1.228866684490136173410E2) * zz -
                   6.485021904942025371773E1;
  const double Q = ((((zz + 2.485846490142306297962E1) * zz + 1.650270098316988542046E2) * zz +
                     4.328810604912902668951E2) * zz + 4.853903996359136964868E2) * zz +
                   1.945506571482613964425E2;
  constexpr double kMoreBits = 6.123233995736765886130E-17;  // pi/2 - double(pi/2)
  double r = z + z * (zz * P / Q);
  r = big ? (7.85398163397448309616E-1 + (r + 0.5 * kMoreBits)) : r;
  r = swap ? (1.57079632679489661923 - r) + kMoreBits : r;
  r = std::signbit(x) ? (3.14159265358979323846 - r) + 2.0 * kMoreBits : r;  // -0 too (libm)
  return r;
}

/// atan2(y[l], x[l]) for l < W with y >= 0 (the log map's angle, in [0, pi]), written
/// branch-free so that the compiler evaluates the lanes in vector registers (double: Cephes'
/// atan, its reduction to |z| <= tan(pi/8)-ish and rational approximation; within an ulp or
/// two of libm, test/test_lean_dynamics.py). float lanes call libm.
template <typename S>
void atan2_lanes(const S* y, const S* x, S* out, int W) {
  if constexpr (!std::is_same<S, double>::value) {
    for (int l = 0; l < W; ++l) out[l] = std::atan2(y[l], x[l]);
  } else {
    for (int l = 0; l < W; ++l) out[l] = atan2_pos(y[l], x[l]);
  }
}

/// Jr^-1(e) = I + e^/2 + c e^ e^ with the coefficient c given (log(R, &c) returns it).
template <typename S>
M3<S> jr_inv(const V3<S>& e, S c) {
  const M3<S> H = hat(e);
  return M3<S>::Identity() + S(0.5) * H + c * H * H;
}

/// Jr^-1(e): the inverse right Jacobian of SO(3) at e, d log(R exp(d^)) / d d at d = 0
/// (= I + e^/2 + (1/t^2 - cot(t/2) / (2 t)) e^ e^, t = |e|; finite up to t = pi).
template <typename S>
M3<S> jr_inv(const V3<S>& e) {
  const S t2 = e.squaredNorm(), t = std::sqrt(t2);
  S c;
  if (t < S(1e-4)) {
    c = S(1) / S(12) + t2 / S(720);
  } else {
    c = S(1) / t2 - std::cos(t / S(2)) / (S(2) * t * std::sin(t / S(2)));
  }
  return jr_inv(e, c);
}

}  // namespace so3
}  // namespace gato
