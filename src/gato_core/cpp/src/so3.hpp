// SO(3) maps of the orientation cost (docs/solver_method.md, "Orientation cost"): exp, log
// and the inverse right Jacobian of the log map, on rotation vectors (rad). Plain Eigen, no
// pinocchio (the solver's translation units stay light). Included by cost_terms.hpp.
#pragma once

#include <Eigen/Core>
#include <cmath>

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

/// log(R): the rotation vector w (|w| <= pi) with exp(w^) = R. Near pi the axis comes from the
/// symmetric part (the antisymmetric one vanishes there), its sign from the antisymmetric part.
template <typename S>
V3<S> log(const M3<S>& R) {
  const S c = std::min(S(1), std::max(S(-1), (R.trace() - S(1)) / S(2)));
  const V3<S> v(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));  // 2 sin t * axis
  const S t = std::atan2(S(0.5) * v.norm(), c);  // accurate at both ends (acos is not near 0)
  if (t < S(1e-4)) return (S(0.5) + t * t / S(12)) * v;
  if (S(M_PI) - t > S(1e-3)) return (t / (S(2) * std::sin(t))) * v;
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
  return t * n.normalized();
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
  const M3<S> H = hat(e);
  return M3<S>::Identity() + S(0.5) * H + c * H * H;
}

}  // namespace so3
}  // namespace gato
