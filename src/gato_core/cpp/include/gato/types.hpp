// Shared enums and settings of the gato solver core.
#pragma once

#include <Eigen/Core>
#include <string>

namespace gato {

enum class LinSys { kPcg = 0, kBdsv = 1, kBdsvFirst = 2 };
enum class Integrator { kEuler = 0, kSemiImplicit = 1, kRk4 = 2 };
/// Line search over alpha = 2^-i: the lowest merit of all 8 (the reference
/// semantics) or the first strict decrease (backtracking, fewer rollouts).
enum class LineSearch { kBest = 0, kFirst = 1 };
/// What the control cost penalises: u itself (the reference) or u - g(q_k), the torque
/// beyond gravity compensation at the knot's configuration (docs/solver_method.md).
enum class URef { kZero = 0, kGravity = 1 };

/// Solver settings (the numeric half of gato.SolverParams; see docs/solver_method.md).
struct Settings {
  int max_sqp_iters = 1;      // SQP iterations per solve (1 = real-time iteration)
  int max_pcg_iters = 200;    // PCG iteration cap per linear solve
  double pcg_tol = 1e-4;      // PCG relative tolerance on r'z
  double solve_ratio = 1.0;   // fraction of the batch whose convergence ends the solve
  double mu = 10.0;           // merit weight of the L1 defect norm
  double rho = 0.01;          // initial trust-region weight on the position block
  bool adapt_rho = true;      // adapt rho from line-search outcomes
  // The CPU default (one exact block-tridiagonal solve is cheaper here than the PCG
  // iterations of a warm step; the reference's "pcg" is GPU-shaped). These defaults are
  // the only ones: gato.SolverParams and the ROS parameter schema read them through
  // gato._core.Settings (test/test_defaults_agree.py).
  LinSys linsys = LinSys::kBdsv;
  Integrator integrator = Integrator::kEuler;
  LineSearch line_search = LineSearch::kBest;
  // Cost weights (scalars; the per-knot table, the per-joint control vector and the
  // posture anchor are runtime setters of BatchSolver: set_knot_weights, set_u_cost_vec,
  // set_q_pos_cost / set_q_nom).
  double q_cost = 2.0, qd_cost = 0.01, u_cost = 2e-6, N_cost = 50.0;
  double q_lim_cost = 0.01, vel_lim_cost = 0.0, ctrl_lim_cost = 0.0;
  // Control cost reference: zero (the reference's 1/2 s u^2) or gravity (1/2 s (u - g(q))^2).
  URef u_ref = URef::kZero;
  // EE orientation weights [1/rad^2], running / terminal (0 = off: the reference's cost).
  double rot_cost = 0.0, N_rot_cost = 0.0;
};

inline constexpr int kLineSearchSteps = 8;   // alpha = 2^-i, i = 0..7
inline constexpr double kLimitMargin = 0.1;  // barrier box = URDF box shrunk by this
inline constexpr double kBarrierEps = 1e-3;  // quadratic extension below this distance
inline constexpr double kRhoMin = 1e-8, kRhoMax = 10.0, kRhoResetAfterCap = 1e-3;
/// Floor of a control weight in the step only (docs/solver_method.md, "Zero weights")
/// [1/(N*m)^2]: a zero or smaller weight is lifted to it in R^-1, never in the cost. Small
/// enough that the step is the weight's Newton step, large enough for the precision's Schur
/// complement (float32 loses the step below about 1e-7).
inline constexpr double kZeroControlProx64 = 1e-8, kZeroControlProx32 = 1e-6;

inline const char* linsys_name(LinSys l) {
  switch (l) {
    case LinSys::kPcg: return "pcg";
    case LinSys::kBdsv: return "bdsv";
    case LinSys::kBdsvFirst: return "bdsv_first";
  }
  return "?";
}

}  // namespace gato
