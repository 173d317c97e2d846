// Implementation of gato::BatchSolver<S> as BatchSolverImpl<S, NV>: NV = 6 or 7
// gives fixed-size Eigen kernels for the common arms, Eigen::Dynamic any other
// size. Instantiated in solver_{double,float}.cpp.
// The method and every convention: docs/solver_method.md.
// This file: the class, the per-entry data (Entry), construction, settings and the
// debug accessors; each step of the method has its own header, included at the end.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include "gato/barrier.hpp"
#include "gato/lean_model.hpp"
#include "gato/solver.hpp"
#include "collision.hpp"
#include "cost_terms.hpp"
#include "small_dense.hpp"

namespace gato {

namespace detail {
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
  void set_rot_axis_weights(const std::vector<double>& w) override {
    if (w.size() != 3) throw std::invalid_argument("rot_axis_weights: expected 3 numbers");
    for (int a = 0; a < 3; ++a) cost_.rot_axis[a] = w[a];
  }
  void set_rot_knot_weights(const std::vector<double>& w) override {
    if (!w.empty() && int(w.size()) != N_) throw std::invalid_argument("rot_knot_weights: expected N numbers");
    cost_.rot_knot_w = w;
    if (cost_.rot_on())
      for (auto& e : entries_) e->size_rotation();
  }
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
                       S* Bm, S* c, S* Suq = nullptr) override;
  void merit(const S* xu, const S* x_s, const S* ref, S* out) override;
  int feedback_gains(int b, const S* xu, const S* x_s, const S* ref, S* K) override;
  void set_exact_hessian(bool on) override;
  bool exact_hessian() const override { return eh_; }
  void debug_stage_hessian(const S* xu, const S* x_s, const S* ref, const S* lam, S* H) override;
  bool debug_ee_pose(int M, const S* q, S* R, S* Jw) override;
  void get_lambda(S* out) const override;
  void sim_forward(const S* x, const S* u, S h, S* out) override;
  void set_row_groups(const std::vector<RowGroupSpec>& groups) override;
  void set_admm_config(const AdmmConfig& c) override;
  const AdmmConfig& admm_config() const override { return admm_; }
  void get_row_state(int which, S* out) const override;
  void get_admm_rho_scale(double* out) const override;
  void set_collision(const std::vector<int>& frames, const std::vector<double>& centres,
                     const std::vector<double>& radii, const std::vector<double>& obstacles) override;
  int n_spheres() const override { return col_.n; }
  void collision_clearance(const S* q, S* d, S* J) override;
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
  // Clearances of the collision spheres at knot k of state x (into out); jac: also their
  // Jacobian rows into e.rows.cJ (the KKT point's linearization).
  void collision_rows(Entry& e, int k, const S* x, S* out, bool jac) const;
  S rows_cost(Entry& e, const S* xu, const S* ee, bool derivs, bool admm_term);
  void admm_prepare(Entry& e);
  void admm_gradient(Entry& e);
  void admm_update(Entry& e);
  bool admm_converged(const Entry& e) const;
  bool admm_inner(Entry& e, int& lin_iters);
  void rows_finish(Entry& e);
  void recover_step(Entry& e);
  // Exact Hessian (src/solver_hessian.hpp): the second-order terms D_k at the KKT point with
  // multipliers lam (N x nx), and one knot's modified, condensed stage block.
  void second_order(Entry& e, const S* lam);
  void assemble_stage(Entry& e, int k, MatX<S>& H) const;
  bool factor_stage_eh(Entry& e, int k);
  // The exact-Hessian step without row groups of the ADMM kind: a Riccati recursion on the KKT
  // system, the Gauss-Newton blocks where the exact reduced Hessian is not positive definite
  // (dz, lam; e.converged).
  // The step in e.dz, its multipliers in e.r; eh.exact_step: the exact blocks gave it.
  bool riccati_eh(Entry& e);
  S trial_merit(Entry& e, S alpha);
  void trial_merits_lanes(Entry& e, const S* alphas, S* out);
  // The line search's stage cost of W lanes at once where only the plain quadratic terms are
  // on (no orientation, no u_ref = gravity, barrier weights 0): stage_cost_value's sums in its
  // order per lane, without a call per lane (solver_linesearch.hpp).
  bool lane_cost_ok() const {
    return !cost_.rot_on() && !cost_.u_ref_gravity && !(S(cost_.q_lim_cost) > S(0)) &&
           !(S(cost_.vel_lim_cost) > S(0)) && !(S(cost_.ctrl_lim_cost) > S(0));
  }
  void stage_cost_lanes(int k, const S* X, const S* U, const S* EE, const S* ref, S* out) const;
  void linearize_lanes(Entry& e, int k0);
  // The KKT stage linearizes W knots per call (Euler and semi-implicit Euler;
  // RK4 chains its stages through the scalar path).
  bool use_kkt_lanes() const {
    return lanes_ && plant_->use_lean() && set_.integrator != Integrator::kRk4;
  }
  bool use_lanes() const {
    return lanes_ && set_.line_search == LineSearch::kBest && plant_->use_lean();
  }
  // rref: the entry's cached R_ref (N x 9, e.rref.update) or null; elog: the orientation
  // error e of this knot already computed (the line search's lanes) or null.
  S stage_cost_value(int k, const S* x, const S* u, const S* ee, const S* ref,
                     const S* uref = nullptr, const S* rot = nullptr, const S* rref = nullptr,
                     const S* elog = nullptr) const;
  // The orientation term is on: the EE rotation of state x into e.t_R, else null. The
  // scalar lean kernel where the plant has one (pinocchio's forward kinematics costs ~10x).
  const S* rotation_of(Entry& e, const S* x) const {
    if (!cost_.rot_on()) return nullptr;
    if (lean_rot()) {
      S R[9];
      lk1_.pose(lview_, e.lanes.lscr.data(), x, nullptr, R, nullptr);
      e.t_R = Eigen::Map<const Eigen::Matrix<S, 3, 3, Eigen::RowMajor>>(R);
    } else {
      plant_->ee_rotation(*e.ws, x, e.t_R.data());
    }
    return e.t_R.data();
  }
  // The orientation term's kinematics come from the lean kernels (lview_.ee_R calibrated).
  bool lean_rot() const { return lanes_ && plant_->use_lean(); }
  void calibrate_ee_rotation();
  void rotation_lanes(Entry& e, int k0);
  static constexpr int kMaxLanes = 8;  // the widest lean lane type (8 floats)
  void rot_logs(const S* RR, const S* rref, S* out) const;
  // u_ref = gravity: g(q) of state x into e.t_g (null when the knot has no control or
  // u_ref = zero), the control reference of the line search's stage cost.
  const S* gravity_ref(Entry& e, const S* x, bool has_u) const {
    if (!cost_.u_ref_gravity || !has_u) return nullptr;
    plant_->gravity(*e.ws, x, e.t_g.data());
    return e.t_g.data();
  }
  bool gravity_on() const { return cost_.u_ref_gravity; }
  // The eliminated knot's A (A + B K) and gradient (q + [K' r; 0]) with u_ref = gravity, else
  // A_k and q_k (k < N-1 for A).
  // The exact Hessian eliminates every knot's control with a dense gain (e.eh.K, nu x nx).
  const MatXX& A_el(const Entry& e, int k) const { return gravity_on() || eh_ ? e.At[k] : e.A[k]; }
  const VecNX& q_el(Entry& e, int k) const {
    if (k >= N_ - 1 || !(gravity_on() || eh_)) return e.qv[k];
    if (eh_) {
      e.qt[k] = e.qv[k];
      e.qt[k].noalias() += e.eh.K[k].transpose() * e.rv[k];
      return e.qt[k];
    }
    e.qt[k] = e.qv[k];
    if constexpr (NV == Eigen::Dynamic) {
      e.qt[k].head(nv_).noalias() += e.Kg[k].transpose() * e.rv[k];
    } else {
      e.qt[k].template head<NV>().noalias() += e.Kg[k].transpose() * e.rv[k];
    }
    return e.qt[k];
  }
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
  // Collision model (set_collision): spheres fixed in frames and the world obstacles.
  struct CollisionModel {
    int n = 0;                // spheres
    std::vector<int> frames;  // frame id per sphere
    std::vector<S> local;     // centres in frame coordinates (n x 3)
    std::vector<S> radius;    // (n)
    std::vector<S> obs;       // obstacle table (n_obs x collision::kObstacleStride)
    int n_obs = 0;
  } col_;
  int admm_cap_ = 0;  // inner iterations per SQP iteration (cap)
  // Multi-lane lean forward dynamics for the line search (gato/lean_model.hpp).
  bool lanes_ = false;
  bool eh_ = false;  // exact-Hessian stage blocks (set_exact_hessian)
  lean::View<S> lview_{};
  lean::Kernels<S> lk_{};
  lean::Kernels<S> lk1_{};  // scalar (W = 1): the sequential line search's EE rotation
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

  // u_ref = gravity (docs/solver_method.md, "Gravity-referenced control"): per knot k < N-1
  // g(q_k), dg/dq, the cost's cross block S_uq, the elimination gain K = -R^-1 S_uq and
  // A + B K; sized on first use (set_settings), untouched with u_ref = zero.
  void size_gravity() {
    if (!ug.empty()) return;
    ug.assign(N - 1, VecNU::Zero(nu));
    dg.assign(N - 1, MatVV::Zero(nv, nv));
    Suq.assign(N - 1, MatUU::Zero(nu, nv));
    Kg.assign(N - 1, MatUU::Zero(nu, nv));
    At.assign(N - 1, MatXX::Zero(nx, nx));
    qt.assign(N - 1, VecNX::Zero(nx));
    t_g = VecNU::Zero(nu);
  }
  std::vector<VecNU> ug;
  std::vector<MatVV> dg;
  std::vector<MatUU> Suq, Kg;
  std::vector<MatXX> At;
  std::vector<VecNX> qt;  // q_k + [K' r_k; 0], the gradient of the eliminated knot
  VecNU t_g;
  MatX<S> dg_dyn;
  // Exact Hessian (src/solver_hessian.hpp), sized by size_eh(): the second-order terms D_k
  // (nz x nz, nz = nx + nu), the elimination gains K_k = -H_uu^-1 H_ux (nu x nx), the dense
  // inverses of the condensed state blocks, and the scratch of the finite differences and the
  // eigenvalue modification.
  struct ExactHessian {
    bool on = false;
    std::vector<MatX<S>> D, K;
    std::vector<MatXX> Qinv;
    MatX<S> H, W, Ap, Bp, Jp;
    VecX<S> gp, gm, xp, up, xn, eep;
    Eigen::SelfAdjointEigenSolver<MatX<S>> eig;
    Eigen::LLT<MatX<S>> llt, lltz;
    long modified = 0;  // stage blocks the eigenvalue modification changed (since construction)
    // The Riccati recursion (riccati_eh): cost-to-go Hessians P_k (nx x nx) and gradients p_k,
    // feed-forward steps kff_k (nu), and the scratch of one knot (Qzz = H + [A B]' P [A B]).
    std::vector<MatX<S>> P;
    std::vector<VecX<S>> pv, kff;
    MatX<S> Qzz, AB, PAB, Quu;
    VecX<S> qz, pc, dxk, duk;
    long regularized = 0;  // steps that fell back to the Gauss-Newton blocks (since construction)
    bool exact_step = false;  // the last riccati_eh used the exact blocks
    bool force_gn = false;    // riccati_eh takes the Gauss-Newton blocks (iterate's comparison)
    Vec dz_x, lam_x;          // the exact step and its multipliers while that comparison runs
    S pred = 0;               // the exact model's predicted merit decrease for the full step
    int gn_left = 0;          // Gauss-Newton iterations still to take after zero multipliers (rule (a))
    bool cold_gn = false;     // the last riccati_eh took the Gauss-Newton step by rule (a)
    bool trust_next = false;  // the next exact step skips the ratio test (the watchdog)
  } eh;
  void size_eh() {
    size_gravity();  // At and qt hold the eliminated A and gradient
    if (!eh.D.empty()) return;
    const int nz = nx + nu;
    eh.D.assign(N, MatX<S>::Zero(nz, nz));
    eh.K.assign(N - 1, MatX<S>::Zero(nu, nx));
    eh.Qinv.assign(N, MatXX::Zero(nx, nx));
    eh.H = MatX<S>::Zero(nz, nz);
    eh.W = MatX<S>::Zero(nz, nz);
    eh.Ap = MatX<S>::Zero(nx, nx);
    eh.Bp = MatX<S>::Zero(nx, nu);
    eh.Jp = MatX<S>::Zero(3, nv);
    eh.gp = VecX<S>::Zero(nz);
    eh.gm = VecX<S>::Zero(nz);
    eh.xp = VecX<S>::Zero(nx);
    eh.up = VecX<S>::Zero(nu);
    eh.xn = VecX<S>::Zero(nx);
    eh.eep = VecX<S>::Zero(3);
    eh.eig = Eigen::SelfAdjointEigenSolver<MatX<S>>(nz);
    eh.llt = Eigen::LLT<MatX<S>>(nu);
    eh.lltz = Eigen::LLT<MatX<S>>(nz);
    eh.P.assign(N, MatX<S>::Zero(nx, nx));
    eh.pv.assign(N, VecX<S>::Zero(nx));
    eh.kff.assign(N - 1, VecX<S>::Zero(nu));
    eh.Qzz = MatX<S>::Zero(nz, nz);
    eh.AB = MatX<S>::Zero(nx, nz);
    eh.PAB = MatX<S>::Zero(nx, nz);
    eh.Quu = MatX<S>::Zero(nu, nu);
    eh.qz = VecX<S>::Zero(nz);
    eh.pc = VecX<S>::Zero(nx);
    eh.dxk = VecX<S>::Zero(nx);
    eh.duk = VecX<S>::Zero(nu);
  }
  // The orientation term (rot_cost / N_rot_cost / per-knot weights > 0): the EE rotation per
  // knot and the world angular Jacobian of the KKT point; t_R for the line search.
  std::vector<Eigen::Matrix<S, 3, 3>> Rot;
  MatJ Jw;
  MatX<S> Jw_dyn;
  Eigen::Matrix<S, 3, 3> t_R;
  void size_rotation() {
    if (!Rot.empty()) return;
    Rot.assign(N, Eigen::Matrix<S, 3, 3>::Identity());
    Jw = MatJ::Zero(3, nv);
    Jw_dyn = MatX<S>::Zero(3, nv);
    rref.size(N);
  }
  cost::RefRotations<S> rref;  // R_ref per knot (exp of the reference's slots [3:6])

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
  std::vector<char> exact_it;  // per iteration: the eh step took the exact blocks
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
    // COLLISION rows: their Jacobians at the KKT point (N x n_spheres x nv) and scratch.
    std::vector<S> cJ, cpos, cJp;
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
    // The orientation term: EE rotations of the line search's lanes (9 W); the KKT knots'
    // positions (nv W), rotations (9 W) and angular Jacobians (3 nv W).
    std::vector<S> lrot, rq, krot, kJw;
  } lanes;

  S* x(int k) { return xu.data() + k * (nx + nu); }
  S* u(int k) { return xu.data() + k * (nx + nu) + nx; }
  // out = Qtilde_k^-1 v: dense position block, diagonal velocity block (Gauss-Newton), or
  // the dense condensed block of the exact Hessian.
  template <typename V, typename O>
  void apply_Qinv(int k, const V& v, O& out) const {
    if (eh.on) {
      out.noalias() = eh.Qinv[k] * v;
      return;
    }
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
    lk1_ = lean::kernels<S>(1, lm->n);
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
      e.lanes.lrot.assign(W * 9, S(0));
      e.lanes.rq.assign(W * n, S(0));
      e.lanes.krot.assign(W * 9, S(0));
      e.lanes.kJw.assign(W * 3 * n, S(0));
    }
  }
  if (lanes_) calibrate_ee_rotation();
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
    if (cost_.u_ref_gravity) e->size_gravity();
    if (cost_.rot_on()) e->size_rotation();
    e->mu = S(s.mu);
    e->pcg_tol = S(s.pcg_tol);
    // Statistics rows are sized by max_sqp_iters (host-side, between solves).
    e->pcg_iters.assign(s.max_sqp_iters, 0);
    e->min_merit.assign(s.max_sqp_iters, 0.0);
    e->step_size.assign(s.max_sqp_iters, 0.0);
    e->exact_it.assign(s.max_sqp_iters, 0);
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
  stats_.exact_step.assign(BI, 0);
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
  // Row-group duals: AL multipliers and ADMM (z, y) (re-initialized at the next solve). Only the
  // installed groups' slots: the others are zero already (set_row_groups zeroes a removed group's
  // slots and nothing else writes them), and zeroing all kMaxRowGroups of them was 8 MB at B = 32.
  const size_t used = size_t(groups_.size()) * N_ * kMaxRowsPerGroup;
  for (auto& e : entries_) {
    e->lam.setZero();
    for (std::vector<S>* v : {&e->rows.lam_hi, &e->rows.lam_lo, &e->rows.rz, &e->rows.ry})
      std::fill(v->begin(), v->begin() + std::min(used, v->size()), S(0));
    for (auto& f : e->rows.need_init) f = 1;
    e->rows.rho_scale = 1;
  }
}

// View::ee_R (the EE frame's axes in its body's canonical frame, which the plant's lean
// model does not store): R_body(q0)' R_ee(q0) at q0 = 0, R_body from the lean kernel with
// ee_R = I and R_ee from Plant::ee_rotation (pinocchio). The frame is fixed to its body, so
// any q0 gives the same matrix (to rounding).
template <typename S, int NV>
void BatchSolverImpl<S, NV>::calibrate_ee_rotation() {
  for (int k = 0; k < 9; ++k) lview_.ee_R[k] = S(k % 4 == 0);
  const std::vector<S> q0(size_t(nv_), S(0));
  S Rb[9];
  lk1_.pose(lview_, entries_[0]->lanes.lscr.data(), q0.data(), nullptr, Rb, nullptr);
  Eigen::Matrix<S, 3, 3> Re;  // column-major, world <- EE
  plant_->ee_rotation(*entries_[0]->ws, q0.data(), Re.data());
  const Eigen::Matrix<S, 3, 3> Rbody = Eigen::Map<const Eigen::Matrix<S, 3, 3, Eigen::RowMajor>>(Rb);
  const Eigen::Matrix<S, 3, 3> off = Rbody.transpose() * Re;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) lview_.ee_R[3 * r + c] = off(r, c);
}

// EE rotations and world angular Jacobians of knots k0 .. k0 + W - 1 (lane l = knot
// k0 + l; lanes past the last knot repeat it) in one multi-lane forward-kinematics pass.
template <typename S, int NV>
void BatchSolverImpl<S, NV>::rotation_lanes(Entry& e, int k0) {
  const int W = lk_.W, nv = nv_;
  for (int l = 0; l < W; ++l) {
    const S* x = e.x(std::min(k0 + l, N_ - 1));
    for (int j = 0; j < nv; ++j) e.lanes.rq[j * W + l] = x[j];
  }
  lk_.pose(lview_, e.lanes.lscr.data(), e.lanes.rq.data(), nullptr, e.lanes.krot.data(),
           e.lanes.kJw.data());
}

template <typename S, int NV>
bool BatchSolverImpl<S, NV>::debug_ee_pose(int M, const S* q, S* R, S* Jw) {
  if (!lanes_) return false;
  Entry& e = *entries_[0];
  const int W = lk_.W, nv = nv_;
  for (int m0 = 0; m0 < M; m0 += W) {
    for (int l = 0; l < W; ++l) {
      const S* qm = q + size_t(std::min(m0 + l, M - 1)) * nv;
      for (int j = 0; j < nv; ++j) e.lanes.rq[j * W + l] = qm[j];
    }
    lk_.pose(lview_, e.lanes.lscr.data(), e.lanes.rq.data(), nullptr, e.lanes.krot.data(),
             e.lanes.kJw.data());
    for (int l = 0; l < W && m0 + l < M; ++l) {
      const size_t m = size_t(m0 + l);
      for (int i = 0; i < 9; ++i) R[m * 9 + i] = e.lanes.krot[i * W + l];
      for (int i = 0; i < 3 * nv; ++i) Jw[m * 3 * nv + i] = e.lanes.kJw[i * W + l];
    }
  }
  return true;
}

template <typename S, int NV>
void BatchSolverImpl<S, NV>::debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R,
                                             S* q, S* r, S* A, S* Bm, S* c, S* Suq) {
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
        if (Suq) {
          // nu x nx: the cross block on the positions, zero on the velocities.
          Eigen::Map<RowMat> out(Suq + (size_t(b) * (N - 1) + k) * nu * nx, nu, nx);
          out.setZero();
          if (gravity_on()) out.leftCols(nv_) = e.Suq[k];
        }
      }
    }
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

#include "solver_kkt.hpp"        // step 1: KKT blocks, stage cost, knot linearization
#include "solver_schur.hpp"      // step 2: Schur complement, right-hand side, step recovery
#include "solver_linsys.hpp"     // step 3: PCG and the block Cholesky
#include "solver_linesearch.hpp" // step 4: merit of the trial points
#include "solver_iteration.hpp"  // steps 1-6 in order: iterate() and the batch loop solve()
#include "solver_rows.hpp"       // constraint row groups
#include "solver_gains.hpp"      // the plan's feedback gains (Riccati on the step's blocks)
#include "solver_hessian.hpp"    // the exact-Hessian ('eh') second-order terms

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
