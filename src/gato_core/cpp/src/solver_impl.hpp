// Implementation of gato::BatchSolver<S> as BatchSolverImpl<S, NV>: NV = 6 or 7
// gives fixed-size Eigen kernels for the common arms, Eigen::Dynamic any other
// size. Instantiated in solver_{double,float}.cpp.
// The method and every convention: docs/solver_method.md.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "gato/barrier.hpp"
#include "gato/lean_model.hpp"
#include "gato/solver.hpp"
#include "cost_terms.hpp"
#include "small_dense.hpp"

namespace gato {

namespace detail {
using Clock = std::chrono::steady_clock;
inline double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}
constexpr int times2(int n) { return n == Eigen::Dynamic ? Eigen::Dynamic : 2 * n; }
}  // namespace detail

template <typename S, int NV>
class BatchSolverImpl final : public BatchSolver<S> {
 public:
  static constexpr int NX = detail::times2(NV);
  static constexpr int NU = NV;
  using Vec = VecX<S>;  // long vectors (N*nx, trajectories)
  using MatXX = Eigen::Matrix<S, NX, NX>;
  using MatXU = Eigen::Matrix<S, NX, NU>;
  using MatUU = Eigen::Matrix<S, NU, NU>;
  using MatVV = Eigen::Matrix<S, NV, NV>;
  using MatJ = Eigen::Matrix<S, 3, NV>;
  using VecNX = Eigen::Matrix<S, NX, 1>;
  using VecNU = Eigen::Matrix<S, NU, 1>;
  using VecNV = Eigen::Matrix<S, NV, 1>;
  using Vec3 = Eigen::Matrix<S, 3, 1>;

  BatchSolverImpl(std::shared_ptr<const Plant<S>> plant, int batch, int N, S dt,
                  const Settings& settings, int num_threads);

  int nv() const override { return nv_; }
  int N() const override { return N_; }
  int batch() const override { return B_; }
  int xu_size() const override { return L_; }
  S dt() const override { return dt_; }
  int num_threads() const override { return pool_.size(); }
  const Settings& settings() const override { return set_; }
  const SolveStats& stats() const override { return stats_; }

  void set_settings(const Settings& s) override;
  void set_linsys(LinSys l) override { set_.linsys = l; }
  void set_rho_batch(const std::vector<double>& v) override;
  void set_mu_batch(const std::vector<double>& v) override;
  void set_pcg_tol_batch(const std::vector<double>& v) override;
  void set_drho_batch(const std::vector<double>& v, bool as_reset_default) override;
  void set_knot_weights(const std::vector<double>& w) override { cost_.knot_w = w; }
  void set_u_cost_vec(const std::vector<double>& w) override { cost_.u_vec = w; }
  void set_q_pos_cost(const std::vector<double>& w) override { cost_.q_pos_w = w; }
  void set_q_nom(const std::vector<double>& q) override { cost_.q_nom = q; }
  void set_fext(const std::vector<S>& f) override {
    has_fext_ = !f.empty();
    fext_ = f;
  }
  bool has_fext() const override { return has_fext_; }
  void set_collect_stats(bool on) override { collect_ = on; }
  void reset_rho() override;
  void reset_dual() override;
  double rho(int b) const override { return double(entries_[b]->rho); }
  void solve(const S* x_s, const S* ref, S* xu, double budget_s) override;
  void debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R, S* q, S* r, S* A,
                       S* Bm, S* c) override;
  void merit(const S* xu, const S* x_s, const S* ref, S* out) override;
  void get_lambda(S* out) const override;
  void sim_forward(const S* x, const S* u, S h, S* out) override;
  void set_row_groups(const std::vector<RowGroupSpec>& groups) override;
  void set_admm_config(const AdmmConfig& c) override;
  const AdmmConfig& admm_config() const override { return admm_; }
  void get_row_state(int which, S* out) const override;
  void get_admm_rho_scale(double* out) const override;
  int state_size() const override;
  void get_state(double* out) const override;
  void set_state(const double* in) override;

 private:
  struct Entry;
  struct Group;
  void iterate(Entry& e, int it);
  S setup_kkt(Entry& e);  // returns the merit at e.xu
  bool factor_schur(Entry& e);
  bool factor_preconditioner(Entry& e);
  void matvec(Entry& e, const Vec& p, Vec& out) const;
  void precondition(Entry& e, const Vec& r, Vec& out) const;
  int solve_pcg(Entry& e);
  bool solve_bdsv(Entry& e);
  bool factor_bdsv(Entry& e);
  bool backsolve_bdsv(Entry& e);
  void build_rhs(Entry& e);
  // Row groups (src/solver_rows.hpp).
  int rix(int gi, int k, int i) const { return (gi * N_ + k) * kMaxRowsPerGroup + i; }
  static bool live(const Group& G, int k, int i);
  void row_values(const Group& G, int b, int k, const S* xu, const S* ee, S* out) const;
  void add_GT(const Group& G, Entry& e, int k, const S* v) const;
  void add_GT_diag_G(const Group& G, Entry& e, int k, const S* h) const;
  void add_GT_dense_G(const Group& G, Entry& e, int k, const S* H) const;
  void fold(const Group& G, Entry& e, int k, S rho) const;
  void G_dz(const Group& G, const Entry& e, int k, S* out) const;
  void project(const Group& G, const S* v, S* out) const;
  S rows_cost(Entry& e, const S* xu, const S* ee, bool derivs, bool admm_term);
  void admm_prepare(Entry& e);
  void admm_gradient(Entry& e);
  void admm_update(Entry& e);
  bool admm_converged(const Entry& e) const;
  bool admm_inner(Entry& e, int& lin_iters);
  void rows_finish(Entry& e);
  void recover_step(Entry& e);
  S trial_merit(Entry& e, S alpha);
  void trial_merits_lanes(Entry& e, const S* alphas, S* out);
  void linearize_lanes(Entry& e, int k0);
  // The KKT stage linearizes W knots per call (Euler and semi-implicit Euler;
  // RK4 chains its stages through the scalar path).
  bool use_kkt_lanes() const {
    return lanes_ && plant_->use_lean() && set_.integrator != Integrator::kRk4;
  }
  bool use_lanes() const {
    return lanes_ && set_.line_search == LineSearch::kBest && plant_->use_lean();
  }
  S stage_cost_value(int k, const S* x, const S* u, const S* ee, const S* ref) const;
  const S* fext_ptr(int b, int k) const;
  S pcg_floor() const { return std::is_same<S, float>::value ? S(1e-6) : S(1e-12); }

  // k-th block of a long vector, fixed-size when NX is.
  template <typename V>
  static auto blk(V& v, int k, int nx) {
    if constexpr (NX == Eigen::Dynamic) {
      return v.segment(k * nx, nx);
    } else {
      return v.template segment<NX>(k * NX);
    }
  }

  std::shared_ptr<const Plant<S>> plant_;
  int B_, N_, nv_, nx_, nu_, L_;
  S dt_;
  Settings set_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<Entry>> entries_;
  cost::CostModel<S, NV> cost_;  // weights, tables and barrier boxes shared by the batch
  std::vector<S> fext_;
  bool has_fext_ = false;
  bool collect_ = true;
  std::vector<double> rho_reset_, drho_factor_reset_;
  std::vector<double> prev_iter_us_, this_iter_us_;  // budget prediction (per SQP iteration)
  SolveStats stats_;
  // Row groups (shared by the batch, read-only during a solve).
  std::vector<Group> groups_;
  AdmmConfig admm_;
  bool has_admm_ = false, need_ee_ = false;
  int admm_cap_ = 0;  // inner iterations per SQP iteration (cap)
  // Multi-lane lean forward dynamics for the line search (gato/lean_model.hpp).
  bool lanes_ = false;
  lean::View<S> lview_{};
  lean::Kernels<S> lk_{};
};

// S-typed copy of a RowGroupSpec.
template <typename S, int NV>
struct BatchSolverImpl<S, NV>::Group {
  RowKind kind = RowKind::kQBox;
  RowMech mech = RowMech::kTelemetry;
  int n = 0, klo = 0, khi = 0;
  S lo[kMaxRowsPerGroup], hi[kMaxRowsPerGroup];
  bool eq[kMaxRowsPerGroup];
  std::vector<unsigned char> mask;  // N * n, empty = all live
  S w = 0, delta = S(0.05), sigma = 0;
  bool cone = false;
  int admm_iters = 0;
  std::vector<S> C, d, target;
  MatUU CtC;
};

// What one batch entry owns (data): its trajectories, KKT blocks, factorizations, dual and PCG
// vectors, scratch, per-entry parameters, statistics, row-group state and lane buffers.
// What the batch shares (model) lives in BatchSolverImpl: sizes, Settings, the cost model
// (cost_terms.hpp), the row-group table, the ADMM settings and the lean kernels.
template <typename S, int NV>
struct BatchSolverImpl<S, NV>::Entry {
  Entry(const Plant<S>& plant, int N, int max_iters)
      : nv(plant.nv()), nx(2 * plant.nv()), nu(plant.nv()), N(N),
        xu(N * nx + (N - 1) * nu), dz(xu.size()), trial(xu.size()),
        Q(N, MatXX::Zero(nx, nx)), R(N - 1, MatUU::Zero(nu, nu)), A(N - 1, MatXX::Zero(nx, nx)),
        Bm(N - 1, MatXU::Zero(nx, nu)), Qpp_inv(N, MatVV::Zero(nv, nv)), Rinv(N - 1, MatUU::Zero(nu, nu)),
        Md(N, MatXX::Zero(nx, nx)), phi(N - 1, MatXX::Zero(nx, nx)), BRinv(N - 1, MatXU::Zero(nx, nu)),
        Dinv(N, MatXX::Zero(nx, nx)), Lc(N, MatXX::Zero(nx, nx)), E(N, MatXX::Zero(nx, nx)),
        qv(N, VecNX::Zero(nx)), rv(N - 1, VecNU::Zero(nu)), c(N, VecNX::Zero(nx)),
        qvv_inv(N, VecNV::Zero(nv)), rhs(Vec::Zero(N * nx)), lam(Vec::Zero(N * nx)),
        r(Vec::Zero(N * nx)), z(Vec::Zero(N * nx)), p(Vec::Zero(N * nx)), Mp(Vec::Zero(N * nx)),
        y(Vec::Zero(N * nx)), w(Vec::Zero(N * nx)), t_nx(nx), t_nx2(nx), t_nu(nu), xnext(nx),
        ee(N, Vec3::Zero()), J(MatJ::Zero(3, nv)), Jdyn(MatX<S>::Zero(3, nv)), tmp(nx, nx), tmp_L(nx, nx), tmp_Y(nx, nx),
        tmpv(nv, nv), tmpv_L(nv, nv), tmpv_Y(nv, nv), llt_nu(nu), ws(plant.make_workspace()),
        dyn(plant.nv()), pcg_iters(max_iters, 0), min_merit(max_iters, 0.0),
        step_size(max_iters, 0.0), linsys_us(max_iters, 0.0), rows(N, nx, nu, nv) {}

  int nv, nx, nu, N;
  const S* xs = nullptr;   // measured state (nx)
  const S* ref = nullptr;  // reference (6N)
  int b = 0;
  Vec xu, dz, trial;
  std::vector<MatXX> Q;
  std::vector<MatUU> R;
  std::vector<MatXX> A;
  std::vector<MatXU> Bm;
  std::vector<MatVV> Qpp_inv;
  std::vector<MatUU> Rinv;
  std::vector<MatXX> Md, phi;
  std::vector<MatXU> BRinv;
  std::vector<MatXX> Dinv, Lc, E;
  std::vector<VecNX> qv;
  std::vector<VecNU> rv;
  std::vector<VecNX> c;
  std::vector<VecNV> qvv_inv;
  Vec rhs, lam, r, z, p, Mp, y, w;  // Schur system M lam = rhs (= -gamma) and PCG vectors
  VecNX t_nx, t_nx2;
  VecNU t_nu;
  VecNX xnext;
  std::vector<Vec3> ee;  // EE positions of the trial / KKT point, per knot
  MatJ J;
  MatX<S> Jdyn;
  MatXX tmp, tmp_L, tmp_Y;
  MatVV tmpv, tmpv_L, tmpv_Y;
  Eigen::LLT<MatUU> llt_nu;
  std::unique_ptr<PlantWorkspace<S>> ws;
  DynamicsScratch<S> dyn;
  // Per-entry parameters.
  S rho = S(0.01), drho = S(1), mu = S(10), pcg_tol = S(1e-4), drho_factor = S(1.2);
  // Per-solve state and statistics.
  bool converged = false, stopped = false;
  int iters = 0;
  S merit0 = 0, merit_initial = 0, merit_final = 0;
  std::vector<int> pcg_iters;
  std::vector<double> min_merit, step_size, linsys_us;
  double t_kkt = 0, t_schur = 0, t_lin = 0, t_ls = 0;
  LinSys last_linsys = LinSys::kPcg;
  // This entry's row-group state (src/solver_rows.hpp, docs/constraints.md).
  struct RowState {
    RowState(int N, int nx, int nu, int nv)
        : qv_base(N, VecNX::Zero(nx)), rv_base(N - 1, VecNU::Zero(nu)), Jee(MatJ::Zero(3, nv)),
          ee_fin(Vec3::Zero()) {
      const size_t rs = size_t(kMaxRowGroups) * N * kMaxRowsPerGroup;
      lam_hi.assign(rs, S(0));
      lam_lo.assign(rs, S(0));
      rz.assign(rs, S(0));
      ry.assign(rs, S(0));
      g0.assign(rs, S(0));
      for (auto& f : need_init) f = 1;
    }
    // Dense layout (kMaxRowGroups, N, kMaxRowsPerGroup): AL multipliers, ADMM (z, y), g at the KKT point.
    std::vector<S> lam_hi, lam_lo, rz, ry, g0;
    std::vector<VecNX> qv_base;  // the stage gradients before the ADMM term
    std::vector<VecNU> rv_base;
    MatJ Jee;      // EE Jacobian at knot N-1 of the KKT point
    Vec3 ee_fin;   // EE position at knot N-1 of the returned plan
    unsigned char need_init[kMaxRowGroups] = {}, need_clip[kMaxRowGroups] = {};
    S rprim[kMaxRowGroups] = {}, rdual[kMaxRowGroups] = {}, zmax[kMaxRowGroups] = {};
    double vmax[kMaxRowGroups] = {}, vsum[kMaxRowGroups] = {};
    S rho_scale = 1;
    int admm_it = 0, admm_lin = 0;
    double admm_rp = 0, admm_rd = 0;
  } rows;
  // Multi-lane kernel buffers (sized in the solver's constructor when the plant has a lean model).
  struct LaneScratch {
    // Line search: kernel scratch and lane-minor trial states.
    lean::Scratch lscr;
    std::vector<S> lx, lu, lxn, lee;
    // KKT linearization: lane-minor inputs and outputs of W knots.
    std::vector<S> kq, kv, ku, kf, kqdd, kdq, kdv, kMi, kee, kJ;
  } lanes;

  S* x(int k) { return xu.data() + k * (nx + nu); }
  S* u(int k) { return xu.data() + k * (nx + nu) + nx; }
  // out = Qtilde_k^-1 v: dense position block, diagonal velocity block.
  template <typename V, typename O>
  void apply_Qinv(int k, const V& v, O& out) const {
    if constexpr (NV == Eigen::Dynamic) {
      out.head(nv).noalias() = Qpp_inv[k] * v.head(nv);
      out.tail(nv) = qvv_inv[k].cwiseProduct(v.tail(nv));
    } else {
      out.template head<NV>().noalias() = Qpp_inv[k] * v.template head<NV>();
      out.template tail<NV>() = qvv_inv[k].cwiseProduct(v.template tail<NV>());
    }
  }
};

template <typename S, int NV>
BatchSolverImpl<S, NV>::BatchSolverImpl(std::shared_ptr<const Plant<S>> plant, int batch, int N,
                                        S dt, const Settings& settings, int num_threads)
    : plant_(std::move(plant)), B_(batch), N_(N), nv_(plant_->nv()), nx_(2 * plant_->nv()),
      nu_(plant_->nv()), L_(N * 2 * plant_->nv() + (N - 1) * plant_->nv()), dt_(dt),
      set_(settings), pool_(std::max(1, std::min(num_threads, batch))) {
  if (const lean::Model<S>* lm = plant_->lean_model()) {
    lanes_ = true;
    lview_ = lm->view();
    lk_ = lean::kernels<S>(0, lm->n);
  }
  for (int b = 0; b < B_; ++b) {
    entries_.push_back(std::make_unique<Entry>(*plant_, N_, std::max(1, set_.max_sqp_iters)));
    Entry& e = *entries_.back();
    e.b = b;
    if (lanes_) {
      const int W = lk_.W;
      e.lanes.lscr = lean::Scratch(lk_.scratch_bytes);
      e.lanes.lx.assign(size_t(W) * nx_, S(0));
      e.lanes.lu.assign(size_t(W) * nu_, S(0));
      e.lanes.lxn.assign(size_t(W) * nx_, S(0));
      e.lanes.lee.assign(size_t(W) * 3, S(0));
      const size_t n = size_t(nv_), nb = size_t(plant_->nbodies());
      e.lanes.kq.assign(W * n, S(0));
      e.lanes.kv.assign(W * n, S(0));
      e.lanes.ku.assign(W * n, S(0));
      e.lanes.kf.assign(W * 6 * nb, S(0));
      e.lanes.kqdd.assign(W * n, S(0));
      e.lanes.kdq.assign(W * n * n, S(0));
      e.lanes.kdv.assign(W * n * n, S(0));
      e.lanes.kMi.assign(W * n * n, S(0));
      e.lanes.kee.assign(W * 3, S(0));
      e.lanes.kJ.assign(W * 3 * n, S(0));
    }
  }
  const auto& L = plant_->limits();
  const S m = S(kLimitMargin);
  cost_.N = N_;
  cost_.nv = nv_;
  cost_.nu = nu_;
  cost_.lo_q = L.q_lo.array() + m;
  cost_.hi_q = L.q_hi.array() - m;
  cost_.max_qd = L.qd_max.array() - m;
  cost_.max_u = L.u_max.array() - m;
  rho_reset_.assign(B_, set_.rho);
  drho_factor_reset_.assign(B_, 1.2);
  cost_.q_pos_w.assign(nv_, 0.0);
  cost_.q_nom.assign(nv_, 0.0);
  set_settings(set_);
  reset_rho();
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_settings(const Settings& s) {
  if (s.max_sqp_iters < 1) throw std::invalid_argument("max_sqp_iters: must be >= 1");
  const double old_rho = set_.rho;
  set_ = s;
  cost_.set_weights(s);
  for (auto& e : entries_) {
    e->mu = S(s.mu);
    e->pcg_tol = S(s.pcg_tol);
    // Statistics rows are sized by max_sqp_iters (host-side, between solves).
    e->pcg_iters.assign(s.max_sqp_iters, 0);
    e->min_merit.assign(s.max_sqp_iters, 0.0);
    e->step_size.assign(s.max_sqp_iters, 0.0);
    e->linsys_us.assign(s.max_sqp_iters, 0.0);
  }
  for (auto& r : rho_reset_) {
    if (r == old_rho) r = s.rho;
  }
  prev_iter_us_.assign(s.max_sqp_iters, -1.0);
  this_iter_us_.assign(s.max_sqp_iters, -1.0);
  const size_t BI = size_t(B_) * s.max_sqp_iters;
  stats_.sqp_iters.assign(B_, 0);
  stats_.converged.assign(B_, 0);
  stats_.initial_merit.assign(B_, 0);
  stats_.final_merit.assign(B_, 0);
  stats_.pcg_iters.assign(BI, 0);
  stats_.min_merit.assign(BI, 0);
  stats_.step_size.assign(BI, 0);
  stats_.linsys_time_us.assign(s.max_sqp_iters, 0.0);
  stats_.linsys_used.assign(s.max_sqp_iters, char(s.linsys));
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_rho_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) rho_reset_[b] = v.empty() ? set_.rho : v[b];
  reset_rho();
}
template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_mu_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) entries_[b]->mu = S(v.empty() ? set_.mu : v[b]);
}
template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_pcg_tol_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) entries_[b]->pcg_tol = S(v.empty() ? set_.pcg_tol : v[b]);
}
template <typename S, int NV>
void BatchSolverImpl<S, NV>::set_drho_batch(const std::vector<double>& v, bool as_reset_default) {
  for (int b = 0; b < B_; ++b) {
    const double f = v.empty() ? 1.2 : v[b];
    entries_[b]->drho_factor = S(f);
    if (as_reset_default) drho_factor_reset_[b] = f;
  }
}
template <typename S, int NV>
void BatchSolverImpl<S, NV>::reset_rho() {
  for (int b = 0; b < B_; ++b) {
    entries_[b]->rho = S(rho_reset_[b]);
    entries_[b]->drho_factor = S(drho_factor_reset_[b]);
  }
}
template <typename S, int NV>
void BatchSolverImpl<S, NV>::reset_dual() {
  for (auto& e : entries_) {
    e->lam.setZero();
    // Row-group duals: AL multipliers and ADMM (z, y) (re-initialized at the next solve).
    std::fill(e->rows.lam_hi.begin(), e->rows.lam_hi.end(), S(0));
    std::fill(e->rows.lam_lo.begin(), e->rows.lam_lo.end(), S(0));
    std::fill(e->rows.rz.begin(), e->rows.rz.end(), S(0));
    std::fill(e->rows.ry.begin(), e->rows.ry.end(), S(0));
    for (auto& f : e->rows.need_init) f = 1;
    e->rows.rho_scale = 1;
  }
}

// Blocks of M = -S (docs/solver_method.md, step 2) and the preconditioner.
template <typename S, int NV>
bool BatchSolverImpl<S, NV>::factor_schur(Entry& e) {
  const int nv = nv_, nx = nx_;
  auto pos = [&](auto& M) -> decltype(auto) {  // the position (top-left nv x nv) block
    if constexpr (NV == Eigen::Dynamic) {
      return M.topLeftCorner(nv, nv);
    } else {
      return M.template topLeftCorner<NV, NV>();
    }
  };
  auto vel_diag = [&](auto& M) {
    if constexpr (NV == Eigen::Dynamic) {
      return M.bottomRightCorner(nv, nv).diagonal();
    } else {
      return M.template bottomRightCorner<NV, NV>().diagonal();
    }
  };
  // Zero-weight blocks (docs/solver_method.md, "Zero weights"): a velocity or control
  // diagonal whose cost weight is 0 with its barrier off would make Q_vv or R singular.
  // The velocity block takes the trust region rho like the position block; a control weight
  // below a fixed tiny floor is lifted to it in the step (rho would damp torques by orders of
  // magnitude: an RTI loop could not reach gravity compensation; below the floor float32's
  // Schur complement loses the step). Both only shape the step (the merit keeps the
  // true cost), so a converged plan is that of the zero weight.
  const bool vel_barrier = set_.vel_lim_cost > 0, ctrl_barrier = set_.ctrl_lim_cost > 0;
  const S u_prox = S(std::is_same_v<S, float> ? kZeroControlProx32 : kZeroControlProx64);
  for (int k = 0; k < N_; ++k) {
    e.tmpv = pos(e.Q[k]);
    e.tmpv.diagonal().array() += e.rho;
    if (!linsys::spd_inverse(e.tmpv, e.tmpv_L, e.tmpv_Y, e.Qpp_inv[k])) return false;
    e.qvv_inv[k] = vel_diag(e.Q[k]);
    if (!vel_barrier && cost_.qd_weight(k) == S(0)) e.qvv_inv[k].array() += e.rho;
    if (!(e.qvv_inv[k].minCoeff() > 0)) return false;
    e.qvv_inv[k] = e.qvv_inv[k].cwiseInverse();
    if (k < N_ - 1) {
      if (!ctrl_barrier) {
        // In place: R is rebuilt by the next setup_kkt and read only through Rinv after this.
        for (int j = 0; j < nu_; ++j) {
          const S w = cost_.u_weight(k, j);  // lifted to u_prox in the step (zero or tiny weights)
          if (w < u_prox) e.R[k](j, j) += u_prox - w;
        }
      }
      // R is diagonal unless a row group folds a dense G'G into it.
      if (linsys::exactly_diagonal(e.R[k])) {
        if (!(e.R[k].diagonal().array() > 0).all()) return false;
        e.Rinv[k].setZero();
        e.Rinv[k].diagonal() = e.R[k].diagonal().cwiseInverse();
      } else {
        e.llt_nu.compute(e.R[k]);
        if (e.llt_nu.info() != Eigen::Success) return false;
        e.Rinv[k].setIdentity();
        e.llt_nu.solveInPlace(e.Rinv[k]);
      }
    }
  }
  // M_00 = Qtilde_0^-1; rhs = -gamma.
  e.Md[0].setZero();
  pos(e.Md[0]) = e.Qpp_inv[0];
  vel_diag(e.Md[0]) = e.qvv_inv[0];
  e.apply_Qinv(0, e.qv[0], e.t_nx);
  blk(e.rhs, 0, nx) = e.t_nx - e.c[0];
  for (int k = 0; k < N_ - 1; ++k) {
    MatXX& phi = e.phi[k];
    if constexpr (NV == Eigen::Dynamic) {
      phi.leftCols(nv).noalias() = e.A[k].leftCols(nv) * e.Qpp_inv[k];
      phi.rightCols(nv) = e.A[k].rightCols(nv) * e.qvv_inv[k].asDiagonal();
    } else {
      phi.template leftCols<NV>().noalias() = e.A[k].template leftCols<NV>() * e.Qpp_inv[k];
      phi.template rightCols<NV>() = e.A[k].template rightCols<NV>() * e.qvv_inv[k].asDiagonal();
    }
    // Coefficient-wise (lazy) products: Eigen's blocked GEMM costs more than
    // it saves at these sizes (14 x 14 for a 7-DoF arm).
    e.BRinv[k].noalias() = e.Bm[k].lazyProduct(e.Rinv[k]);
    MatXX& M = e.Md[k + 1];
    M.noalias() = phi.lazyProduct(e.A[k].transpose());
    M.noalias() += e.BRinv[k].lazyProduct(e.Bm[k].transpose());
    pos(M) += e.Qpp_inv[k + 1];
    vel_diag(M) += e.qvv_inv[k + 1];
    // gamma_{k+1} = c_{k+1} + phi_k q_k + B R^-1 r_k - Qtilde_{k+1}^-1 q_{k+1}
    e.t_nx2 = e.c[k + 1];
    e.t_nx2.noalias() += phi * e.qv[k];
    e.t_nx2.noalias() += e.BRinv[k] * e.rv[k];
    e.apply_Qinv(k + 1, e.qv[k + 1], e.t_nx);
    blk(e.rhs, k + 1, nx) = e.t_nx - e.t_nx2;
  }
  return true;
}

// rhs = -gamma from the current gradients (the blocks of factor_schur are kept):
// the ADMM inner loop changes q and r only.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::build_rhs(Entry& e) {
  const int nx = nx_;
  e.apply_Qinv(0, e.qv[0], e.t_nx);
  blk(e.rhs, 0, nx) = e.t_nx - e.c[0];
  for (int k = 0; k < N_ - 1; ++k) {
    e.t_nx2 = e.c[k + 1];
    e.t_nx2.noalias() += e.phi[k] * e.qv[k];
    e.t_nx2.noalias() += e.BRinv[k] * e.rv[k];
    e.apply_Qinv(k + 1, e.qv[k + 1], e.t_nx);
    blk(e.rhs, k + 1, nx) = e.t_nx - e.t_nx2;
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::recover_step(Entry& e) {
  const int nx = nx_, nu = nu_;
  for (int k = 0; k < N_; ++k) {
    auto dx = Eigen::Map<VecNX>(e.dz.data() + k * (nx + nu), nx);
    if (k == 0) {
      // Knot 0 is data: take dx_0 = -c_0 from the constraint row itself, so an
      // inexact (PCG) dual cannot move the plan off the measured state.
      dx = -e.c[0];
    } else {
      e.t_nx = e.qv[k] - blk(e.lam, k, nx);
      if (k < N_ - 1) e.t_nx.noalias() += e.A[k].transpose() * blk(e.lam, k + 1, nx);
      e.apply_Qinv(k, e.t_nx, e.t_nx2);
      dx = -e.t_nx2;
    }
    if (k < N_ - 1) {
      e.t_nu = e.rv[k];
      e.t_nu.noalias() += e.Bm[k].transpose() * blk(e.lam, k + 1, nx);
      Eigen::Map<VecNU>(e.dz.data() + k * (nx + nu) + nx, nu).noalias() = -(e.Rinv[k] * e.t_nu);
    }
  }
}

template <typename S, int NV>
S BatchSolverImpl<S, NV>::trial_merit(Entry& e, S alpha) {
  const int nx = nx_, nu = nu_;
  e.trial = e.xu;
  e.trial.noalias() += alpha * e.dz;
  S cost = 0, defect = 0;
  for (int k = 0; k < N_; ++k) {
    const S* x = e.trial.data() + k * (nx + nu);
    if (k < N_ - 1) {
      const S* u = x + nx;
      // One ABA pass gives f(x, u) and the EE position at x.
      dynamics_step(*plant_, *e.ws, e.dyn, set_.integrator, dt_, x, u, fext_ptr(e.b, k),
                    e.xnext.data(), e.ee[k].data());
      defect += (Eigen::Map<const VecNX>(x + nx + nu, nx) - e.xnext).template lpNorm<1>();
      cost += stage_cost_value(k, x, u, e.ee[k].data(), e.ref);
    } else {
      plant_->frame_position(*e.ws, x, e.ee[k].data());
      cost += stage_cost_value(k, x, nullptr, e.ee[k].data(), e.ref);
    }
  }
  defect += (Eigen::Map<const VecNX>(e.trial.data(), nx) - Eigen::Map<const VecNX>(e.xs, nx))
                .template lpNorm<1>();
  if (!groups_.empty()) cost += rows_cost(e, e.trial.data(), e.ee[N_ - 1].data(), false, admm_.merit);
  const S m = cost + e.mu * defect;
  return std::isfinite(double(m)) ? m : std::numeric_limits<S>::infinity();
}

// trial_merit at every alpha of `alphas` (kLineSearchSteps of them), W at a time
// through the multi-lane lean kernels: the same sums in the same order as
// trial_merit, so the merits differ only by the rounding of the dynamics.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::trial_merits_lanes(Entry& e, const S* alphas, S* out) {
  constexpr int G = kLineSearchSteps;
  const int nx = nx_, nu = nu_, W = lk_.W;
  S cost[G] = {}, defect[G] = {}, ee_last[G][3] = {};
  S *X = e.lanes.lx.data(), *U = e.lanes.lu.data(), *XN = e.lanes.lxn.data(), *EE = e.lanes.lee.data();
  void* scr = e.lanes.lscr.data();
  for (int k = 0; k < N_; ++k) {
    const S* x = e.xu.data() + k * (nx + nu);
    const S* dx = e.dz.data() + k * (nx + nu);
    const bool last = k == N_ - 1;
    for (int g0 = 0; g0 < G; g0 += W) {
      for (int i = 0; i < nx; ++i)
        for (int l = 0; l < W; ++l) X[i * W + l] = x[i] + alphas[g0 + l] * dx[i];
      if (!last) {
        for (int i = 0; i < nu; ++i)
          for (int l = 0; l < W; ++l) U[i * W + l] = x[nx + i] + alphas[g0 + l] * dx[nx + i];
        lk_.step(lview_, scr, int(set_.integrator), dt_, X, U, fext_ptr(e.b, k), XN, EE);
      } else {
        lk_.ee(lview_, scr, X, EE);  // q: the first nv rows of X
      }
      for (int l = 0; l < W; ++l) {
        const int a = g0 + l;
        const S alpha = alphas[a];
        for (int i = 0; i < nx; ++i) e.t_nx2[i] = X[i * W + l];
        S ee[3] = {EE[l], EE[W + l], EE[2 * W + l]};
        if (!last) {
          for (int i = 0; i < nu; ++i) e.t_nu[i] = U[i * W + l];
          const S* x1 = x + nx + nu;
          const S* dx1 = dx + nx + nu;
          for (int i = 0; i < nx; ++i) {
            e.t_nx[i] = x1[i] + alpha * dx1[i];
            e.xnext[i] = XN[i * W + l];
          }
          defect[a] += (e.t_nx - e.xnext).template lpNorm<1>();
          cost[a] += stage_cost_value(k, e.t_nx2.data(), e.t_nu.data(), ee, e.ref);
        } else {
          cost[a] += stage_cost_value(k, e.t_nx2.data(), nullptr, ee, e.ref);
          for (int i = 0; i < 3; ++i) ee_last[a][i] = ee[i];
        }
      }
    }
  }
  for (int a = 0; a < G; ++a) {
    const S alpha = alphas[a];
    for (int i = 0; i < nx; ++i) e.t_nx[i] = e.xu[i] + alpha * e.dz[i];
    defect[a] += (e.t_nx - Eigen::Map<const VecNX>(e.xs, nx)).template lpNorm<1>();
    if (!groups_.empty()) {
      e.trial = e.xu;
      e.trial.noalias() += alpha * e.dz;
      cost[a] += rows_cost(e, e.trial.data(), ee_last[a], false, admm_.merit);
    }
    const S m = cost[a] + e.mu * defect[a];
    out[a] = std::isfinite(double(m)) ? m : std::numeric_limits<S>::infinity();
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::iterate(Entry& e, int it) {
  using detail::Clock;
  using detail::us_since;
  const bool timed = collect_;
  Clock::time_point t0;
  if (timed) t0 = Clock::now();
  e.merit0 = setup_kkt(e);
  if (it == 0) e.merit_initial = e.merit0;
  e.iters = it + 1;
  if (timed) e.t_kkt += us_since(t0);
  if (!std::isfinite(double(e.merit0))) {  // diverged: nothing sensible to step from
    e.stopped = true;
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    return;
  }
  const bool admm = has_admm_;
  if (admm) {
    admm_prepare(e);   // linearize the ADMM rows, fold rho G'G, keep the plain gradients
    admm_gradient(e);  // + G'(y + rho (g - z)) for the first inner iteration
  }
  if (timed) t0 = Clock::now();
  bool ok = factor_schur(e);
  if (timed) e.t_schur += us_since(t0);
  const auto t_lin = Clock::now();  // the linear-solve time is always reported (pcg_times_us)
  LinSys mode = set_.linsys;
  if (mode == LinSys::kBdsvFirst) mode = it == 0 ? LinSys::kBdsv : LinSys::kPcg;
  e.last_linsys = mode;
  int pcg_it = 0;
  if (ok && admm) {
    // OSQP-style inner loop on the folded system (recovers dz itself).
    ok = admm_inner(e, pcg_it);
  } else if (ok) {
    // Residual of the warm dual; its energy is the convergence test on both
    // paths (preconditioned for PCG, exact M^-1 for the direct solve).
    matvec(e, e.lam, e.Mp);
    e.r = e.rhs - e.Mp;
    if (mode == LinSys::kPcg) {
      ok = factor_preconditioner(e);
      if (ok) {
        precondition(e, e.r, e.z);
        e.converged = std::abs(e.r.dot(e.z)) < pcg_floor();
        pcg_it = solve_pcg(e);
      }
    } else {
      ok = solve_bdsv(e);
    }
  }
  e.pcg_iters[it] = pcg_it;
  e.linsys_us[it] = us_since(t_lin);
  e.t_lin += e.linsys_us[it];
  if (timed) t0 = Clock::now();
  if (!ok) {
    // Not positive definite: keep z and lam, regularize harder.
    e.rho = std::min(e.rho * S(100), S(kRhoMax));
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    e.converged = false;
    if (timed) e.t_ls += us_since(t0);
    return;
  }
  if (admm) {
    if (admm_.merit) {
      // The merit compares against the row state the inner loop just produced.
      e.merit0 += rows_cost(e, e.xu.data(), e.ee[N_ - 1].data(), false, true);
      if (it == 0) e.merit_initial = e.merit0;
    }
  } else {
    recover_step(e);
  }
  S best = std::numeric_limits<S>::infinity();
  S best_alpha = 0;
  S alpha = 1;
  const bool first = set_.line_search == LineSearch::kFirst;
  if (use_lanes()) {
    // All step sizes at once (the 'best' rule looks at every one anyway).
    S alphas[kLineSearchSteps], m[kLineSearchSteps];
    for (int i = 0; i < kLineSearchSteps; ++i, alpha *= S(0.5)) alphas[i] = alpha;
    trial_merits_lanes(e, alphas, m);
    for (int i = 0; i < kLineSearchSteps; ++i) {
      if (m[i] < best) {  // strict: ties keep the larger alpha
        best = m[i];
        best_alpha = alphas[i];
      }
    }
  } else {
    for (int i = 0; i < kLineSearchSteps; ++i, alpha *= S(0.5)) {
      const S m = trial_merit(e, alpha);
      if (m < best) {  // strict: ties keep the larger alpha
        best = m;
        best_alpha = alpha;
      }
      if (first && best < e.merit0) break;  // backtracking: the first strict decrease
    }
  }
  const bool accept = best < e.merit0;
  e.min_merit[it] = double(best);
  if (accept) {
    e.xu.noalias() += best_alpha * e.dz;
    e.step_size[it] = double(best_alpha);
    e.merit_final = best;
  } else {
    e.step_size[it] = -1;
    e.merit_final = e.merit0;
  }
  if (set_.adapt_rho) {
    const S f = e.drho_factor;
    if (accept) {
      e.drho = std::min(e.drho / f, S(1) / f);
    } else {
      e.drho = std::max(e.drho * f, f);
    }
    e.rho = std::clamp(e.rho * e.drho, S(kRhoMin), S(kRhoMax));
    if (!accept && e.rho >= S(kRhoMax)) e.rho = S(kRhoResetAfterCap);
  }
  if (timed) e.t_ls += us_since(t0);
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::solve(const S* x_s, const S* ref, S* xu, double budget_s) {
  using detail::Clock;
  using detail::us_since;
  const auto t_start = Clock::now();
  const int iters_max = set_.max_sqp_iters;
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    Eigen::Map<VecNX>(e.x(0), nx_) = Eigen::Map<const VecNX>(e.xs, nx_);  // knot 0 is the measured state
    e.drho = 1;
    e.converged = e.stopped = false;
    e.iters = 0;
    e.t_kkt = e.t_schur = e.t_lin = e.t_ls = 0;
    std::fill(e.pcg_iters.begin(), e.pcg_iters.end(), 0);
    std::fill(e.min_merit.begin(), e.min_merit.end(), 0.0);
    std::fill(e.step_size.begin(), e.step_size.end(), 0.0);
    std::fill(e.linsys_us.begin(), e.linsys_us.end(), 0.0);
    e.rows.admm_it = e.rows.admm_lin = 0;
    e.rows.admm_rp = e.rows.admm_rd = 0;
  }
  const bool budgeted = budget_s > 0;
  const double budget_us = budget_s * 1e6;
  stats_.budget_hit = false;
  std::fill(this_iter_us_.begin(), this_iter_us_.end(), -1.0);
  const int need = std::max(1, int(std::ceil(set_.solve_ratio * B_ - 1e-9)));
  int it = 0;
  for (; it < iters_max; ++it) {
    if (budgeted && it > 0) {
      double pred = prev_iter_us_[it];
      if (pred < 0) pred = *std::max_element(this_iter_us_.begin(), this_iter_us_.begin() + it);
      if (us_since(t_start) + pred > budget_us) {
        stats_.budget_hit = true;
        break;
      }
    }
    int active = 0;
    for (auto& e : entries_) active += !(e->converged || e->stopped);
    if (active == 0) break;
    const auto t_it = Clock::now();
    auto body = [&](int b) {
      Entry& e = *entries_[b];
      if (!(e.converged || e.stopped)) iterate(e, it);
    };
    pool_.run(B_, body);
    this_iter_us_[it] = us_since(t_it);
    stats_.linsys_used[it] = char(entries_[0]->last_linsys);
    int n_conv = 0;
    for (auto& e : entries_) n_conv += e->converged;
    if (n_conv >= need) {
      ++it;
      break;
    }
  }
  const int run = it;
  if (!groups_.empty()) {
    // AL dual update and the true violation, on the returned plan.
    auto fin = [&](int b) { rows_finish(*entries_[b]); };
    pool_.run(B_, fin);
  }
  if (budgeted) {
    for (int i = 0; i < iters_max; ++i) prev_iter_us_[i] = i < run ? this_iter_us_[i] : -1.0;
  }
  // Results and statistics (the vectors were sized in set_settings).
  stats_.iters_run = run;
  stats_.t_kkt_us = stats_.t_schur_us = stats_.t_linsys_us = stats_.t_linesearch_us = 0;
  std::fill(stats_.linsys_time_us.begin(), stats_.linsys_time_us.end(), 0.0);
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    Eigen::Map<Vec>(xu + size_t(b) * L_, L_) = e.xu;
    stats_.sqp_iters[b] = e.iters;
    stats_.converged[b] = e.converged;
    stats_.initial_merit[b] = double(e.merit_initial);
    stats_.final_merit[b] = double(e.merit_final);
    for (int i = 0; i < iters_max; ++i) {
      stats_.pcg_iters[size_t(b) * iters_max + i] = e.pcg_iters[i];
      stats_.min_merit[size_t(b) * iters_max + i] = e.min_merit[i];
      stats_.step_size[size_t(b) * iters_max + i] = e.step_size[i];
      stats_.linsys_time_us[i] = std::max(stats_.linsys_time_us[i], e.linsys_us[i]);
    }
    stats_.t_kkt_us += e.t_kkt;
    stats_.t_schur_us += e.t_schur;
    stats_.t_linsys_us += e.t_lin;
    stats_.t_linesearch_us += e.t_ls;
    const int G = int(groups_.size());
    for (int gi = 0; gi < G; ++gi) {
      stats_.row_max_violation[size_t(b) * G + gi] = e.rows.vmax[gi];
      stats_.row_sum_violation[size_t(b) * G + gi] = e.rows.vsum[gi];
    }
    if (G > 0) {
      stats_.admm_r_prim[b] = e.rows.admm_rp;
      stats_.admm_r_dual[b] = e.rows.admm_rd;
      stats_.admm_iters[b] = e.rows.admm_it;
      stats_.admm_linsys_iters[b] = e.rows.admm_lin;
    }
  }
  stats_.solve_time_us = long(us_since(t_start));
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R,
                                             S* q, S* r, S* A, S* Bm, S* c) {
  using RowMat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int nx = nx_, nu = nu_, N = N_;
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx;
    e.ref = ref + size_t(b) * 6 * N;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    setup_kkt(e);
    for (int k = 0; k < N; ++k) {
      Eigen::Map<RowMat>(Q + (size_t(b) * N + k) * nx * nx, nx, nx) = e.Q[k];
      Eigen::Map<Vec>(q + (size_t(b) * N + k) * nx, nx) = e.qv[k];
      Eigen::Map<Vec>(c + (size_t(b) * N + k) * nx, nx) = e.c[k];
      if (k < N - 1) {
        Eigen::Map<RowMat>(R + (size_t(b) * (N - 1) + k) * nu * nu, nu, nu) = e.R[k];
        Eigen::Map<Vec>(r + (size_t(b) * (N - 1) + k) * nu, nu) = e.rv[k];
        Eigen::Map<RowMat>(A + (size_t(b) * (N - 1) + k) * nx * nx, nx, nx) = e.A[k];
        Eigen::Map<RowMat>(Bm + (size_t(b) * (N - 1) + k) * nx * nu, nx, nu) = e.Bm[k];
      }
    }
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::merit(const S* xu, const S* x_s, const S* ref, S* out) {
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    e.dz.setZero();
    out[b] = trial_merit(e, S(0));
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::get_lambda(S* out) const {
  for (int b = 0; b < B_; ++b) {
    Eigen::Map<Vec>(out + size_t(b) * N_ * nx_, N_ * nx_) = entries_[b]->lam;
  }
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::sim_forward(const S* x, const S* u, S h, S* out) {
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    dynamics_step(*plant_, *e.ws, e.dyn, set_.integrator, h, x + size_t(b) * nx_,
                  u + size_t(b) * nu_, fext_ptr(b, 0), out + size_t(b) * nx_);
  }
}

}  // namespace gato

#include "solver_kkt.hpp"
#include "solver_linsys.hpp"
#include "solver_rows.hpp"

namespace gato {

template <typename S>
std::unique_ptr<BatchSolver<S>> BatchSolver<S>::create(std::shared_ptr<const Plant<S>> plant,
                                                       int batch, int N, S dt,
                                                       const Settings& settings, int num_threads) {
  if (batch < 1) throw std::invalid_argument("batch_size: must be >= 1, got " + std::to_string(batch));
  if (N < 2) throw std::invalid_argument("N: the horizon needs at least 2 knots, got " + std::to_string(N));
  if (!(dt > 0) || !std::isfinite(double(dt))) throw std::invalid_argument("dt: must be a finite number > 0");
  switch (plant->nv()) {
    case 6: return std::make_unique<BatchSolverImpl<S, 6>>(plant, batch, N, dt, settings, num_threads);
    case 7: return std::make_unique<BatchSolverImpl<S, 7>>(plant, batch, N, dt, settings, num_threads);
    default:
      return std::make_unique<BatchSolverImpl<S, Eigen::Dynamic>>(plant, batch, N, dt, settings, num_threads);
  }
}

}  // namespace gato
