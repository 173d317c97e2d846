// The batched SQP solver (docs/solver_method.md): B independent problems on one
// robot and horizon, each with its own state, reference, warm start, rho,
// duals, external wrench and statistics. Everything a solve touches is
// allocated at construction (Entry); solve() allocates nothing.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <memory>
#include <vector>

#include "gato/integrator.hpp"
#include "gato/plant.hpp"
#include "gato/rowgroups.hpp"
#include "gato/thread_pool.hpp"
#include "gato/types.hpp"

namespace gato {

/// Per-solve statistics, one row per batch entry; per-iteration arrays have
/// max_sqp_iters columns of which the first iters_run are valid.
struct SolveStats {
  long solve_time_us = 0;
  int iters_run = 0;             // SQP iterations run by the batch loop
  bool budget_hit = false;
  std::vector<int> sqp_iters;    // (B)
  std::vector<char> converged;   // (B)
  std::vector<double> initial_merit, final_merit;      // (B)
  std::vector<int> pcg_iters;                          // (B, max_sqp_iters)
  std::vector<double> min_merit, step_size;            // (B, max_sqp_iters)
  std::vector<char> exact_step;                        // (B, max_sqp_iters) eh: the exact Hessian's step was taken
  std::vector<double> linsys_time_us;                  // (max_sqp_iters) slowest entry
  std::vector<char> linsys_used;                       // (max_sqp_iters) LinSys of entry 0
  // Per-stage wall time summed over the batch entries, microseconds.
  double t_kkt_us = 0, t_schur_us = 0, t_linsys_us = 0, t_linesearch_us = 0;
  // Row groups (filled only while groups are installed; G = n_groups).
  int n_groups = 0;
  std::vector<double> row_max_violation, row_sum_violation;  // (B, G) of the returned plan
  std::vector<double> admm_r_prim, admm_r_dual;              // (B) last inner iteration, max over groups
  std::vector<int> admm_iters, admm_linsys_iters;            // (B) summed over the solve
};

template <typename S>
class BatchSolver {
 public:
  using Vec = VecX<S>;
  using Mat = MatX<S>;

  /// A solver for this plant: fixed-size kernels for 6- and 7-DoF arms,
  /// dynamic-size ones otherwise. Throws std::invalid_argument on bad sizes.
  static std::unique_ptr<BatchSolver> create(std::shared_ptr<const Plant<S>> plant, int batch,
                                             int N, S dt, const Settings& settings,
                                             int num_threads);
  virtual ~BatchSolver() = default;

  virtual int nv() const = 0;
  int nq() const { return nv(); }
  int nx() const { return 2 * nv(); }
  int nu() const { return nv(); }
  virtual int N() const = 0;
  virtual int batch() const = 0;
  virtual int xu_size() const = 0;
  virtual S dt() const = 0;
  virtual int num_threads() const = 0;
  virtual const Settings& settings() const = 0;
  virtual const SolveStats& stats() const = 0;

  /// Replace the settings (per-entry rho/mu/pcg_tol overrides are kept).
  virtual void set_settings(const Settings& s) = 0;
  virtual void set_linsys(LinSys l) = 0;
  /// Per-entry overrides (B); empty restores the Settings value.
  virtual void set_rho_batch(const std::vector<double>& v) = 0;
  virtual void set_mu_batch(const std::vector<double>& v) = 0;
  virtual void set_pcg_tol_batch(const std::vector<double>& v) = 0;
  virtual void set_drho_batch(const std::vector<double>& v, bool as_reset_default) = 0;
  /// (N, 3) [ee, qd, u] weights; empty clears the table.
  virtual void set_knot_weights(const std::vector<double>& w) = 0;
  /// (nu) control weights; empty clears (back to the scalar / table weight).
  virtual void set_u_cost_vec(const std::vector<double>& w) = 0;
  /// Posture anchor weight (nq) and target (nq).
  virtual void set_q_pos_cost(const std::vector<double>& w) = 0;
  virtual void set_q_nom(const std::vector<double>& q) = 0;
  /// Orientation term: per-axis factors c (3, tool frame; default 1) and per-knot weights
  /// (N, replacing rot_cost / N_rot_cost; empty = the scalars). docs/solver_method.md.
  virtual void set_rot_axis_weights(const std::vector<double>& w) = 0;
  virtual void set_rot_knot_weights(const std::vector<double>& w) = 0;
  /// (B, N, 6*nbodies) joint-local external wrenches; empty clears.
  virtual void set_fext(const std::vector<S>& f) = 0;
  virtual bool has_fext() const = 0;
  /// Collect the per-stage timers (two clock reads per stage and entry).
  virtual void set_collect_stats(bool on) = 0;

  virtual void reset_rho() = 0;
  virtual void reset_dual() = 0;
  virtual double rho(int b) const = 0;

  /// Solve from x_s (B, nx) toward ref (B, 6N); xu (B, L) holds the warm
  /// start on entry and the solution on return. budget_s <= 0: no budget.
  virtual void solve(const S* x_s, const S* ref, S* xu, double budget_s) = 0;

  /// KKT blocks at xu (no knot-0 replacement, no rho): Q (B,N,nx,nx), R (B,N-1,nu,nu),
  /// q (B,N,nx), r (B,N-1,nu), A (B,N-1,nx,nx), Bm (B,N-1,nx,nu), c (B,N,nx), row-major;
  /// Suq (nullable; B,N-1,nu,nx): the cost's cross blocks d2l/du dx (u_ref = gravity; else 0).
  virtual void debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R, S* q,
                               S* r, S* A, S* Bm, S* c, S* Suq = nullptr) = 0;
  /// Exact-Hessian SQP (the 'eh' variant, docs/solver_method.md, "Exact Hessian"): the stage
  /// Hessians gain the second-order terms of the Lagrangian (sum_k lambda_{k+1}' d2f/dz2 of the
  /// dynamics and the EE residual's w r' d2p/dq2), made positive definite per stage before the
  /// Schur solve. Off (the default) is the Gauss-Newton method, unchanged.
  virtual void set_exact_hessian(bool on) = 0;
  virtual bool exact_hessian() const = 0;
  /// The exact Lagrangian stage Hessians at xu with multipliers lam (B, N, nx) (the solver's
  /// sign: L = cost - sum_k lam_k' c_k), before the positive-definite modification and without
  /// rho: H (B, N, nz, nz), nz = nx + nu, z_k = (x_k, u_k), row-major; the last knot fills only
  /// its nx x nx block. Between solves; overwrites the entries' KKT blocks.
  virtual void debug_stage_hessian(const S* xu, const S* x_s, const S* ref, const S* lam, S* H) = 0;
  /// The EE world rotation R (M, 3, 3; world <- EE, row-major) and world angular Jacobian
  /// Jw (M, 3, nv) [rad/s per joint velocity] at the M positions q (M, nv) [rad, m], through
  /// the multi-lane lean kernels of the line search and KKT stage (the orientation term's
  /// kinematics). False (nothing written) when the plant has no lean model.
  virtual bool debug_ee_pose(int M, const S* q, S* R, S* Jw) = 0;
  /// The time-varying feedback gains of entry b's plan xu (L) from x_s (nx) toward ref (6N)
  /// (docs/solver_method.md, "Feedback gains"): the finite-horizon LQR of the Gauss-Newton
  /// model the step assembles at xu (no trust region rho; the zero-weight floor kept), into
  /// K (N-1, nu, nx) row-major, u = u_k + K_k (x - x_k) [N*m/rad on q, N*m*s/rad on qd].
  /// Returns -1, or the knot k whose R_k + B_k' P B_k is not positive definite (K then
  /// holds only the knots after it). Between solves; overwrites entry b's KKT blocks (the
  /// next solve reassembles them); fixed-size kernels (6-, 7-DoF) allocate nothing.
  virtual int feedback_gains(int b, const S* xu, const S* x_s, const S* ref, S* K) = 0;
  /// Merit of xu for every entry (B).
  virtual void merit(const S* xu, const S* x_s, const S* ref, S* out) = 0;
  /// lambda (B, N, nx).
  virtual void get_lambda(S* out) const = 0;
  /// One plant step per entry with the knot-0 wrench: x (B,nx), u (B,nu) -> (B,nx).
  virtual void sim_forward(const S* x, const S* u, S h, S* out) = 0;

  /// Replace the installed row groups (at most kMaxRowGroups; docs/constraints.md).
  /// Throws std::invalid_argument on inconsistent sizes.
  virtual void set_row_groups(const std::vector<RowGroupSpec>& groups) = 0;
  virtual void set_admm_config(const AdmmConfig& c) = 0;
  virtual const AdmmConfig& admm_config() const = 0;
  /// Dense row state (B, kMaxRowGroups, N, kMaxRowsPerGroup): which = 0 lam_hi,
  /// 1 lam_lo (AL duals), 2 z, 3 y (ADMM auxiliary and dual).
  virtual void get_row_state(int which, S* out) const = 0;
  /// (B) adapted ADMM rho scale.
  virtual void get_admm_rho_scale(double* out) const = 0;

  /// Collision model of the COLLISION row group (docs/constraints.md): n spheres fixed in
  /// frames (frame ids (n), centres in frame coordinates (n x 3) [m], radii (n) [m]) and
  /// the world obstacle table (11 numbers per obstacle: type, 10 parameters; the layout
  /// of src/collision.hpp). Throws std::invalid_argument on bad sizes, ids or values.
  virtual void set_collision(const std::vector<int>& frames, const std::vector<double>& centres,
                             const std::vector<double>& radii, const std::vector<double>& obstacles) = 0;
  /// Number of collision spheres of the installed model (0 without one).
  virtual int n_spheres() const = 0;
  /// Clearances d (n_spheres) of the spheres at configuration q (nq) [m] and their
  /// Jacobian J (n_spheres x nv, row-major; nullable). Host-side, between solves.
  virtual void collision_clearance(const S* q, S* d, S* J) = 0;

  /// The state one solve hands to the next (what exact replay from any tick needs),
  /// per entry state_size() doubles: the Schur duals lambda (N*nx, knot-major), the
  /// trust-region rho, its adaptation factor, the ADMM rho scale, then per installed
  /// row group its re-initialization flags need_init, need_clip (0/1) and lam_hi,
  /// lam_lo (AL duals), z, y (ADMM), N*n_rows each, knot-major.
  virtual int state_size() const = 0;
  /// (B, state_size()).
  virtual void get_state(double* out) const = 0;
  /// Install a get_state() of this solver with the same row groups installed.
  /// Throws std::invalid_argument on a non-finite value, rho <= 0 or a flag not 0/1.
  virtual void set_state(const double* in) = 0;
};

}  // namespace gato
