// The batch side of the CUDA backend, shared by the host driver (gato._cuda_host) and
// the GPU driver (gato._cuda): settings, per-entry parameters (rho, mu, pcg_tol, drho),
// the warm dual, the external-wrench band and the batch loop of docs/solver_method.md
// step 6 (iteration cap, solve_ratio stopping rule, wall-clock budget) with the
// statistics of gato::SolveStats, and the feedback gains of a solved row (sqp_gains.hpp).
// Where the per-entry iterations and gains run is the subclass's:
// HostBatch (below) calls sqp_iterate on the CPU, one entry after another; DeviceBatch
// (kernels.cu) launches one kernel per SQP iteration with one CUDA thread per entry.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gato/plant.hpp"
#include "gato/solver.hpp"
#include "gato/types.hpp"
#include "gato_cuda/sqp.hpp"
#include "gato_cuda/sqp_gains.hpp"
#include "model_export.hpp"

namespace gato {
namespace cuda {

template <typename S>
class BatchCore {
 public:
  BatchCore(const std::string& urdf, const std::string& ee_frame, int B, int N, double dt, const Settings& s)
      : plant_(std::make_unique<Plant<S>>(urdf, ee_frame)), B_(B) {
    if (B < 1) throw std::invalid_argument("batch_size: must be >= 1, got " + std::to_string(B));
    if (N < 2) throw std::invalid_argument("N: the horizon needs at least 2 knots, got " + std::to_string(N));
    if (!(dt > 0) || !std::isfinite(dt)) throw std::invalid_argument("dt: must be a finite number > 0");
    P_.model = export_model(*plant_);
    const int nv = P_.model.n;
    P_.N = N;
    P_.nv = nv;
    P_.nx = 2 * nv;
    P_.nu = nv;
    P_.L = N * 2 * nv + (N - 1) * nv;
    P_.dt = S(dt);
    P_.u_prox = S(std::is_same<S, float>::value ? kZeroControlProx32 : kZeroControlProx64);
    P_.pcg_floor = std::is_same<S, float>::value ? S(1e-6) : S(1e-12);
    for (int j = 0; j < nv; ++j) {
      const S m = S(kLimitMargin);
      P_.lo_q[j] = P_.model.q_lo[j] + m;
      P_.hi_q[j] = P_.model.q_hi[j] - m;
      P_.max_qd[j] = P_.model.qd_max[j] - m;
      P_.max_u[j] = P_.model.u_max[j] - m;
    }
    st_.assign(B, SqpEntryState<S>{});
    rho_reset_.assign(B, s.rho);
    drho_reset_.assign(B, 1.2);
    lam_.assign(size_t(B) * N * P_.nx, S(0));
    set_settings(s);
    for (int b = 0; b < B; ++b) {
      st_[b].mu = S(s.mu);
      st_[b].pcg_tol = S(s.pcg_tol);
    }
    reset_rho();
  }
  virtual ~BatchCore() = default;

  const Plant<S>& plant() const { return *plant_; }
  int batch() const { return B_; }
  int N() const { return P_.N; }
  int nv() const { return P_.nv; }
  int xu_size() const { return P_.L; }
  const Settings& settings() const { return set_; }
  const SolveStats& stats() const { return stats_; }

  void set_settings(const Settings& s) {
    if (s.max_sqp_iters < 1) throw std::invalid_argument("max_sqp_iters: must be >= 1");
    const double old_rho = set_.rho;
    const bool first = !configured_;
    set_ = s;
    configured_ = true;
    P_.max_pcg_iters = s.max_pcg_iters;
    P_.linsys = int(s.linsys);
    P_.integrator = int(s.integrator);
    P_.line_search = int(s.line_search);
    P_.adapt_rho = s.adapt_rho ? 1 : 0;
    P_.q_cost = s.q_cost;
    P_.qd_cost = s.qd_cost;
    P_.u_cost = s.u_cost;
    P_.N_cost = s.N_cost;
    P_.q_lim_cost = s.q_lim_cost;
    P_.vel_lim_cost = s.vel_lim_cost;
    P_.ctrl_lim_cost = s.ctrl_lim_cost;
    P_.u_ref_gravity = s.u_ref == URef::kGravity ? 1 : 0;
    P_.rot_cost = s.rot_cost;
    P_.N_rot_cost = s.N_rot_cost;
    update_rot_on();
    if (!first) {
      for (auto& e : st_) {
        e.mu = S(s.mu);
        e.pcg_tol = S(s.pcg_tol);
      }
      for (auto& r : rho_reset_)
        if (r == old_rho) r = s.rho;
    }
    prev_iter_us_.assign(s.max_sqp_iters, -1.0);
    this_iter_us_.assign(s.max_sqp_iters, -1.0);
    const size_t BI = size_t(B_) * s.max_sqp_iters;
    pcg_iters_.assign(BI, 0);
    min_merit_.assign(BI, S(0));
    step_size_.assign(BI, S(0));
    estats_.assign(B_, SqpEntryStats<S>{});
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
  void set_linsys(LinSys l) {
    set_.linsys = l;
    P_.linsys = int(l);
  }
  void set_rho_batch(const std::vector<double>& v) {
    for (int b = 0; b < B_; ++b) rho_reset_[b] = v.empty() ? set_.rho : v[b];
    reset_rho();
  }
  void set_mu_batch(const std::vector<double>& v) {
    for (int b = 0; b < B_; ++b) st_[b].mu = S(v.empty() ? set_.mu : v[b]);
  }
  void set_pcg_tol_batch(const std::vector<double>& v) {
    for (int b = 0; b < B_; ++b) st_[b].pcg_tol = S(v.empty() ? set_.pcg_tol : v[b]);
  }
  void set_drho_batch(const std::vector<double>& v, bool as_reset_default) {
    for (int b = 0; b < B_; ++b) {
      const double f = v.empty() ? 1.2 : v[b];
      st_[b].drho_factor = S(f);
      if (as_reset_default) drho_reset_[b] = f;
    }
  }
  void reset_rho() {
    for (int b = 0; b < B_; ++b) {
      st_[b].rho = S(rho_reset_[b]);
      st_[b].drho_factor = S(drho_reset_[b]);
    }
  }
  void reset_dual() { std::fill(lam_.begin(), lam_.end(), S(0)); }
  double rho(int b) const { return double(st_[b].rho); }
  void set_knot_weights(const std::vector<double>& w) { knot_w_ = w; }
  /// The EE orientation term's per-axis factors (3, tool frame) and per-knot weights (N, or
  /// empty: rot_cost / N_rot_cost); the CPU backend's setters and errors (solver_impl.hpp).
  void set_rot_axis_weights(const std::vector<double>& w) {
    if (w.size() != 3) throw std::invalid_argument("rot_axis_weights: expected 3 numbers");
    for (int a = 0; a < 3; ++a) P_.rot_axis[a] = w[a];
  }
  void set_rot_knot_weights(const std::vector<double>& w) {
    if (!w.empty() && int(w.size()) != P_.N) throw std::invalid_argument("rot_knot_weights: expected N numbers");
    rot_knot_w_ = w;
    update_rot_on();
  }
  void set_u_cost_vec(const std::vector<double>& w) {
    P_.has_u_vec = !w.empty();
    for (int j = 0; j < P_.nv && !w.empty(); ++j) P_.u_vec[j] = w[j];
  }
  void set_q_pos_cost(const std::vector<double>& w) {
    for (int j = 0; j < P_.nv; ++j) P_.q_pos_w[j] = w.empty() ? 0.0 : w[j];
  }
  void set_q_nom(const std::vector<double>& q) {
    for (int j = 0; j < P_.nv; ++j) P_.q_nom[j] = q.empty() ? 0.0 : q[j];
  }
  /// fext: empty (none) or B x N x nbodies x 6.
  void set_fext(const std::vector<S>& f) {
    fext_ = f;
    P_.has_fext = !f.empty();
  }
  bool has_fext() const { return P_.has_fext != 0; }
  const std::vector<S>& lambda() const { return lam_; }

  /// Merit (cost + mu |defects|_1) of each entry's xu (B x L) at xs, ref; on the host with
  /// the same code the iterations run (sqp.hpp trial_merit at alpha = 0).
  void merit(const S* xu, const S* xs, const S* ref, S* out) {
    const SqpShared<S> P = host_shared();
    std::vector<S> work(size_t(work_size<S>(P.N, P.nv)), S(0)), x(P.L);
    for (int b = 0; b < B_; ++b) {
      SqpEntry<S> e{};
      e.xs = xs + size_t(b) * P.nx;
      e.ref = ref + size_t(b) * 6 * P.N;
      e.fext = P.has_fext ? fext_.data() + size_t(b) * P.N * 6 * P.nv : nullptr;
      std::copy(xu + size_t(b) * P.L, xu + size_t(b + 1) * P.L, x.begin());
      e.xu = x.data();
      e.st = &st_[b];
      carve(e.w, work.data(), P.N, P.nv);
      std::fill(e.w.dz, e.w.dz + P.L, S(0));
      out[b] = trial_merit(P, e, S(0));
    }
  }
  /// One integrator step per entry: x (B x nx), u (B x nu) -> out (B x nx), knot 0's wrench.
  void sim_forward(const S* x, const S* u, S h, S* out) const {
    const int nv = P_.nv, nx = P_.nx;
    const S c2 = P_.integrator == 0 ? h * h / S(2) : h * h;
    FdScratch<S> fs;
    S qdd[kMaxBodies];
    for (int b = 0; b < B_; ++b) {
      const S* xb = x + size_t(b) * nx;
      const S* fx = P_.has_fext ? fext_.data() + size_t(b) * P_.N * 6 * nv : nullptr;
      S* o = out + size_t(b) * nx;
      if (P_.integrator == 2) {
        if (!rk4_value(P_.model, fs, h, xb, u + size_t(b) * nv, fx, o, static_cast<S*>(nullptr)))
          throw std::invalid_argument("x: the joint-space inertia is not positive definite");
        continue;
      }
      if (!forward_dynamics(P_.model, fs, xb, xb + nv, u + size_t(b) * nv, fx, qdd, static_cast<S*>(nullptr)))
        throw std::invalid_argument("x: the joint-space inertia is not positive definite");
      for (int i = 0; i < nv; ++i) {
        o[i] = xb[i] + h * xb[nv + i] + c2 * qdd[i];
        o[nv + i] = xb[nv + i] + h * qdd[i];
      }
    }
  }
  /// World position (3) of frame fid (-1: the EE) at q, from the plant (host kinematics).
  void frame_position(const S* q, S* p, int fid) const {
    if (!ws_) ws_ = plant_->make_workspace();
    plant_->frame_position(*ws_, q, p, fid);
  }

  /// The feedback gains of row b's plan xu (L) from xs (nx) toward ref (6N) with the current
  /// weights and the row's wrench band (docs/solver_method.md, "Feedback gains"; sqp_gains.hpp
  /// riccati_gains, run where the subclass runs its iterations): K ((N-1) x nu x nx).
  /// Returns riccati_gains' code: -1 on success, the knot of a Quu that is not positive
  /// definite, or kGainsNotFinite. The solver's state (dual, rho) is untouched.
  int feedback_gains(int b, const S* xu, const S* xs, const S* ref, S* K) {
    if (b < 0 || b >= B_) throw std::invalid_argument("feedback_gains: row out of range");
    return gains(b, xu, xs, ref, K);
  }

  /// Step 1's blocks (sqp_kkt.hpp setup_kkt, run on the host: the code the kernels run) of each
  /// entry's xu (B x L) at xs, ref, in the CPU backend's debug_setup_kkt layout (row-major):
  /// Q (B N nx nx) = [[Qpp, 0], [0, diag(qvv)]], R (B (N-1) nu nu) = diag(Rd), q (B N nx),
  /// r (B (N-1) nu), A (B (N-1) nx nx), Bm (B (N-1) nx nu), c (B N nx), Suq (B (N-1) nu nx:
  /// the u_ref = gravity cross block on the positions, zero otherwise). For the tests.
  void debug_setup_kkt(const S* xu, const S* xs, const S* ref, S* Q, S* R, S* q, S* r, S* A, S* Bm, S* c,
                       S* Suq) {
    const SqpShared<S> P = host_shared();
    const int N = P.N, nv = P.nv, nx = P.nx, nu = P.nu;
    std::vector<S> work(size_t(work_size<S>(N, nv)), S(0)), x(P.L);
    for (int b = 0; b < B_; ++b) {
      SqpEntry<S> e{};
      e.xs = xs + size_t(b) * nx;
      e.ref = ref + size_t(b) * 6 * N;
      e.fext = row_fext(b);
      std::copy(xu + size_t(b) * P.L, xu + size_t(b + 1) * P.L, x.begin());
      e.xu = x.data();
      e.st = &st_[b];
      carve(e.w, work.data(), N, nv);
      std::fill(work.begin(), work.end(), S(0));
      setup_kkt(P, e);
      const SqpWork<S>& w = e.w;
      for (int k = 0; k < N; ++k) {
        S* Qk = Q + (size_t(b) * N + k) * nx * nx;
        for (int i = 0; i < nx * nx; ++i) Qk[i] = S(0);
        for (int i = 0; i < nv; ++i) {
          for (int j = 0; j < nv; ++j) Qk[i * nx + j] = w.Qpp[(k * nv + i) * nv + j];
          Qk[(nv + i) * nx + nv + i] = w.qvv[k * nv + i];
        }
        for (int i = 0; i < nx; ++i) {
          q[(size_t(b) * N + k) * nx + i] = w.qg[k * nx + i];
          c[(size_t(b) * N + k) * nx + i] = w.c[k * nx + i];
        }
        if (k == N - 1) continue;
        const size_t kk = size_t(b) * (N - 1) + k;
        for (int i = 0; i < nu; ++i) {
          for (int j = 0; j < nu; ++j) R[(kk * nu + i) * nu + j] = i == j ? w.Rd[k * nu + i] : S(0);
          r[kk * nu + i] = w.rg[k * nu + i];
          for (int j = 0; j < nx; ++j) Suq[(kk * nu + i) * nx + j] = P.u_ref_gravity && j < nv ? w.Suq[(k * nu + i) * nv + j] : S(0);
        }
        for (int i = 0; i < nx * nx; ++i) A[kk * nx * nx + i] = w.A[k * nx * nx + i];
        for (int i = 0; i < nx * nu; ++i) Bm[kk * nx * nu + i] = w.Bm[k * nx * nu + i];
      }
    }
  }

  /// The batch loop: xs (B x nx), ref (B x 6N), xu (B x L, in/out); budget_s > 0 stops
  /// before an iteration predicted to overrun it.
  void solve(const S* xs, const S* ref, S* xu, double budget_s) {
    using Clock = std::chrono::steady_clock;
    auto us_since = [](Clock::time_point t) {
      return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
    };
    const auto t0 = Clock::now();
    const int I = set_.max_sqp_iters, nx = P_.nx, L = P_.L;
    for (int b = 0; b < B_; ++b) {
      S* x = xu + size_t(b) * L;
      for (int i = 0; i < nx; ++i) x[i] = xs[size_t(b) * nx + i];  // knot 0 is the measured state
      st_[b].drho = S(1);
      estats_[b] = SqpEntryStats<S>{0, 0, 0, S(0), S(0)};
    }
    std::fill(pcg_iters_.begin(), pcg_iters_.end(), 0);
    std::fill(min_merit_.begin(), min_merit_.end(), S(0));
    std::fill(step_size_.begin(), step_size_.end(), S(0));
    std::fill(this_iter_us_.begin(), this_iter_us_.end(), -1.0);
    shared_ = host_shared();
    begin(xs, ref, xu);
    const bool budgeted = budget_s > 0;
    stats_.budget_hit = false;
    const int need = std::max(1, int(std::ceil(set_.solve_ratio * B_ - 1e-9)));
    int it = 0;
    for (; it < I; ++it) {
      if (budgeted && it > 0) {
        double pred = prev_iter_us_[it];
        if (pred < 0) pred = *std::max_element(this_iter_us_.begin(), this_iter_us_.begin() + it);
        if (us_since(t0) + pred > budget_s * 1e6) {
          stats_.budget_hit = true;
          break;
        }
      }
      int active = 0;
      for (const auto& e : estats_) active += !(e.converged || e.stopped);
      if (active == 0) break;
      const auto t_it = Clock::now();
      iterate(it);  // every entry that has neither converged nor stopped; estats_ current after
      this_iter_us_[it] = us_since(t_it);
      stats_.linsys_used[it] = char(set_.linsys == LinSys::kBdsvFirst ? (it == 0 ? LinSys::kBdsv : LinSys::kPcg)
                                                                       : set_.linsys);
      stats_.linsys_time_us[it] = this_iter_us_[it];
      int n_conv = 0;
      for (const auto& e : estats_) n_conv += e.converged;
      if (n_conv >= need) {
        ++it;
        break;
      }
    }
    const int run = it;
    finish(xu);
    if (budgeted)
      for (int i = 0; i < I; ++i) prev_iter_us_[i] = i < run ? this_iter_us_[i] : -1.0;
    stats_.iters_run = run;
    for (int b = 0; b < B_; ++b) {
      const auto& e = estats_[b];
      stats_.sqp_iters[b] = e.iters;
      stats_.converged[b] = char(e.converged);
      stats_.initial_merit[b] = double(e.merit_initial);
      stats_.final_merit[b] = double(e.merit_final);
      for (int i = 0; i < I; ++i) {
        const size_t o = size_t(b) * I + i;
        stats_.pcg_iters[o] = pcg_iters_[o];
        stats_.min_merit[o] = double(min_merit_[o]);
        stats_.step_size[o] = double(step_size_[o]);
      }
    }
    stats_.solve_time_us = long(us_since(t0));
  }

 protected:
  /// Make the inputs and the per-entry state visible where the iterations run.
  virtual void begin(const S* xs, const S* ref, const S* xu) = 0;
  /// One SQP iteration of every active entry; estats_ must be current afterwards.
  virtual void iterate(int it) = 0;
  /// Bring xu (B x L), lam_, st_ and the per-iteration statistics back to the host.
  virtual void finish(S* xu) = 0;
  /// riccati_gains of one plan (feedback_gains' arguments, b in range).
  virtual int gains(int b, const S* xu, const S* xs, const S* ref, S* K) = 0;

  /// The configuration with the current weights, knot_w and rot_knot_w on the host.
  SqpShared<S> host_shared() const {
    SqpShared<S> P = P_;
    P.knot_w = knot_w_.empty() ? nullptr : knot_w_.data();
    P.rot_knot_w = rot_knot_w_.empty() ? nullptr : rot_knot_w_.data();
    return P;
  }
  /// P_.rot_on: some knot has an orientation weight > 0 (the CPU's CostModel::rot_on).
  void update_rot_on() {
    bool on = false;
    if (!rot_knot_w_.empty()) {
      for (double w : rot_knot_w_) on = on || w > 0;
    } else {
      on = P_.rot_cost > 0 || P_.N_rot_cost > 0;
    }
    P_.rot_on = on ? 1 : 0;
  }
  /// Row b's wrench band (N x 6 nv) on the host, or null.
  const S* row_fext(int b) const { return P_.has_fext ? fext_.data() + size_t(b) * P_.N * 6 * P_.nv : nullptr; }

  std::unique_ptr<Plant<S>> plant_;
  mutable std::unique_ptr<PlantWorkspace<S>> ws_;
  int B_;
  SqpShared<S> P_;       // configuration (host)
  SqpShared<S> shared_;  // what the running solve uses (knot_w resolved by the subclass)
  Settings set_;
  bool configured_ = false;
  std::vector<double> knot_w_, rot_knot_w_;
  std::vector<SqpEntryState<S>> st_;
  std::vector<double> rho_reset_, drho_reset_;
  std::vector<S> lam_, fext_;
  std::vector<SqpEntryStats<S>> estats_;
  std::vector<int> pcg_iters_;
  std::vector<S> min_merit_, step_size_;
  std::vector<double> prev_iter_us_, this_iter_us_;
  SolveStats stats_;
};

/// The host driver: the same per-entry iteration, on the CPU, one entry after another.
template <typename S>
class HostBatch final : public BatchCore<S> {
 public:
  using BatchCore<S>::BatchCore;
  static constexpr bool kOnHost = true;  // debug_setup_kkt shows where the iterations run

 protected:
  void begin(const S* xs, const S* ref, const S* xu) override {
    xs_ = xs;
    ref_ = ref;
    xu_ = const_cast<S*>(xu);
    work_.resize(size_t(work_size<S>(this->P_.N, this->P_.nv)));
  }
  void iterate(int it) override {
    const auto& P = this->shared_;
    const int I = this->set_.max_sqp_iters;
    for (int b = 0; b < this->B_; ++b) {
      auto& es = this->estats_[b];
      if (es.converged || es.stopped) continue;
      SqpEntry<S> e;
      e.xs = xs_ + size_t(b) * P.nx;
      e.ref = ref_ + size_t(b) * 6 * P.N;
      e.fext = P.has_fext ? this->fext_.data() + size_t(b) * P.N * 6 * P.nv : nullptr;
      e.xu = xu_ + size_t(b) * P.L;
      e.lam = this->lam_.data() + size_t(b) * P.N * P.nx;
      e.st = &this->st_[b];
      e.stats = &es;
      e.pcg_iters = this->pcg_iters_.data() + size_t(b) * I;
      e.min_merit = this->min_merit_.data() + size_t(b) * I;
      e.step_size = this->step_size_.data() + size_t(b) * I;
      carve(e.w, work_.data(), P.N, P.nv);
      sqp_iterate(P, e, it);
    }
  }
  void finish(S*) override {}
  int gains(int b, const S* xu, const S* xs, const S* ref, S* K) override {
    const SqpShared<S> P = this->host_shared();
    work_.resize(size_t(work_size<S>(P.N, P.nv)));
    plan_.assign(xu, xu + P.L);  // SqpEntry::xu is writable; riccati_gains only reads it
    SqpEntry<S> e{};
    e.xs = xs;
    e.ref = ref;
    e.fext = this->row_fext(b);
    e.xu = plan_.data();
    carve(e.w, work_.data(), P.N, P.nv);
    return riccati_gains(P, e, K);
  }

 private:
  const S* xs_ = nullptr;
  const S* ref_ = nullptr;
  S* xu_ = nullptr;
  std::vector<S> work_, plan_;
};

}  // namespace cuda
}  // namespace gato
