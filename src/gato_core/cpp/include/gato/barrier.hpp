// Log barrier with a C2 quadratic extension (docs/solver_method.md, "Barrier").
#pragma once

#include <cmath>

#include "gato/types.hpp"

namespace gato {

/// b(d) = -log d for d >= eps, its second-order Taylor extension below:
/// finite, convex and C2 everywhere. Writes b'(d) and b''(d).
template <typename S>
inline S barrier_1d(S d, S* db, S* ddb) {
  const S eps = S(kBarrierEps);
  if (d >= eps) {
    const S inv = S(1) / d;
    *db = -inv;
    *ddb = inv * inv;
    return -std::log(d);
  }
  const S e = d - eps, inv = S(1) / eps;
  *db = -inv + e * inv * inv;
  *ddb = inv * inv;
  return -std::log(eps) - e * inv + S(0.5) * e * e * inv * inv;
}

/// beta(x) on the box [lo, hi] (already shrunk by the margin): value, and adds
/// weight*grad into g and weight*hess-diagonal into h (either may be null).
template <typename S>
inline S box_barrier(S x, S lo, S hi, S weight, S* g, S* h) {
  S d1, dd1, d2, dd2;
  const S v = barrier_1d(x - lo, &d1, &dd1) + barrier_1d(hi - x, &d2, &dd2);
  if (g) *g += weight * (d1 - d2);
  if (h) *h += weight * (dd1 + dd2);
  return weight * v;
}

}  // namespace gato
