// Forward-mode dual numbers: a value and K directional derivatives. The CUDA
// backend's dynamics derivatives (rbd.hpp) run the world-frame RNEA once on
// Dual<S, 2 kMaxBodies> seeded with the unit directions of q and qd: the exact
// dID/dq and dID/dqd (to rounding), no finite differences, the same code as
// the value path.
#pragma once

#include "gato_cuda/hd.hpp"

namespace gato {
namespace cuda {

template <typename S, int K>
struct Dual {
  S v;
  S d[K];
  GATO_HD Dual() : v(0) {
    for (int i = 0; i < K; ++i) d[i] = 0;
  }
  GATO_HD Dual(S x) : v(x) {  // NOLINT: a constant (zero derivative)
    for (int i = 0; i < K; ++i) d[i] = 0;
  }
  GATO_HD Dual& operator+=(const Dual& o) {
    v += o.v;
    for (int i = 0; i < K; ++i) d[i] += o.d[i];
    return *this;
  }
  GATO_HD Dual& operator-=(const Dual& o) {
    v -= o.v;
    for (int i = 0; i < K; ++i) d[i] -= o.d[i];
    return *this;
  }
};

template <typename S, int K>
GATO_HD Dual<S, K> operator+(Dual<S, K> a, const Dual<S, K>& b) { return a += b; }
template <typename S, int K>
GATO_HD Dual<S, K> operator-(Dual<S, K> a, const Dual<S, K>& b) { return a -= b; }
template <typename S, int K>
GATO_HD Dual<S, K> operator-(const Dual<S, K>& a) {
  Dual<S, K> r;
  r.v = -a.v;
  for (int i = 0; i < K; ++i) r.d[i] = -a.d[i];
  return r;
}
template <typename S, int K>
GATO_HD Dual<S, K> operator*(const Dual<S, K>& a, const Dual<S, K>& b) {
  Dual<S, K> r;
  r.v = a.v * b.v;
  for (int i = 0; i < K; ++i) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
  return r;
}
template <typename S, int K>
GATO_HD Dual<S, K> operator*(S a, const Dual<S, K>& b) {
  Dual<S, K> r;
  r.v = a * b.v;
  for (int i = 0; i < K; ++i) r.d[i] = a * b.d[i];
  return r;
}
template <typename S, int K>
GATO_HD Dual<S, K> operator*(const Dual<S, K>& b, S a) { return a * b; }
template <typename S, int K>
GATO_HD Dual<S, K> operator+(const Dual<S, K>& a, S b) {
  Dual<S, K> r = a;
  r.v += b;
  return r;
}
template <typename S, int K>
GATO_HD Dual<S, K> operator+(S b, const Dual<S, K>& a) { return a + b; }
template <typename S, int K>
GATO_HD Dual<S, K> operator-(const Dual<S, K>& a, S b) { return a + (-b); }
template <typename S, int K>
GATO_HD Dual<S, K> operator-(S b, const Dual<S, K>& a) { return (-a) + b; }

template <typename S, int K>
GATO_HD void hd_sincos(const Dual<S, K>& x, Dual<S, K>* s, Dual<S, K>* c) {
  S sv, cv;
  hd_sincos(x.v, &sv, &cv);
  s->v = sv;
  c->v = cv;
  for (int i = 0; i < K; ++i) {
    s->d[i] = cv * x.d[i];
    c->d[i] = -sv * x.d[i];
  }
}

}  // namespace cuda
}  // namespace gato
