// Implementation of gato::BatchSolver<S>; instantiated in solver_{double,float}.cpp.
// The method and every convention: docs/solver_method.md.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "gato/barrier.hpp"
#include "gato/solver.hpp"

namespace gato {

namespace {
using Clock = std::chrono::steady_clock;
inline double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}
}  // namespace

template <typename S>
struct BatchSolver<S>::Entry {
  Entry(const Plant<S>& plant, int N, int max_iters)
      : nv(plant.nv()), nx(2 * plant.nv()), nu(plant.nv()), N(N),
        xu(N * nx + (N - 1) * nu), dz(xu.size()), trial(xu.size()),
        Q(N, Mat::Zero(nx, nx)), R(N - 1, Mat::Zero(nu, nu)), A(N - 1, Mat::Zero(nx, nx)),
        Bm(N - 1, Mat::Zero(nx, nu)), Qpp_inv(N, Mat::Zero(nv, nv)), Rinv(N - 1, Mat::Zero(nu, nu)),
        Md(N, Mat::Zero(nx, nx)), phi(N - 1, Mat::Zero(nx, nx)), BRinv(N - 1, Mat::Zero(nx, nu)),
        Dinv(N, Mat::Zero(nx, nx)), Lc(N, Mat::Zero(nx, nx)), E(N, Mat::Zero(nx, nx)),
        qv(N, Vec::Zero(nx)), rv(N - 1, Vec::Zero(nu)), c(N, Vec::Zero(nx)), qvv_inv(N, Vec::Zero(nv)),
        rhs(Vec::Zero(N * nx)), lam(Vec::Zero(N * nx)), r(Vec::Zero(N * nx)), z(Vec::Zero(N * nx)),
        p(Vec::Zero(N * nx)), Mp(Vec::Zero(N * nx)), y(Vec::Zero(N * nx)), w(Vec::Zero(N * nx)),
        t_nx(nx), t_nx2(nx), t_nu(nu), xnext(nx), ee(3), J(3, nv), tmp_nxnx(nx, nx),
        llt_nv(nv), llt_nu(nu), llt_nx(nx), ws(plant.make_workspace()), dyn(plant.nv()),
        pcg_iters(max_iters, 0), min_merit(max_iters, 0.0), step_size(max_iters, 0.0),
        linsys_us(max_iters, 0.0) {}

  int nv, nx, nu, N;
  const S* xs = nullptr;   // measured state (nx)
  const S* ref = nullptr;  // reference (6N)
  int b = 0;
  Vec xu, dz, trial;
  std::vector<Mat> Q, R, A, Bm, Qpp_inv, Rinv, Md, phi, BRinv, Dinv, Lc, E;
  std::vector<Vec> qv, rv, c, qvv_inv;
  Vec rhs, lam, r, z, p, Mp, y, w;  // Schur system M lam = rhs (= -gamma) and PCG vectors
  Vec t_nx, t_nx2, t_nu, xnext, ee;
  Mat J, tmp_nxnx;
  Eigen::LLT<Mat> llt_nv, llt_nu, llt_nx;
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

  Eigen::Map<Vec> x(int k) { return Eigen::Map<Vec>(xu.data() + k * (nx + nu), nx); }
  Eigen::Map<Vec> u(int k) { return Eigen::Map<Vec>(xu.data() + k * (nx + nu) + nx, nu); }
  // out = Qtilde_k^-1 v: dense position block, diagonal velocity block.
  template <typename V, typename O>
  void apply_Qinv(int k, const V& v, O& out) const {
    out.head(nv).noalias() = Qpp_inv[k] * v.head(nv);
    out.tail(nv) = qvv_inv[k].cwiseProduct(v.tail(nv));
  }
  auto blk(Vec& v, int k) { return v.segment(k * nx, nx); }
  auto blk(const Vec& v, int k) const { return v.segment(k * nx, nx); }
};

template <typename S>
BatchSolver<S>::BatchSolver(std::shared_ptr<const Plant<S>> plant, int batch, int N, S dt,
                            const Settings& settings, int num_threads)
    : plant_(std::move(plant)), B_(batch), N_(N), nv_(plant_->nv()), nx_(2 * plant_->nv()),
      nu_(plant_->nv()), L_(N * 2 * plant_->nv() + (N - 1) * plant_->nv()), dt_(dt),
      set_(settings), pool_(std::max(1, std::min(num_threads, batch))) {
  if (batch < 1) throw std::invalid_argument("batch_size: must be >= 1, got " + std::to_string(batch));
  if (N < 2) throw std::invalid_argument("N: the horizon needs at least 2 knots, got " + std::to_string(N));
  if (!(dt > 0) || !std::isfinite(double(dt))) throw std::invalid_argument("dt: must be a finite number > 0");
  for (int b = 0; b < B_; ++b) {
    entries_.push_back(std::make_unique<Entry>(*plant_, N_, std::max(1, set_.max_sqp_iters)));
    entries_.back()->b = b;
  }
  const auto& L = plant_->limits();
  const S m = S(kLimitMargin);
  lo_q_ = L.q_lo.array() + m;
  hi_q_ = L.q_hi.array() - m;
  max_qd_ = L.qd_max.array() - m;
  max_u_ = L.u_max.array() - m;
  rho_reset_.assign(B_, set_.rho);
  drho_factor_reset_.assign(B_, 1.2);
  q_pos_w_.assign(nv_, 0.0);
  q_nom_.assign(nv_, 0.0);
  set_settings(set_);
  reset_rho();
}

template <typename S>
BatchSolver<S>::~BatchSolver() = default;

template <typename S>
void BatchSolver<S>::set_settings(const Settings& s) {
  if (s.max_sqp_iters < 1) throw std::invalid_argument("max_sqp_iters: must be >= 1");
  const bool grow = s.max_sqp_iters > set_.max_sqp_iters ||
                    int(entries_.front()->pcg_iters.size()) < s.max_sqp_iters;
  const double old_rho = set_.rho;
  set_ = s;
  for (auto& e : entries_) {
    e->mu = S(s.mu);
    e->pcg_tol = S(s.pcg_tol);
    if (grow) {  // statistics rows sized by max_sqp_iters (host-side, between solves)
      e->pcg_iters.assign(s.max_sqp_iters, 0);
      e->min_merit.assign(s.max_sqp_iters, 0.0);
      e->step_size.assign(s.max_sqp_iters, 0.0);
      e->linsys_us.assign(s.max_sqp_iters, 0.0);
    }
  }
  for (auto& r : rho_reset_) if (r == old_rho) r = s.rho;
  prev_iter_us_.assign(s.max_sqp_iters, -1.0);
}

template <typename S>
void BatchSolver<S>::set_rho_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) rho_reset_[b] = v.empty() ? set_.rho : v[b];
  reset_rho();
}
template <typename S>
void BatchSolver<S>::set_mu_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) entries_[b]->mu = S(v.empty() ? set_.mu : v[b]);
}
template <typename S>
void BatchSolver<S>::set_pcg_tol_batch(const std::vector<double>& v) {
  for (int b = 0; b < B_; ++b) entries_[b]->pcg_tol = S(v.empty() ? set_.pcg_tol : v[b]);
}
template <typename S>
void BatchSolver<S>::set_drho_batch(const std::vector<double>& v, bool as_reset_default) {
  for (int b = 0; b < B_; ++b) {
    const double f = v.empty() ? 1.2 : v[b];
    entries_[b]->drho_factor = S(f);
    if (as_reset_default) drho_factor_reset_[b] = f;
  }
}
template <typename S>
void BatchSolver<S>::set_knot_weights(const std::vector<double>& w) { knot_w_ = w; }
template <typename S>
void BatchSolver<S>::set_u_cost_vec(const std::vector<double>& w) { u_vec_ = w; }
template <typename S>
void BatchSolver<S>::set_q_pos_cost(const std::vector<double>& w) { q_pos_w_ = w; }
template <typename S>
void BatchSolver<S>::set_q_nom(const std::vector<double>& q) { q_nom_ = q; }
template <typename S>
void BatchSolver<S>::set_fext(const std::vector<S>& f) {
  has_fext_ = !f.empty();
  fext_ = f;
}

template <typename S>
void BatchSolver<S>::reset_rho() {
  for (int b = 0; b < B_; ++b) {
    entries_[b]->rho = S(rho_reset_[b]);
    entries_[b]->drho_factor = S(drho_factor_reset_[b]);
  }
}
template <typename S>
void BatchSolver<S>::reset_dual() {
  for (auto& e : entries_) e->lam.setZero();
}
template <typename S>
double BatchSolver<S>::rho(int b) const { return double(entries_[b]->rho); }

template <typename S>
S BatchSolver<S>::ee_weight(int k) const {
  if (!knot_w_.empty()) return S(knot_w_[3 * k]);
  return S(k == N_ - 1 ? set_.N_cost : set_.q_cost);
}
template <typename S>
S BatchSolver<S>::qd_weight(int k) const {
  return S(knot_w_.empty() ? set_.qd_cost : knot_w_[3 * k + 1]);
}
template <typename S>
S BatchSolver<S>::u_weight(int k, int j) const {
  if (!u_vec_.empty()) return S(u_vec_[j]);
  return S(knot_w_.empty() ? set_.u_cost : knot_w_[3 * k + 2]);
}
template <typename S>
const S* BatchSolver<S>::fext_ptr(int b, int k) const {
  if (!has_fext_) return nullptr;
  return fext_.data() + (size_t(b) * N_ + k) * 6 * plant_->nbodies();
}

// Value of l_k at (x, u) (u null at the last knot); EE by forward kinematics only.
template <typename S>
S BatchSolver<S>::stage_cost_value(Entry& e, int k, const S* x, const S* u) const {
  S l = 0;
  plant_->frame_position(*e.ws, x, e.ee.data());
  const S w = ee_weight(k);
  for (int i = 0; i < 3; ++i) {
    const S d = e.ee[i] - e.ref[6 * k + i];
    l += S(0.5) * w * d * d;
  }
  const S wq = S(set_.q_lim_cost), wv = S(set_.vel_lim_cost), wu = S(set_.ctrl_lim_cost);
  const S vw = qd_weight(k);
  for (int j = 0; j < nv_; ++j) {
    const S dq = x[j] - S(q_nom_[j]);
    l += S(0.5) * S(q_pos_w_[j]) * dq * dq;
    if (wq > 0) l += box_barrier<S>(x[j], lo_q_[j], hi_q_[j], wq, nullptr, nullptr);
    const S v = x[nv_ + j];
    l += S(0.5) * vw * v * v;
    if (wv > 0) l += box_barrier<S>(v, -max_qd_[j], max_qd_[j], wv, nullptr, nullptr);
  }
  if (u) {
    for (int j = 0; j < nu_; ++j) {
      l += S(0.5) * u_weight(k, j) * u[j] * u[j];
      if (wu > 0) l += box_barrier<S>(u[j], -max_u_[j], max_u_[j], wu, nullptr, nullptr);
    }
  }
  return l;
}

template <typename S>
S BatchSolver<S>::setup_kkt(Entry& e) {
  const int nv = nv_, nx = nx_;
  const S wq = S(set_.q_lim_cost), wv = S(set_.vel_lim_cost), wu = S(set_.ctrl_lim_cost);
  S cost = 0, defect = 0;
  for (int k = 0; k < N_; ++k) {
    auto x = e.x(k);
    Mat& Q = e.Q[k];
    Vec& q = e.qv[k];
    Q.setZero();
    q.setZero();
    // End-effector tracking, Gauss-Newton.
    plant_->ee_position_jacobian(*e.ws, x.data(), e.ee.data(), e.J);
    const S w = ee_weight(k);
    for (int i = 0; i < 3; ++i) e.ee[i] -= e.ref[6 * k + i];
    cost += S(0.5) * w * e.ee.squaredNorm();
    Q.topLeftCorner(nv, nv).noalias() = w * e.J.transpose() * e.J;
    q.head(nv).noalias() = w * e.J.transpose() * e.ee;
    const S vw = qd_weight(k);
    for (int j = 0; j < nv; ++j) {
      const S a = S(q_pos_w_[j]);
      const S dq = x[j] - S(q_nom_[j]);
      cost += S(0.5) * a * dq * dq;
      Q(j, j) += a;
      q[j] += a * dq;
      if (wq > 0) cost += box_barrier<S>(x[j], lo_q_[j], hi_q_[j], wq, &q[j], &Q(j, j));
      const S v = x[nv + j];
      cost += S(0.5) * vw * v * v;
      Q(nv + j, nv + j) += vw;
      q[nv + j] += vw * v;
      if (wv > 0) cost += box_barrier<S>(v, -max_qd_[j], max_qd_[j], wv, &q[nv + j], &Q(nv + j, nv + j));
    }
    if (k < N_ - 1) {
      auto u = e.u(k);
      Mat& R = e.R[k];
      Vec& r = e.rv[k];
      R.setZero();
      r.setZero();
      for (int j = 0; j < nu_; ++j) {
        const S s = u_weight(k, j);
        cost += S(0.5) * s * u[j] * u[j];
        R(j, j) += s;
        r[j] += s * u[j];
        if (wu > 0) cost += box_barrier<S>(u[j], -max_u_[j], max_u_[j], wu, &r[j], &R(j, j));
      }
      dynamics_linearize(*plant_, *e.ws, e.dyn, set_.integrator, dt_, x.data(), u.data(),
                         fext_ptr(e.b, k), e.xnext.data(), e.A[k], e.Bm[k]);
      e.c[k + 1] = e.x(k + 1) - e.xnext;
      defect += e.c[k + 1].template lpNorm<1>();
    }
  }
  e.c[0] = e.x(0) - Eigen::Map<const Vec>(e.xs, nx);
  defect += e.c[0].template lpNorm<1>();
  return cost + e.mu * defect;
}

// Blocks of M = -S (docs/solver_method.md, step 2) and the preconditioner.
template <typename S>
bool BatchSolver<S>::factor_schur(Entry& e) {
  const int nv = nv_;
  for (int k = 0; k < N_; ++k) {
    e.tmp_nxnx.topLeftCorner(nv, nv) = e.Q[k].topLeftCorner(nv, nv);
    e.tmp_nxnx.topLeftCorner(nv, nv).diagonal().array() += e.rho;
    e.llt_nv.compute(e.tmp_nxnx.topLeftCorner(nv, nv));
    if (e.llt_nv.info() != Eigen::Success) return false;
    e.Qpp_inv[k].setIdentity();
    e.llt_nv.solveInPlace(e.Qpp_inv[k]);
    const auto dv = e.Q[k].bottomRightCorner(nv, nv).diagonal();
    if (!(dv.minCoeff() > 0)) return false;
    e.qvv_inv[k] = dv.cwiseInverse();
    if (k < N_ - 1) {
      e.llt_nu.compute(e.R[k]);
      if (e.llt_nu.info() != Eigen::Success) return false;
      e.Rinv[k].setIdentity();
      e.llt_nu.solveInPlace(e.Rinv[k]);
    }
  }
  // M_00 = Qtilde_0^-1; rhs = -gamma.
  e.Md[0].setZero();
  e.Md[0].topLeftCorner(nv, nv) = e.Qpp_inv[0];
  e.Md[0].bottomRightCorner(nv, nv).diagonal() = e.qvv_inv[0];
  e.apply_Qinv(0, e.qv[0], e.t_nx);
  e.blk(e.rhs, 0) = -(e.c[0] - e.t_nx);
  for (int k = 0; k < N_ - 1; ++k) {
    Mat& phi = e.phi[k];
    phi.leftCols(nv).noalias() = e.A[k].leftCols(nv) * e.Qpp_inv[k];
    phi.rightCols(nv) = e.A[k].rightCols(nv) * e.qvv_inv[k].asDiagonal();
    e.BRinv[k].noalias() = e.Bm[k] * e.Rinv[k];
    Mat& M = e.Md[k + 1];
    M.noalias() = phi * e.A[k].transpose();
    M.noalias() += e.BRinv[k] * e.Bm[k].transpose();
    M.topLeftCorner(nv, nv) += e.Qpp_inv[k + 1];
    M.bottomRightCorner(nv, nv).diagonal() += e.qvv_inv[k + 1];
    // gamma_{k+1} = c_{k+1} + phi_k q_k + B R^-1 r_k - Qtilde_{k+1}^-1 q_{k+1}
    e.t_nx2 = e.c[k + 1];
    e.t_nx2.noalias() += phi * e.qv[k];
    e.t_nx2.noalias() += e.BRinv[k] * e.rv[k];
    e.apply_Qinv(k + 1, e.qv[k + 1], e.t_nx);
    e.t_nx2 -= e.t_nx;
    e.blk(e.rhs, k + 1) = -e.t_nx2;
  }
  // Preconditioner diagonal: D_k = M_kk + rho * Ibar.
  for (int k = 0; k < N_; ++k) {
    e.tmp_nxnx = e.Md[k];
    e.tmp_nxnx.topLeftCorner(nv, nv).diagonal().array() += e.rho;
    e.llt_nx.compute(e.tmp_nxnx);
    if (e.llt_nx.info() != Eigen::Success) return false;
    e.Dinv[k].setIdentity();
    e.llt_nx.solveInPlace(e.Dinv[k]);
  }
  return true;
}

// out = M p, M block tridiagonal: M_kk p_k - phi_{k-1} p_{k-1} - phi_k^T p_{k+1}.
template <typename S>
void BatchSolver<S>::matvec(const Entry& e, const Vec& p, Vec& out) const {
  const int nx = nx_;
  for (int k = 0; k < N_; ++k) {
    auto o = out.segment(k * nx, nx);
    o.noalias() = e.Md[k] * p.segment(k * nx, nx);
    if (k > 0) o.noalias() -= e.phi[k - 1] * p.segment((k - 1) * nx, nx);
    if (k < N_ - 1) o.noalias() -= e.phi[k].transpose() * p.segment((k + 1) * nx, nx);
  }
}

// out = (D^-1 - D^-1 O D^-1) r, O the off-diagonal part of M.
template <typename S>
void BatchSolver<S>::precondition(const Entry& e, const Vec& r, Vec& out) const {
  const int nx = nx_;
  Vec& y = const_cast<Entry&>(e).y;
  Vec& w = const_cast<Entry&>(e).w;
  for (int k = 0; k < N_; ++k) y.segment(k * nx, nx).noalias() = e.Dinv[k] * r.segment(k * nx, nx);
  for (int k = 0; k < N_; ++k) {
    auto wk = w.segment(k * nx, nx);
    wk.setZero();
    if (k > 0) wk.noalias() -= e.phi[k - 1] * y.segment((k - 1) * nx, nx);
    if (k < N_ - 1) wk.noalias() -= e.phi[k].transpose() * y.segment((k + 1) * nx, nx);
  }
  for (int k = 0; k < N_; ++k) {
    out.segment(k * nx, nx) = y.segment(k * nx, nx);
    out.segment(k * nx, nx).noalias() -= e.Dinv[k] * w.segment(k * nx, nx);
  }
}

template <typename S>
int BatchSolver<S>::solve_pcg(Entry& e, S tol) {
  // r = rhs - M lam was computed by the caller (with z = P^-1 r).
  const S floor = std::is_same<S, float>::value ? S(1e-6) : S(1e-12);
  S rz = e.r.dot(e.z);
  const S rz0 = std::abs(rz);
  if (rz0 < floor) return 0;
  e.p = e.z;
  int it = 0;
  while (it < set_.max_pcg_iters) {
    matvec(e, e.p, e.Mp);
    const S pMp = e.p.dot(e.Mp);
    if (!(pMp > 0)) break;  // lost positive definiteness numerically: keep lam
    const S alpha = rz / pMp;
    e.lam.noalias() += alpha * e.p;
    e.r.noalias() -= alpha * e.Mp;
    precondition(e, e.r, e.z);
    const S rz_new = e.r.dot(e.z);
    ++it;
    if (std::abs(rz_new) < floor + tol * rz0) break;
    e.p = e.z + (rz_new / rz) * e.p;
    rz = rz_new;
  }
  return it;
}

// Block Cholesky of M (block Thomas), forward and back substitution.
template <typename S>
bool BatchSolver<S>::solve_bdsv(Entry& e) {
  const int nx = nx_;
  for (int k = 0; k < N_; ++k) {
    e.tmp_nxnx = e.Md[k];
    if (k > 0) {
      // E_k = M_{k,k-1} L_{k-1}^-T, with M_{k,k-1} = -phi_{k-1}.
      e.E[k] = -e.phi[k - 1].transpose();
      e.Lc[k - 1].template triangularView<Eigen::Lower>().solveInPlace(e.E[k]);
      e.E[k].transposeInPlace();
      e.tmp_nxnx.noalias() -= e.E[k] * e.E[k].transpose();
    }
    e.llt_nx.compute(e.tmp_nxnx);
    if (e.llt_nx.info() != Eigen::Success) return false;
    e.Lc[k] = e.llt_nx.matrixLLT().template triangularView<Eigen::Lower>();
  }
  // Forward: y_k = L_k^-1 (rhs_k - E_k y_{k-1}).
  for (int k = 0; k < N_; ++k) {
    auto yk = e.y.segment(k * nx, nx);
    yk = e.rhs.segment(k * nx, nx);
    if (k > 0) yk.noalias() -= e.E[k] * e.y.segment((k - 1) * nx, nx);
    e.Lc[k].template triangularView<Eigen::Lower>().solveInPlace(yk);
  }
  // Back: lam_k = L_k^-T (y_k - E_{k+1}^T lam_{k+1}).
  for (int k = N_ - 1; k >= 0; --k) {
    auto lk = e.w.segment(k * nx, nx);
    lk = e.y.segment(k * nx, nx);
    if (k < N_ - 1) lk.noalias() -= e.E[k + 1].transpose() * e.w.segment((k + 1) * nx, nx);
    e.Lc[k].transpose().template triangularView<Eigen::Upper>().solveInPlace(lk);
  }
  if (!e.w.allFinite()) return false;
  e.lam = e.w;
  return true;
}

template <typename S>
void BatchSolver<S>::recover_step(Entry& e) {
  const int nx = nx_, nu = nu_;
  for (int k = 0; k < N_; ++k) {
    e.t_nx = e.qv[k] - e.blk(e.lam, k);
    if (k < N_ - 1) e.t_nx.noalias() += e.A[k].transpose() * e.blk(e.lam, k + 1);
    e.apply_Qinv(k, e.t_nx, e.t_nx2);
    // Knot 0 is data: take dx_0 = -c_0 from the constraint row itself, so an
    // inexact (PCG) dual cannot move the plan off the measured state.
    if (k == 0) {
      e.dz.head(nx) = -e.c[0];
    } else {
      e.dz.segment(k * (nx + nu), nx) = -e.t_nx2;
    }
    if (k < N_ - 1) {
      e.t_nu = e.rv[k];
      e.t_nu.noalias() += e.Bm[k].transpose() * e.blk(e.lam, k + 1);
      e.dz.segment(k * (nx + nu) + nx, nu).noalias() = -(e.Rinv[k] * e.t_nu);
    }
  }
}

template <typename S>
S BatchSolver<S>::trial_merit(Entry& e, S alpha) {
  const int nx = nx_, nu = nu_;
  e.trial = e.xu;
  e.trial.noalias() += alpha * e.dz;
  S cost = 0, defect = 0;
  for (int k = 0; k < N_; ++k) {
    const S* x = e.trial.data() + k * (nx + nu);
    const S* u = k < N_ - 1 ? x + nx : nullptr;
    cost += stage_cost_value(e, k, x, u);
    if (u) {
      dynamics_step(*plant_, *e.ws, e.dyn, set_.integrator, dt_, x, u, fext_ptr(e.b, k),
                    e.xnext.data());
      defect += (Eigen::Map<const Vec>(x + nx + nu, nx) - e.xnext).template lpNorm<1>();
    }
  }
  defect += (Eigen::Map<const Vec>(e.trial.data(), nx) - Eigen::Map<const Vec>(e.xs, nx))
                .template lpNorm<1>();
  const S m = cost + e.mu * defect;
  return std::isfinite(double(m)) ? m : std::numeric_limits<S>::infinity();
}

template <typename S>
void BatchSolver<S>::iterate(Entry& e, int it) {
  auto t0 = Clock::now();
  e.merit0 = setup_kkt(e);
  if (it == 0) e.merit_initial = e.merit0;
  e.iters = it + 1;
  e.t_kkt += us_since(t0);
  if (!std::isfinite(double(e.merit0))) {  // diverged: nothing sensible to step from
    e.stopped = true;
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    return;
  }
  auto t1 = Clock::now();
  bool ok = factor_schur(e);
  e.t_schur += us_since(t1);
  auto t2 = Clock::now();
  LinSys mode = set_.linsys;
  if (mode == LinSys::kBdsvFirst) mode = it == 0 ? LinSys::kBdsv : LinSys::kPcg;
  e.last_linsys = mode;
  int pcg_it = 0;
  if (ok) {
    // Residual of the warm dual: the convergence test on every path.
    matvec(e, e.lam, e.Mp);
    e.r = e.rhs - e.Mp;
    precondition(e, e.r, e.z);
    const S floor = std::is_same<S, float>::value ? S(1e-6) : S(1e-12);
    e.converged = std::abs(e.r.dot(e.z)) < floor;
    if (mode == LinSys::kPcg) {
      pcg_it = solve_pcg(e, e.pcg_tol);
    } else if (!e.converged) {
      ok = solve_bdsv(e);
    }
  }
  e.pcg_iters[it] = pcg_it;
  e.linsys_us[it] = us_since(t2);
  e.t_lin += e.linsys_us[it];
  auto t3 = Clock::now();
  if (!ok) {
    // Not positive definite: keep z and lam, regularize harder.
    e.rho = std::min(e.rho * S(100), S(kRhoMax));
    e.step_size[it] = -1;
    e.min_merit[it] = double(e.merit0);
    e.merit_final = e.merit0;
    e.converged = false;
    e.t_ls += us_since(t3);
    return;
  }
  recover_step(e);
  S best = std::numeric_limits<S>::infinity();
  S best_alpha = 0;
  S alpha = 1;
  for (int i = 0; i < kLineSearchSteps; ++i, alpha *= S(0.5)) {
    const S m = trial_merit(e, alpha);
    if (m < best) {  // strict: ties keep the larger alpha
      best = m;
      best_alpha = alpha;
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
  e.t_ls += us_since(t3);
}

template <typename S>
void BatchSolver<S>::solve(const S* x_s, const S* ref, S* xu, double budget_s) {
  const auto t_start = Clock::now();
  const int iters_max = set_.max_sqp_iters;
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    e.x(0) = Eigen::Map<const Vec>(e.xs, nx_);  // the measured state is knot 0
    e.drho = 1;
    e.converged = e.stopped = false;
    e.iters = 0;
    e.t_kkt = e.t_schur = e.t_lin = e.t_ls = 0;
    std::fill(e.pcg_iters.begin(), e.pcg_iters.end(), 0);
    std::fill(e.min_merit.begin(), e.min_merit.end(), 0.0);
    std::fill(e.step_size.begin(), e.step_size.end(), 0.0);
    std::fill(e.linsys_us.begin(), e.linsys_us.end(), 0.0);
  }
  const bool budgeted = budget_s > 0;
  const double budget_us = budget_s * 1e6;
  stats_.budget_hit = false;
  stats_.linsys_used.assign(iters_max, char(set_.linsys));
  std::vector<double>& iter_us = stats_.linsys_time_us;  // reused below for iteration times
  iter_us.assign(iters_max, 0.0);
  std::vector<double> this_iter_us(iters_max, -1.0);
  const int need = std::max(1, int(std::ceil(set_.solve_ratio * B_ - 1e-9)));
  int it = 0;
  for (; it < iters_max; ++it) {
    if (budgeted && it > 0) {
      double pred = prev_iter_us_[it];
      if (pred < 0) pred = *std::max_element(this_iter_us.begin(), this_iter_us.begin() + it);
      if (us_since(t_start) + pred > budget_us) {
        stats_.budget_hit = true;
        break;
      }
    }
    const auto t_it = Clock::now();
    int active = 0;
    auto body = [&](int b) {
      Entry& e = *entries_[b];
      if (e.converged || e.stopped) return;
      iterate(e, it);
    };
    for (auto& e : entries_) active += !(e->converged || e->stopped);
    if (active == 0) break;
    pool_.run(B_, body);
    this_iter_us[it] = us_since(t_it);
    stats_.linsys_used[it] = char(entries_[0]->last_linsys);
    int n_conv = 0;
    for (auto& e : entries_) n_conv += e->converged;
    if (n_conv >= need) {
      ++it;
      break;
    }
  }
  const int run = it;
  if (budgeted) {
    for (int i = 0; i < iters_max; ++i) prev_iter_us_[i] = i < run ? this_iter_us[i] : -1.0;
  }
  // Results and statistics.
  stats_.iters_run = run;
  stats_.sqp_iters.assign(B_, 0);
  stats_.converged.assign(B_, 0);
  stats_.initial_merit.assign(B_, 0);
  stats_.final_merit.assign(B_, 0);
  stats_.pcg_iters.assign(size_t(B_) * iters_max, 0);
  stats_.min_merit.assign(size_t(B_) * iters_max, 0);
  stats_.step_size.assign(size_t(B_) * iters_max, 0);
  stats_.t_kkt_us = stats_.t_schur_us = stats_.t_linsys_us = stats_.t_linesearch_us = 0;
  for (int i = 0; i < iters_max; ++i) iter_us[i] = 0;
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
      iter_us[i] = std::max(iter_us[i], e.linsys_us[i]);
    }
    stats_.t_kkt_us += e.t_kkt;
    stats_.t_schur_us += e.t_schur;
    stats_.t_linsys_us += e.t_lin;
    stats_.t_linesearch_us += e.t_ls;
  }
  stats_.solve_time_us = long(us_since(t_start));
}

template <typename S>
void BatchSolver<S>::debug_setup_kkt(const S* xu, const S* x_s, const S* ref, S* Q, S* R, S* q,
                                     S* r, S* A, S* Bm, S* c) {
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

template <typename S>
void BatchSolver<S>::merit(const S* xu, const S* x_s, const S* ref, S* out) {
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    e.xs = x_s + size_t(b) * nx_;
    e.ref = ref + size_t(b) * 6 * N_;
    e.xu = Eigen::Map<const Vec>(xu + size_t(b) * L_, L_);
    e.dz.setZero();
    out[b] = trial_merit(e, S(0));
  }
}

template <typename S>
void BatchSolver<S>::get_lambda(S* out) const {
  for (int b = 0; b < B_; ++b) Eigen::Map<Vec>(out + size_t(b) * N_ * nx_, N_ * nx_) = entries_[b]->lam;
}

template <typename S>
void BatchSolver<S>::sim_forward(const S* x, const S* u, S h, S* out) {
  for (int b = 0; b < B_; ++b) {
    Entry& e = *entries_[b];
    dynamics_step(*plant_, *e.ws, e.dyn, set_.integrator, h, x + size_t(b) * nx_,
                  u + size_t(b) * nu_, fext_ptr(b, 0), out + size_t(b) * nx_);
  }
}

}  // namespace gato
