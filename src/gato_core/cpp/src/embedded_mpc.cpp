// EmbeddedMpc: see include/gato/embedded_mpc.hpp.
#include "gato/embedded_mpc.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "gato/solver.hpp"

namespace gato {

namespace {

// Quaternions (x, y, z, w) and rotation vectors as gato.references (quat_to_rotvec,
// rotvec_to_quat, quat_multiply): the same formulas, so the sampled orientations agree.
void rotvec_to_quat(const double* r, double* q) {
  const double th = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const double k = th > 1e-6 ? std::sin(0.5 * th) / th : 0.5 - th * th / 48.0;
  q[0] = r[0] * k, q[1] = r[1] * k, q[2] = r[2] * k, q[3] = std::cos(0.5 * th);
}

void quat_to_rotvec(const double* q_in, double* r) {
  const double sg = q_in[3] < 0.0 ? -1.0 : 1.0;  // w >= 0: the angle in [0, pi]
  const double q[4] = {sg * q_in[0], sg * q_in[1], sg * q_in[2], sg * q_in[3]};
  const double s = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2]);
  const double theta = 2.0 * std::atan2(s, q[3]);
  const double scale = s > 1e-12 ? theta / s : 2.0 / std::max(q[3], 1e-300);
  r[0] = q[0] * scale, r[1] = q[1] * scale, r[2] = q[2] * scale;
}

void quat_multiply(const double* a, const double* b, double* o) {
  const double x = a[3] * b[0] + b[3] * a[0] + (a[1] * b[2] - a[2] * b[1]);
  const double y = a[3] * b[1] + b[3] * a[1] + (a[2] * b[0] - a[0] * b[2]);
  const double z = a[3] * b[2] + b[3] * a[2] + (a[0] * b[1] - a[1] * b[0]);
  const double w = a[3] * b[3] - (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
  o[0] = x, o[1] = y, o[2] = z, o[3] = w;
}

// R (3 x 3, column-major) of a rotation vector (Rodrigues).
void rotvec_to_matrix(const double* r, double* R) {
  const double th = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  const double a = th > 1e-8 ? std::sin(th) / th : 1.0 - th * th / 6.0;
  const double b = th > 1e-8 ? (1.0 - std::cos(th)) / (th * th) : 0.5 - th * th / 24.0;
  const double x = r[0], y = r[1], z = r[2];
  R[0] = 1.0 - b * (y * y + z * z), R[3] = -a * z + b * x * y, R[6] = a * y + b * x * z;
  R[1] = a * z + b * x * y, R[4] = 1.0 - b * (x * x + z * z), R[7] = -a * x + b * y * z;
  R[2] = -a * y + b * x * z, R[5] = a * x + b * y * z, R[8] = 1.0 - b * (x * x + y * y);
}

}  // namespace

bool unit_quaternions(const double* q, std::size_t n) {
  for (std::size_t i = 0; i < 4 * n; ++i)
    if (!std::isfinite(q[i])) return false;
  for (std::size_t k = 0; k < n; ++k) {
    const double* a = q + 4 * k;
    const double nn = std::sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2] + a[3] * a[3]);
    if (!(std::abs(nn - 1.0) <= kQuatUnitTol)) return false;
  }
  return true;
}

bool EeWindow::set_orientations_xyzw(const double* q, int n) {
  if (n < 0 || n > capacity() || (n > 0 && !unit_quaternions(q, std::size_t(n)))) return false;
  for (int k = 0; k < n; ++k) quat_to_rotvec(q + 4 * k, r.data() + size_t(3 * k));
  has_orientations = n > 0;
  return true;
}

EmbeddedMpc::EmbeddedMpc(std::shared_ptr<const Plant<double>> plant, const EmbeddedMpcConfig& c)
    : plant_(std::move(plant)), N_(c.N), nv_(0), warmup_(c.warmup_solves), dt_(c.dt) {
  if (!plant_) throw std::invalid_argument("EmbeddedMpc: plant is null");
  if (c.N < 2) throw std::invalid_argument("N: must be >= 2, got " + std::to_string(c.N));
  if (!(std::isfinite(c.dt) && c.dt > 0.0)) throw std::invalid_argument("dt: must be > 0 s");
  if (c.warmup_solves < 0) throw std::invalid_argument("warmup_solves: must be >= 0");
  nv_ = plant_->nv();
  set_pose_ee_weight_scale(c.pose_ee_weight_scale);
  base_ = c.settings;
  Settings st = base_;  // position only until a step toward orientations
  st.rot_cost = st.N_rot_cost = 0.0;
  solver_ = BatchSolver<double>::create(plant_, 1, c.N, c.dt, st, c.threads);
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

void EmbeddedMpc::set_settings(const Settings& s) {
  base_ = s;
  settings_dirty_ = true;
}

void EmbeddedMpc::set_pose_ee_weight_scale(double scale) {
  if (!(std::isfinite(scale) && scale > 0.0))
    throw std::invalid_argument("pose_ee_weight_scale: must be a finite number > 0, got " + std::to_string(scale));
  settings_dirty_ = settings_dirty_ || scale != pose_scale_;
  pose_scale_ = scale;
}

void EmbeddedMpc::apply_pose_settings(bool pose) {
  if (!settings_dirty_ && pose == pose_on_) return;
  Settings st = base_;
  if (pose) {
    st.q_cost *= pose_scale_;
    st.N_cost *= pose_scale_;
  } else {
    st.rot_cost = st.N_rot_cost = 0.0;
  }
  solver_->set_settings(st);
  pose_on_ = pose;
  settings_dirty_ = false;
}

void EmbeddedMpc::reset() { cold_ = true; }

void EmbeddedMpc::sample_reference(std::int64_t stamp_ns, const EeWindow* w) {
  for (int k = 0; k < N_; ++k) {
    double* r = ref_.data() + size_t(6 * k);
    r[3] = r[4] = r[5] = 0.0;  // the orientation slots of the reference layout (position only)
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
    if (!w->has_orientations) continue;
    // issue 30: slerp (ReferenceWindow.sample_orientations): q0 exp(frac log(q0^-1 q1))
    const double* ra = w->r.data() + size_t(3 * idx);
    if (frac == 0.0) {
      std::copy_n(ra, 3, r + 3);
      continue;
    }
    double q0[4], q1[4], q0i[4], rel[4], v[3], qf[4], qo[4];
    rotvec_to_quat(ra, q0);
    rotvec_to_quat(w->r.data() + size_t(3 * nxt), q1);
    q0i[0] = -q0[0], q0i[1] = -q0[1], q0i[2] = -q0[2], q0i[3] = q0[3];
    quat_multiply(q0i, q1, rel);
    quat_to_rotvec(rel, v);
    for (double& e : v) e *= frac;
    rotvec_to_quat(v, qf);
    quat_multiply(q0, qf, qo);
    quat_to_rotvec(qo, r + 3);
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
  const bool pose = ref && ref->n_knots >= 1 && ref->has_orientations;
  apply_pose_settings(pose);
  sample_reference(stamp_ns, ref);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < (cold ? warmup_ : 0); ++i) solver_->solve(x, ref_.data(), xu_.data(), 0.0);
  solver_->solve(x, ref_.data(), xu_.data(), 0.0);
  solve_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < L; ++i)
    if (!std::isfinite(xu_[size_t(i)])) {
      cold_ = true;
      ee_err_ = ee_rot_err_ = std::numeric_limits<double>::quiet_NaN();
      return false;
    }
  cold_ = false;
  last_cold_ = cold;
  {  // the measured EE against knot 0 of the reference solved toward (issue 30's status field)
    double ee[3];
    plant_->frame_position(*ws_, x, ee, -1);
    ee_err_ = std::sqrt((ee[0] - ref_[0]) * (ee[0] - ref_[0]) + (ee[1] - ref_[1]) * (ee[1] - ref_[1]) +
                        (ee[2] - ref_[2]) * (ee[2] - ref_[2]));
    ee_rot_err_ = std::numeric_limits<double>::quiet_NaN();
    if (pose) {  // the angle of M = R_ref^T R_ee (atan2 of its axial part and (tr M - 1) / 2)
      double R[9], Rr[9], M[9];
      plant_->ee_rotation(*ws_, x, R);
      rotvec_to_matrix(ref_.data() + 3, Rr);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          M[i + 3 * j] = Rr[0 + 3 * i] * R[0 + 3 * j] + Rr[1 + 3 * i] * R[1 + 3 * j] + Rr[2 + 3 * i] * R[2 + 3 * j];
      const double ax = M[5] - M[7], ay = M[6] - M[2], az = M[1] - M[3];
      ee_rot_err_ = std::atan2(0.5 * std::sqrt(ax * ax + ay * ay + az * az), 0.5 * (M[0] + M[4] + M[8] - 1.0));
    }
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
