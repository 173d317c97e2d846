// SO(3) maps of the EE orientation cost on the CUDA backend, host and device (GATO_HD), on
// row-major 3 x 3 arrays and rotation vectors [rad]: exp, log and the inverse right Jacobian of
// the log map. The same formulas, branches and thresholds as the CPU backend's
// src/gato_core/cpp/src/so3.hpp (docs/solver_method.md, "Orientation cost"), so the two
// backends agree to rounding.
#pragma once

#include "gato_cuda/hd.hpp"

namespace gato {
namespace cuda {
namespace so3 {

/// H = w^ (row-major).
template <typename S>
GATO_HD void hat(const S* w, S* H) {
  H[0] = S(0);
  H[1] = -w[2];
  H[2] = w[1];
  H[3] = w[2];
  H[4] = S(0);
  H[5] = -w[0];
  H[6] = -w[1];
  H[7] = w[0];
  H[8] = S(0);
}

/// C = A B (3 x 3 row-major).
template <typename S>
GATO_HD void mul(const S* A, const S* B, S* C) {
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) C[3 * r + c] = A[3 * r] * B[c] + A[3 * r + 1] * B[3 + c] + A[3 * r + 2] * B[6 + c];
}

/// R = I + a H + b H H with H = w^.
template <typename S>
GATO_HD void i_plus(const S* w, S a, S b, S* R) {
  S H[9], HH[9];
  hat(w, H);
  mul(H, H, HH);
  for (int k = 0; k < 9; ++k) R[k] = a * H[k] + b * HH[k];
  R[0] += S(1);
  R[4] += S(1);
  R[8] += S(1);
}

/// R = exp(w^): the rotation of angle |w| about w / |w| (Rodrigues; series below 1e-6 rad).
template <typename S>
GATO_HD void exp(const S* w, S* R) {
  const S t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2], t = hd_sqrt(t2);
  S a, b;  // sin t / t, (1 - cos t) / t^2
  if (t < S(1e-6)) {
    a = S(1) - t2 / S(6);
    b = S(0.5) - t2 / S(24);
  } else {
    S s, c;
    hd_sincos(t, &s, &c);
    a = s / t;
    b = (S(1) - c) / t2;
  }
  i_plus(w, a, b, R);
}

/// w = log(R) (|w| <= pi) with exp(w^) = R. Near pi the axis comes from the symmetric part
/// (the antisymmetric one vanishes there), its sign from the antisymmetric part.
template <typename S>
GATO_HD void log(const S* R, S* w) {
  const S pi = S(3.14159265358979323846);
  const S c = hd_min(S(1), hd_max(S(-1), (R[0] + R[4] + R[8] - S(1)) / S(2)));
  const S v[3] = {R[7] - R[5], R[2] - R[6], R[3] - R[1]};  // 2 sin t * axis
  const S nv = hd_sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  const S t = hd_atan2(S(0.5) * nv, c);  // accurate at both ends (acos is not near 0)
  if (t < S(1e-4)) {
    const S f = S(0.5) + t * t / S(12);
    for (int i = 0; i < 3; ++i) w[i] = f * v[i];
    return;
  }
  if (pi - t > S(1e-3)) {
    const S f = t / (S(2) * hd_sin(t));
    for (int i = 0; i < 3; ++i) w[i] = f * v[i];
    return;
  }
  // |pi - t| small: R = c I + (1 - c) n n' + sin(t) n^ gives n_k^2 = (R_kk - c) / (1 - c) on
  // the diagonal and n_i n_k = (R_ik + R_ki) / (2 (1 - c)); k = the first largest diagonal entry.
  int k = 0;
  if (R[4] > R[0]) k = 1;
  if (R[8] > R[4 * k]) k = 2;
  const S omc = S(1) - c;
  S n[3];
  n[k] = hd_sqrt(hd_max(S(0), (R[4 * k] - c) / omc));
  if (v[k] < S(0)) n[k] = -n[k];
  for (int i = 0; i < 3; ++i)
    if (i != k) n[i] = (R[3 * i + k] + R[3 * k + i]) / (S(2) * omc * n[k]);
  const S nn = hd_sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  for (int i = 0; i < 3; ++i) w[i] = t * (n[i] / nn);
}

/// J = Jr^-1(e): the inverse right Jacobian of SO(3) at e, d log(R exp(d^)) / d d at d = 0
/// (= I + e^/2 + (1/t^2 - cot(t/2) / (2 t)) e^ e^, t = |e|; finite up to t = pi).
template <typename S>
GATO_HD void jr_inv(const S* e, S* J) {
  const S t2 = e[0] * e[0] + e[1] * e[1] + e[2] * e[2], t = hd_sqrt(t2);
  S c;
  if (t < S(1e-4)) {
    c = S(1) / S(12) + t2 / S(720);
  } else {
    S s, co;
    hd_sincos(t / S(2), &s, &co);
    c = S(1) / t2 - co / (S(2) * t * s);
  }
  i_plus(e, S(0.5), c, J);
}

}  // namespace so3
}  // namespace cuda
}  // namespace gato
