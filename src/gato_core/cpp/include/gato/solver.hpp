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
  std::vector<double> linsys_time_us;                  // (max_sqp_iters) slowest entry
  std::vector<char> linsys_used;                       // (max_sqp_iters) LinSys of entry 0
  // Per-stage wall time summed over the batch entries, microseconds.
  double t_kkt_us = 0, t_schur_us = 0, t_linsys_us = 0, t_linesearch_us = 0;
};

template <typename S>
class BatchSolver {
 public:
  using Vec = VecX<S>;
  using Mat = MatX<S>;

  BatchSolver(std::shared_ptr<const Plant<S>> plant, int batch, int N, S dt,
              const Settings& settings, int num_threads);
  ~BatchSolver();

  int nq() const { return nv_; }
  int nv() const { return nv_; }
  int nx() const { return nx_; }
  int nu() const { return nu_; }
  int N() const { return N_; }
  int batch() const { return B_; }
  int xu_size() const { return L_; }
  S dt() const { return dt_; }
  int num_threads() const { return pool_.size(); }
  const Plant<S>& plant() const { return *plant_; }
  const Settings& settings() const { return set_; }
  const SolveStats& stats() const { return stats_; }

  /// Replace the settings (rho/mu/pcg_tol per entry keep their per-batch overrides).
  void set_settings(const Settings& s);
  void set_linsys(LinSys l) { set_.linsys = l; }
  /// Per-entry overrides (B); empty restores the Settings value.
  void set_rho_batch(const std::vector<double>& v);
  void set_mu_batch(const std::vector<double>& v);
  void set_pcg_tol_batch(const std::vector<double>& v);
  void set_drho_batch(const std::vector<double>& v, bool as_reset_default);
  /// (N, 3) [ee, qd, u] weights; empty clears the table.
  void set_knot_weights(const std::vector<double>& w);
  /// (nu) control weights; empty clears (back to the scalar / table weight).
  void set_u_cost_vec(const std::vector<double>& w);
  /// Posture anchor weight (nq) and target (nq).
  void set_q_pos_cost(const std::vector<double>& w);
  void set_q_nom(const std::vector<double>& q);
  /// (B, N, 6*nbodies) joint-local external wrenches; empty clears.
  void set_fext(const std::vector<S>& f);
  bool has_fext() const { return has_fext_; }

  void reset_rho();
  void reset_dual();
  double rho(int b) const;

  /// Solve from x_s (B, nx) toward ref (B, 6N); xu (B, L) holds the warm
  /// start on entry and the solution on return. budget_s <= 0: no budget.
  void solve(const S* x_s, const S* ref, S* xu, double budget_s);

  /// KKT blocks at xu (no knot-0 replacement, no rho): Q (B,N,nx,nx), R (B,N-1,nu,nu),
  /// q (B,N,nx), r (B,N-1,nu), A (B,N-1,nx,nx), Bm (B,N-1,nx,nu), c (B,N,nx), row-major.
  void debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R, S* q, S* r,
                       S* A, S* Bm, S* c);
  /// Merit of xu for every entry (B).
  void merit(const S* xu, const S* x_s, const S* ref, S* out);
  /// lambda (B, N, nx).
  void get_lambda(S* out) const;
  /// One plant step per entry with the knot-0 wrench: x (B,nx), u (B,nu) -> (B,nx).
  void sim_forward(const S* x, const S* u, S h, S* out);

 private:
  struct Entry;
  void iterate(Entry& e, int it);
  S setup_kkt(Entry& e);  // returns the merit at e.xu
  bool factor_schur(Entry& e);
  void matvec(const Entry& e, const Vec& p, Vec& out) const;
  void precondition(const Entry& e, const Vec& r, Vec& out) const;
  int solve_pcg(Entry& e, S tol);
  bool solve_bdsv(Entry& e);
  void recover_step(Entry& e);
  S trial_merit(Entry& e, S alpha);
  S stage_cost_value(Entry& e, int k, const S* x, const S* u) const;
  S ee_weight(int k) const;
  S qd_weight(int k) const;
  S u_weight(int k, int j) const;
  const S* fext_ptr(int b, int k) const;

  std::shared_ptr<const Plant<S>> plant_;
  int B_, N_, nv_, nx_, nu_, L_;
  S dt_;
  Settings set_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<Entry>> entries_;
  // Cost refinements shared by the batch.
  std::vector<double> knot_w_, u_vec_, q_pos_w_, q_nom_;
  Vec lo_q_, hi_q_, max_qd_, max_u_;  // margin-shrunk barrier boxes
  std::vector<S> fext_;
  bool has_fext_ = false;
  std::vector<double> rho_reset_, drho_factor_reset_;
  // Budget prediction: per-iteration cost measured in the previous budgeted solve.
  std::vector<double> prev_iter_us_;
  SolveStats stats_;
};

}  // namespace gato
