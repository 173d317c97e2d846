// Signed distance of a point to the obstacles of the COLLISION row group
// (docs/constraints.md, "Collision clearance rows"). Header-only scalar math,
// shared by the solver's row kernels (solver_rows.hpp).
//
// An obstacle is kObstacleStride numbers: [type, p0 .. p9], world frame, metres.
//   sphere  (0): centre c (3), radius R
//   capsule (1): segment ends a (3), b (3), radius R
//   cuboid  (2): centre c (3), half extents h (3), orientation quaternion (w, x, y, z)
//   plane   (3): unit normal n (3), offset o; free side n.p > o (a half-space obstacle)
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace gato {
namespace collision {

inline constexpr int kObstacleStride = 11;
enum ObstacleType : int { kSphere = 0, kCapsule = 1, kCuboid = 2, kPlane = 3 };

// Distance from p to a point c minus R, gradient (p - c)/|p - c| (any unit vector at c).
template <typename S>
inline S ball_distance(const S* p, const S* c, S R, S* grad) {
  const S d[3] = {p[0] - c[0], p[1] - c[1], p[2] - c[2]};
  const S n = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  if (n > S(0)) {
    for (int i = 0; i < 3; ++i) grad[i] = d[i] / n;
  } else {
    grad[0] = grad[1] = S(0);
    grad[2] = S(1);
  }
  return n - R;
}

/// Signed distance of point p to the surface of obstacle o (negative inside) and its
/// gradient d/dp (unit length where the distance is differentiable).
template <typename S>
inline S obstacle_distance(const S* o, const S* p, S* grad) {
  const int type = int(o[0]);
  const S* a = o + 1;
  switch (type) {
    case kSphere:
      return ball_distance(p, a, a[3], grad);
    case kCapsule: {
      const S* b = a + 3;
      const S ab[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
      const S ap[3] = {p[0] - a[0], p[1] - a[1], p[2] - a[2]};
      const S L2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
      S t = L2 > S(0) ? (ap[0] * ab[0] + ap[1] * ab[1] + ap[2] * ab[2]) / L2 : S(0);
      t = std::min(std::max(t, S(0)), S(1));
      const S c[3] = {a[0] + t * ab[0], a[1] + t * ab[1], a[2] + t * ab[2]};
      return ball_distance(p, c, a[6], grad);
    }
    case kCuboid: {
      const S* c = a;
      const S* h = a + 3;
      const S w = a[6], x = a[7], y = a[8], z = a[9];
      // Rotation matrix of the unit quaternion (columns: the box axes in the world).
      const S R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                      2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                      2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)};
      const S d[3] = {p[0] - c[0], p[1] - c[1], p[2] - c[2]};
      S l[3], q[3], gl[3];
      for (int i = 0; i < 3; ++i) {
        l[i] = R[i] * d[0] + R[3 + i] * d[1] + R[6 + i] * d[2];  // R' d: box coordinates
        q[i] = std::abs(l[i]) - h[i];
      }
      S dist;
      const S qm = std::max({q[0], q[1], q[2]});
      if (qm > S(0)) {  // outside: distance to the nearest surface point
        S n2 = 0;
        for (int i = 0; i < 3; ++i) {
          const S e = std::max(q[i], S(0));
          gl[i] = l[i] < 0 ? -e : e;
          n2 += e * e;
        }
        dist = std::sqrt(n2);
        for (int i = 0; i < 3; ++i) gl[i] /= dist;
      } else {  // inside: minus the depth below the nearest face
        int im = 0;
        for (int i = 1; i < 3; ++i)
          if (q[i] > q[im]) im = i;
        gl[0] = gl[1] = gl[2] = S(0);
        gl[im] = l[im] < 0 ? S(-1) : S(1);
        dist = qm;
      }
      for (int i = 0; i < 3; ++i) grad[i] = R[3 * i] * gl[0] + R[3 * i + 1] * gl[1] + R[3 * i + 2] * gl[2];
      return dist;
    }
    case kPlane:
    default: {
      for (int i = 0; i < 3; ++i) grad[i] = a[i];
      return a[0] * p[0] + a[1] * p[1] + a[2] * p[2] - a[3];
    }
  }
}

/// Clearance of a sphere (centre p, radius r) to the nearest of n obstacles:
/// min_o distance(o, p) - r, with the nearest obstacle's gradient. n = 0: +inf-like
/// (a large constant, gradient 0), so a group without obstacles never binds.
template <typename S>
inline S sphere_clearance(const S* obs, int n, const S* p, S r, S* grad) {
  S best = S(1e6);
  grad[0] = grad[1] = grad[2] = S(0);
  S g[3];
  for (int j = 0; j < n; ++j) {
    const S d = obstacle_distance(obs + size_t(j) * kObstacleStride, p, g);
    if (d < best) {
      best = d;
      grad[0] = g[0]; grad[1] = g[1]; grad[2] = g[2];
    }
  }
  return n > 0 ? best - r : best;
}

}  // namespace collision
}  // namespace gato
