// Constraint row groups (docs/constraints.md): rows g(z) with interval bounds
// lo <= g <= hi (or a second-order cone), each group run by one of four
// mechanisms. This header holds the host-side description of a group, the
// ADMM configuration and the scalar math the solver kernels share; the
// per-entry state and the kernels live in src/solver_impl.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gato/barrier.hpp"

namespace gato {

/// Row-group kinds (mirrored by gato.rowkinds). Boxes act on one block of a
/// knot: position / velocity (knots 1..N-1) or torque (controls 0..N-2).
enum class RowKind : int {
  kQBox = 0,        // g = q_k                (nv rows)
  kQdBox = 1,       // g = qd_k               (nv rows)
  kUBox = 2,        // g = u_k                (nu rows)
  kEeTerminal = 3,  // g = p(q_{N-1}) - target (3 rows, knot N-1)
  kLinU = 4,        // g = C u_k + d          (m rows; cone: ||[g1, g2]|| <= g0)
  kCollision = 5,   // g_i = clearance of collision sphere i at q_k (one row per sphere; lo = margin)
  kContactPos = 6,  // reserved (CUDA builds)
};

/// Mechanisms (mirrored by gato.rowkinds).
enum class RowMech : int { kTelemetry = 0, kBarrier = 1, kAdmm = 2, kAl = 3 };

/// Linear solver of the ADMM inner loop.
enum class AdmmLinSys : int { kPcg = 0, kBdsvFactor = 1 };

inline constexpr int kMaxRowGroups = 8;      // groups per solver
inline constexpr int kMaxRowsPerGroup = 32;  // rows per group (dense row-state layout; collision spheres)

/// One row group as the host describes it (double precision; the solver keeps
/// an S-typed copy). Knot window [knot_lo, knot_hi): knots for the state
/// blocks, controls for the control block.
struct RowGroupSpec {
  int kind = 0;
  int mech = 0;
  int n_rows = 0;
  int knot_lo = 0, knot_hi = 0;
  std::vector<double> lo, hi;        // n_rows each; +-inf for a one-sided row
  std::vector<unsigned char> mask;   // N * n_rows, 1 = live; empty = all live
  double weight = 0;                 // barrier mu | ADMM rho | AL rho
  double delta = 0.05;               // barrier: quadratic extension below this distance
  double sigma = 0;                  // > 0: elastic rows (AL multiplier cap, ADMM smoothed projection)
  bool cone = false;                 // LIN_U with 3 rows: ||[g1, g2]|| <= g0
  int admm_iters = 0;                // raises the inner-iteration cap when larger than AdmmConfig::iters
  std::vector<double> C, d;          // LIN_U: (n_rows x nu) row-major, (n_rows)
  std::vector<double> target;        // EE terminal: (B x 3)
  // COLLISION rows use the solver's collision model (BatchSolver::set_collision); n_rows = its spheres.
  // One-shot state actions applied by set_row_groups.
  bool reset_state = false;          // zero this group's AL duals and ADMM (z, y); re-init next solve
  bool admm_reinit = false;          // ADMM (z, y) re-initialized at the next solve
  bool admm_reclip = false;          // ADMM z clipped into the bounds at the next solve
};

/// ADMM inner-loop settings shared by every ADMM group.
struct AdmmConfig {
  int iters = 10;             // inner iterations per SQP iteration (the cap with a tolerance)
  double eps_abs = 0, eps_rel = 0;  // residual early exit (0, 0 = fixed budget)
  int check_every = 1;        // host-check period of the CUDA launch loop (no effect on the CPU)
  AdmmLinSys linsys = AdmmLinSys::kBdsvFactor;
  bool merit = false;         // add y'(g - z) + rho/2 |g - z|^2 to the line-search merit
  bool rho_adapt = false;     // OSQP-style per-entry rho scale
};

namespace rows {

using gato::relaxed_log;  // gato/barrier.hpp

/// Projection of v = (s, x1, x2) onto the second-order cone ||x|| <= s.
template <typename S>
inline void soc_project(const S* v, S* out) {
  const S s = v[0], nx = std::sqrt(v[1] * v[1] + v[2] * v[2]);
  if (nx <= s) {
    out[0] = v[0]; out[1] = v[1]; out[2] = v[2];
  } else if (nx <= -s) {
    out[0] = out[1] = out[2] = S(0);
  } else {
    const S a = S(0.5) * (s + nx);
    out[0] = a;
    out[1] = a * v[1] / nx;
    out[2] = a * v[2] / nx;
  }
}

/// H = I - D Pi_K(v) (3x3, row-major): the Hessian of 1/2 dist_K(v)^2.
template <typename S>
inline void soc_dist_hessian(const S* v, S* H) {
  const S s = v[0], nx = std::sqrt(v[1] * v[1] + v[2] * v[2]);
  for (int i = 0; i < 9; ++i) H[i] = S(0);
  if (nx <= s) return;                                   // inside: dist = 0
  if (nx <= -s) { H[0] = H[4] = H[8] = S(1); return; }   // polar cone: Pi = 0
  const S w1 = v[1] / nx, w2 = v[2] / nx, r = s / nx;
  // D Pi = 1/2 [[1, w'], [w, (1 + r) I - r w w']]
  const S P[9] = {S(0.5), S(0.5) * w1, S(0.5) * w2,
                  S(0.5) * w1, S(0.5) * ((1 + r) - r * w1 * w1), -S(0.5) * r * w1 * w2,
                  S(0.5) * w2, -S(0.5) * r * w1 * w2, S(0.5) * ((1 + r) - r * w2 * w2)};
  for (int i = 0; i < 9; ++i) H[i] = -P[i];
  H[0] += 1; H[4] += 1; H[8] += 1;
}

/// argmin_z sigma*dist(z, K) + rho/2 |z - v|^2 for one interval row (K = [lo, hi]);
/// sigma = 0 is the plain projection (clip).
template <typename S>
inline S soft_clip(S v, S lo, S hi, S sigma_over_rho) {
  const S p = std::min(std::max(v, lo), hi);
  if (!(sigma_over_rho > 0)) return p;
  const S t = v - p;
  const S a = std::abs(t);
  return a <= sigma_over_rho ? p : v - sigma_over_rho * (t / a);
}

/// The same for the second-order cone (3 rows in place of v -> out).
template <typename S>
inline void soft_soc(const S* v, S sigma_over_rho, S* out) {
  soc_project(v, out);
  if (!(sigma_over_rho > 0)) return;
  const S t0 = v[0] - out[0], t1 = v[1] - out[1], t2 = v[2] - out[2];
  const S n = std::sqrt(t0 * t0 + t1 * t1 + t2 * t2);
  if (n <= sigma_over_rho) return;
  const S f = sigma_over_rho / n;
  out[0] = v[0] - f * t0; out[1] = v[1] - f * t1; out[2] = v[2] - f * t2;
}

/// PHR term of one scalar constraint value s (s <= 0 wanted; s == 0 for an
/// equality) with multiplier lam restricted to [a, b]:
///   psi(s) = max_{l in [a, b]} l s - (l - lam)^2 / (2 rho)
/// returns psi, writes psi'(s) = clip(lam + rho s, a, b) and psi''(s) (rho or 0).
template <typename S>
inline S phr(S s, S lam, S rho, S a, S b, S* dpsi, S* ddpsi) {
  const S t = lam + rho * s;
  const S l = std::min(std::max(t, a), b);
  *dpsi = l;
  *ddpsi = (t > a && t < b) ? rho : S(0);
  const S dl = l - lam;
  return l * s - dl * dl / (S(2) * rho);
}

}  // namespace rows
}  // namespace gato
