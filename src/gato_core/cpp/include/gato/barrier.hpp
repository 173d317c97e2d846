// Log barrier with a C2 quadratic extension (docs/solver_method.md, "Barrier").
#pragma once

#include <cmath>

#include "gato/types.hpp"

namespace gato {

/// Relaxed log barrier: b(d) = -log d for d >= delta, its second-order Taylor
/// extension below (C2, convex, finite everywhere). Writes b'(d) and b''(d).
/// Shared by the cost's limit barriers and the barrier row-group mechanism.
template <typename S>
inline S relaxed_log(S d, S delta, S* db, S* ddb) {
  if (d >= delta) {
    const S inv = S(1) / d;
    *db = -inv;
    *ddb = inv * inv;
    return -std::log(d);
  }
  const S e = d - delta, inv = S(1) / delta;
  *db = -inv + e * inv * inv;
  *ddb = inv * inv;
  return -std::log(delta) - e * inv + S(0.5) * e * e * inv * inv;
}

/// The cost barrier's b(d): relaxed_log with delta = kBarrierEps.
template <typename S>
inline S barrier_1d(S d, S* db, S* ddb) {
  return relaxed_log(d, S(kBarrierEps), db, ddb);
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
