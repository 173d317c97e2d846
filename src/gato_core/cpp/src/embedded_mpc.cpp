// EmbeddedMpc: see include/gato/embedded_mpc.hpp.
#include "gato/embedded_mpc.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "gato/solver.hpp"

namespace gato {

EmbeddedMpc::EmbeddedMpc(std::shared_ptr<const Plant<double>> plant, const EmbeddedMpcConfig& c)
    : plant_(std::move(plant)), N_(c.N), nv_(0), warmup_(c.warmup_solves), dt_(c.dt) {
  if (!plant_) throw std::invalid_argument("EmbeddedMpc: plant is null");
  if (c.N < 2) throw std::invalid_argument("N: must be >= 2, got " + std::to_string(c.N));
  if (!(std::isfinite(c.dt) && c.dt > 0.0)) throw std::invalid_argument("dt: must be > 0 s");
  if (c.warmup_solves < 0) throw std::invalid_argument("warmup_solves: must be >= 0");
  nv_ = plant_->nv();
  solver_ = BatchSolver<double>::create(plant_, 1, c.N, c.dt, c.settings, c.threads);
  ws_ = plant_->make_workspace();
  xu_.assign(size_t(solver_->xu_size()), 0.0);
  ref_.assign(size_t(6 * N_), 0.0);
  hold_ee_.assign(3, 0.0);
  x_.assign(size_t(2 * nv_), 0.0);
  K_.assign(size_t(N_ - 1) * size_t(nv_) * size_t(2 * nv_), 0.0);
}

EmbeddedMpc::~EmbeddedMpc() = default;

int EmbeddedMpc::xu_size() const { return solver_->xu_size(); }
const SolveStats& EmbeddedMpc::stats() const { return solver_->stats(); }

void EmbeddedMpc::set_settings(const Settings& s) { solver_->set_settings(s); }

void EmbeddedMpc::reset() { cold_ = true; }

void EmbeddedMpc::sample_reference(std::int64_t stamp_ns, const EeWindow* w) {
  for (int k = 0; k < N_; ++k) {
    double* r = ref_.data() + size_t(6 * k);
    r[3] = r[4] = r[5] = 0.0;  // the orientation slots of the reference layout (unused)
    if (!w || w->n_knots < 1) {
      std::copy_n(hold_ee_.begin(), 3, r);
      continue;
    }
    // Knot index in integer ns (ReferenceWindow.sample): (offset + k dt) / knot_dt, clamped.
    const std::int64_t dt_ns = std::llround(dt_ * 1e9), kdt_ns = std::llround(w->knot_dt * 1e9);
    const std::int64_t num = (stamp_ns - w->stamp_ns) + std::int64_t(k) * dt_ns;
    std::int64_t idx = kdt_ns > 0 ? (num >= 0 ? num / kdt_ns : -((-num + kdt_ns - 1) / kdt_ns)) : 0;
    idx = std::clamp<std::int64_t>(idx, 0, w->n_knots - 1);
    const double frac = (num >= 0 && idx < w->n_knots - 1) ? double(num - idx * kdt_ns) / double(kdt_ns) : 0.0;
    const std::int64_t nxt = std::min<std::int64_t>(idx + 1, w->n_knots - 1);
    const double* a = w->p.data() + size_t(3 * idx);
    const double* b = w->p.data() + size_t(3 * nxt);
    for (int i = 0; i < 3; ++i) r[i] = frac == 0.0 ? a[i] : a[i] + frac * (b[i] - a[i]);
  }
}

bool EmbeddedMpc::step(std::int64_t stamp_ns, const double* x, const EeWindow* ref, ExecutorPlan& out) {
  const int nx = 2 * nv_, nu = nv_, stride = nx + nu, L = solver_->xu_size();
  std::copy_n(x, nx, x_.begin());
  const bool cold = cold_;
  if (cold) {
    // Hold warm start: every knot the measured state, zero torques.
    for (int k = 0; k < N_; ++k) {
      std::copy_n(x, nx, xu_.begin() + size_t(k) * stride);
      if (k < N_ - 1) std::fill_n(xu_.begin() + size_t(k) * stride + nx, nu, 0.0);
    }
    plant_->frame_position(*ws_, x, hold_ee_.data(), -1);
    solver_->reset_rho();
    solver_->reset_dual();
  } else {
    // Shift the previous solution by the elapsed whole knots (the last knot repeated).
    const long shift = std::clamp<long>(std::lround(double(stamp_ns - last_stamp_) * 1e-9 / dt_), 0, N_ - 1);
    if (shift > 0) {
      const size_t off = size_t(shift) * stride;
      std::copy(xu_.begin() + off, xu_.end(), xu_.begin());
      const int kx = N_ - 1 - int(shift), ku = N_ - 2 - int(shift);  // last valid state / torque
      for (int k = N_ - int(shift); k < N_; ++k) {
        std::copy_n(xu_.begin() + size_t(kx) * stride, nx, xu_.begin() + size_t(k) * stride);
        if (k - 1 >= 0 && k - 1 > ku) {  // the torque before knot k
          double* u = xu_.data() + size_t(k - 1) * stride + nx;
          if (ku >= 0) std::copy_n(xu_.begin() + size_t(ku) * stride + nx, nu, u);
          else std::fill_n(u, nu, 0.0);
        }
      }
    }
  }
  sample_reference(stamp_ns, ref);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < (cold ? warmup_ : 0); ++i) solver_->solve(x, ref_.data(), xu_.data(), 0.0);
  solver_->solve(x, ref_.data(), xu_.data(), 0.0);
  solve_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < L; ++i)
    if (!std::isfinite(xu_[size_t(i)])) {
      cold_ = true;
      ee_err_ = std::numeric_limits<double>::quiet_NaN();
      return false;
    }
  cold_ = false;
  last_cold_ = cold;
  {  // the measured EE against knot 0 of the reference solved toward (issue 30's status field)
    double ee[3];
    plant_->frame_position(*ws_, x, ee, -1);
    ee_err_ = std::sqrt((ee[0] - ref_[0]) * (ee[0] - ref_[0]) + (ee[1] - ref_[1]) * (ee[1] - ref_[1]) +
                        (ee[2] - ref_[2]) * (ee[2] - ref_[2]));
  }
  last_stamp_ = stamp_ns;
  out.stamp_ns = stamp_ns;
  out.knot_dt = dt_;
  out.integrator = solver_->settings().integrator;
  out.n_knots = N_;
  out.has_gains = false;
  for (int k = 0; k < N_; ++k) {
    std::copy_n(xu_.begin() + size_t(k) * stride, nx, out.x.begin() + size_t(k) * nx);
    if (k < N_ - 1) std::copy_n(xu_.begin() + size_t(k) * stride + nx, nu, out.u.begin() + size_t(k) * nu);
  }
  if (gains_) {
    // u = u_k + K (x - x_k) (the solver's sign) -> the executor's torque += K (x_plan - x)
    if (solver_->feedback_gains(0, xu_.data(), x, ref_.data(), K_.data()) < 0) {
      const size_t n = K_.size();
      for (size_t i = 0; i < n; ++i) out.K[i] = -K_[i];
      out.has_gains = true;
    } else {
      ++gains_failed_;
    }
  }
  return true;
}

}  // namespace gato
