// PlanExecutor: see include/gato/plan_executor.hpp. No pinocchio here: gravity
// comes from Plant::inverse_dynamics (compiled in plant_double.cpp).
#include "gato/plan_executor.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace gato {

void ExecutorPlan::allocate(int nv, int max_knots) {
  nv_ = nv;
  capacity_ = max_knots;
  x.assign(size_t(max_knots) * 2 * nv, 0.0);
  u.assign(size_t(max_knots - 1) * nv, 0.0);
  K.assign(size_t(max_knots - 1) * nv * 2 * nv, 0.0);
  n_knots = 0;
  has_gains = false;
}

const char* hold_reason_name(HoldReason r) {
  switch (r) {
    case HoldReason::kNone: return "none";
    case HoldReason::kNoPlan: return "no_plan";
    case HoldReason::kPlanStale: return "plan_stale";
    case HoldReason::kPlanExhausted: return "plan_exhausted";
    case HoldReason::kStateNonFinite: return "state_nan_inf";
    case HoldReason::kOutputNonFinite: return "output_nan_inf";
  }
  return "?";
}

const char* feedback_mode_name(FeedbackMode m) {
  switch (m) {
    case FeedbackMode::kPd: return "pd";
    case FeedbackMode::kRiccati: return "riccati";
    case FeedbackMode::kRiccatiPd: return "riccati+pd";
  }
  return "?";
}

int sample_plan(const ExecutorPlan& p, double s, double* q, double* v, double* u) {
  const int nv = p.nv(), nx = 2 * nv;
  const double h = p.knot_dt;
  if (!(s > 0.0)) s = 0.0;  // also NaN: a plan stamped slightly ahead starts at knot 0
  const double kf = std::floor(s / h);
  if (!(kf < double(p.n_knots - 1))) return -1;
  const int k = int(kf);
  const double t = s - kf * h;
  const double* x0 = p.x.data() + size_t(k) * nx;
  const double* x1 = x0 + nx;
  const double* uk = p.u.data() + size_t(k) * nv;
  const double r = t / h;
  for (int j = 0; j < nv; ++j) {
    const double q0 = x0[j], v0 = x0[nv + j], q1 = x1[j], v1 = x1[nv + j];
    switch (p.integrator) {
      case Integrator::kEuler: {
        const double c = (q1 - q0 - h * v0) / (h * h);  // = a/2 for a consistent plan
        q[j] = q0 + t * v0 + c * t * t;
        v[j] = v0 + r * (v1 - v0);
        break;
      }
      case Integrator::kSemiImplicit:
        q[j] = q0 + r * (q1 - q0);
        v[j] = v0 + r * (v1 - v0);
        break;
      case Integrator::kRk4: {
        // Cubic Hermite basis on r in [0, 1] and its derivative (divided by h).
        const double r2 = r * r, r3 = r2 * r;
        const double h00 = 2 * r3 - 3 * r2 + 1, h10 = r3 - 2 * r2 + r, h01 = -2 * r3 + 3 * r2,
                     h11 = r3 - r2;
        const double d00 = 6 * r2 - 6 * r, d10 = 3 * r2 - 4 * r + 1, d01 = -6 * r2 + 6 * r,
                     d11 = 3 * r2 - 2 * r;
        q[j] = h00 * q0 + h10 * h * v0 + h01 * q1 + h11 * h * v1;
        v[j] = (d00 * q0 + d01 * q1) / h + d10 * v0 + d11 * v1;
        break;
      }
    }
    u[j] = uk[j];
  }
  return k;
}

namespace {
/// Copies the header and the valid rows of `from` into `to` (same nv, enough capacity):
/// no allocation.
void copy_valid(const ExecutorPlan& from, ExecutorPlan& to) {
  const size_t nv = size_t(from.nv()), nx = 2 * nv, n = size_t(std::max(from.n_knots, 0));
  to.seq = from.seq;
  to.epoch = from.epoch;
  to.stamp_ns = from.stamp_ns;
  to.knot_dt = from.knot_dt;
  to.integrator = from.integrator;
  to.n_knots = from.n_knots;
  to.has_gains = from.has_gains;
  std::copy_n(from.x.begin(), n * nx, to.x.begin());
  if (n > 1) {
    std::copy_n(from.u.begin(), (n - 1) * nv, to.u.begin());
    if (from.has_gains) std::copy_n(from.K.begin(), (n - 1) * nv * nx, to.K.begin());
  }
}

bool all_finite(const double* a, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(a[i])) return false;
  return true;
}
}  // namespace

PlanExecutor::PlanExecutor(std::shared_ptr<const Plant<double>> plant, const ExecutorConfig& config)
    : plant_(std::move(plant)) {
  if (!plant_) throw std::invalid_argument("PlanExecutor: plant is null");
  nv_ = plant_->nv();
  max_knots_ = config.max_knots;
  if (max_knots_ < 2) throw std::invalid_argument("max_knots: must be >= 2, got " + std::to_string(max_knots_));
  const auto& L = plant_->limits();
  const auto names = plant_->joint_names();
  q_lo_.assign(L.q_lo.data(), L.q_lo.data() + nv_);
  q_hi_.assign(L.q_hi.data(), L.q_hi.data() + nv_);
  u_max_.assign(L.u_max.data(), L.u_max.data() + nv_);
  for (int j = 0; j < nv_; ++j)
    if (!(u_max_[j] > 0.0))
      throw std::invalid_argument("URDF effort limit of joint '" + names[size_t(j)] +
                                  "' is not positive (" + std::to_string(u_max_[j]) +
                                  "): the executor clamps every torque to it");
  fb_limit_default_.resize(size_t(nv_));
  for (int j = 0; j < nv_; ++j) fb_limit_default_[size_t(j)] = 0.25 * u_max_[size_t(j)];
  ExecutorTunables t = config.tunables;
  for (auto* vec : {&t.kp, &t.kd, &t.hold_damping})
    if (vec->empty()) vec->assign(size_t(nv_), 0.0);
  if (t.feedback_limit.empty()) t.feedback_limit = fb_limit_default_;
  validate(t);
  ws_ = plant_->make_workspace();
  auto alloc_plan = [&](ExecutorPlan& p) { p.allocate(nv_, max_knots_); };
  inbox_.init(alloc_plan);
  alloc_plan(active_);
  tun_inbox_.init([&](ExecutorTunables& s) { s = t; });
  tun_ = t;
  for (auto* vec : {&q_ref_, &v_ref_, &u_ff_, &q_good_, &zeros_, &g_, &q_hold_, &a_hold_})
    vec->assign(size_t(nv_), 0.0);
  dx_.assign(size_t(2 * nv_), 0.0);
  // One gravity evaluation now: pinocchio's first call may touch lazily built state.
  gravity(zeros_.data());
}

PlanExecutor::~PlanExecutor() = default;

void PlanExecutor::validate(const ExecutorTunables& t) const {
  if (!(std::isfinite(t.plan_timeout_s) && t.plan_timeout_s > 0.0))
    throw std::invalid_argument("plan_timeout: must be a positive number of seconds, got " +
                                std::to_string(t.plan_timeout_s));
  if (!(std::isfinite(t.hold_frequency_hz) && t.hold_frequency_hz >= 0.0))
    throw std::invalid_argument("hold_frequency_hz: must be >= 0 Hz, got " + std::to_string(t.hold_frequency_hz));
  if (!(std::isfinite(t.limit_margin) && t.limit_margin >= 0.0))
    throw std::invalid_argument("limit_margin: must be >= 0 rad, got " + std::to_string(t.limit_margin));
  if (t.feedback != FeedbackMode::kPd && t.feedback != FeedbackMode::kRiccati &&
      t.feedback != FeedbackMode::kRiccatiPd)
    throw std::invalid_argument("feedback: expected pd, riccati or riccati+pd");
  const std::pair<const char*, const std::vector<double>*> vecs[] = {
      {"kp", &t.kp}, {"kd", &t.kd}, {"hold_damping", &t.hold_damping}, {"feedback_limit", &t.feedback_limit}};
  for (const auto& [name, vec] : vecs) {
    if (vec->size() != size_t(nv_))
      throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(nv_) +
                                  " values (one per joint), got " + std::to_string(vec->size()));
    for (double g : *vec)
      if (!(std::isfinite(g) && g >= 0.0))
        throw std::invalid_argument(std::string(name) + ": gains must be finite and >= 0, got " +
                                    std::to_string(g));
  }
}

void PlanExecutor::set_tunables(const ExecutorTunables& t) {
  ExecutorTunables c = t;
  for (auto* vec : {&c.kp, &c.kd, &c.hold_damping})
    if (vec->empty()) vec->assign(size_t(nv_), 0.0);
  if (c.feedback_limit.empty()) c.feedback_limit = fb_limit_default_;
  validate(c);
  tun_inbox_.back() = c;
  tun_inbox_.publish();
}

void PlanExecutor::submit(const ExecutorPlan& p) {
  if (p.nv() != nv_)
    throw std::invalid_argument("plan: built for " + std::to_string(p.nv()) + " joints, the executor has " +
                                std::to_string(nv_));
  if (p.n_knots > max_knots_ || p.n_knots > p.capacity())
    throw std::invalid_argument("plan: n_knots " + std::to_string(p.n_knots) + " exceeds max_knots " +
                                std::to_string(max_knots_));
  copy_valid(p, plan_slot());
  submit();
}

void PlanExecutor::accept_incoming() noexcept {
  if (!inbox_.take()) return;
  const ExecutorPlan& p = inbox_.front();
  const size_t nx = size_t(2 * nv_);
  const int n = p.n_knots;
  const bool sizes_ok = n >= 2 && n <= max_knots_ && std::isfinite(p.knot_dt) && p.knot_dt > 0.0 &&
                        (p.integrator == Integrator::kEuler || p.integrator == Integrator::kSemiImplicit ||
                         p.integrator == Integrator::kRk4);
  if (!sizes_ok || !all_finite(p.x.data(), size_t(n) * nx) || !all_finite(p.u.data(), size_t(n - 1) * nv_)) {
    ++counters_.dropped_invalid;
    return;
  }
  // Bad gains drop the gains, not the plan: it runs with the PD (never with the bad K).
  const bool gains_ok = !p.has_gains || all_finite(p.K.data(), size_t(n - 1) * nv_ * nx);
  if (seen_plan_) {
    if (p.epoch < last_epoch_) {
      ++counters_.dropped_stale_epoch;
      return;
    }
    if (p.epoch == last_epoch_ && p.seq <= last_seq_) {
      ++counters_.dropped_out_of_order;
      return;
    }
  }
  seen_plan_ = true;
  last_epoch_ = p.epoch;
  last_seq_ = p.seq;
  copy_valid(p, active_);
  if (!gains_ok) {
    active_.has_gains = false;
    ++counters_.dropped_gains;
  }
  has_plan_ = true;
  stale_ = false;
  ++counters_.plans_accepted;
}

void PlanExecutor::gravity(const double* q) noexcept {
  plant_->inverse_dynamics(*ws_, q, zeros_.data(), zeros_.data(), nullptr, g_.data());
}

void PlanExecutor::hold(const double* q, const double* v, double* tau) noexcept {
  if (!q || !v || tun_.hold_frequency_hz <= 0.0) {
    // No trustworthy state (or the position hold is off): gravity at the last good
    // position, damping only on a velocity we can trust.
    gravity(q_good_.data());
    for (int j = 0; j < nv_; ++j) tau[j] = g_[j] - (v ? tun_.hold_damping[j] * v[j] : 0.0);
    return;
  }
  // g(q) + M(q) a in one inverse-dynamics call (v = 0: no Coriolis term, a hold is slow).
  const double w = 6.283185307179586 * tun_.hold_frequency_hz;  // 2 pi f [rad/s]
  for (int j = 0; j < nv_; ++j) a_hold_[j] = w * w * (q_hold_[j] - q[j]) - 2.0 * w * v[j];
  plant_->inverse_dynamics(*ws_, q, zeros_.data(), a_hold_.data(), nullptr, tau);
  for (int j = 0; j < nv_; ++j) tau[j] -= tun_.hold_damping[j] * v[j];
}

void PlanExecutor::reset() noexcept {
  has_plan_ = false;
  seen_plan_ = false;
  stale_ = false;
}

ExecMode PlanExecutor::update(std::int64_t now_ns, const double* q, const double* v, double* tau) noexcept {
  ++counters_.updates;
  if (tun_inbox_.take()) {
    const ExecutorTunables& t = tun_inbox_.front();
    tun_.plan_timeout_s = t.plan_timeout_s;
    tun_.limit_margin = t.limit_margin;
    tun_.use_plan_gains = t.use_plan_gains;
    tun_.feedback = t.feedback;
    std::copy(t.feedback_limit.begin(), t.feedback_limit.end(), tun_.feedback_limit.begin());
    tun_.hold_frequency_hz = t.hold_frequency_hz;
    std::copy(t.kp.begin(), t.kp.end(), tun_.kp.begin());
    std::copy(t.kd.begin(), t.kd.end(), tun_.kd.begin());
    std::copy(t.hold_damping.begin(), t.hold_damping.end(), tun_.hold_damping.begin());
  }
  accept_incoming();

  const bool state_ok = all_finite(q, size_t(nv_)) && all_finite(v, size_t(nv_));
  if (state_ok) {
    std::copy_n(q, nv_, q_good_.begin());
    have_good_ = true;
  } else {
    ++counters_.nonfinite_states;
  }
  if (!have_good_) {
    std::fill_n(tau, nv_, 0.0);
    mode_ = ExecMode::kNoState;
    reason_ = HoldReason::kStateNonFinite;
    return mode_;
  }

  HoldReason why = HoldReason::kNone;
  if (!state_ok) {
    why = HoldReason::kStateNonFinite;
  } else if (!has_plan_) {
    why = HoldReason::kNoPlan;
  } else {
    const double age = double(now_ns - active_.stamp_ns) * 1e-9;
    int k = -1;
    if (age > tun_.plan_timeout_s) {
      why = HoldReason::kPlanStale;
    } else {
      k = sample_plan(active_, age, q_ref_.data(), v_ref_.data(), u_ff_.data());
      if (k < 0) why = HoldReason::kPlanExhausted;
    }
    if (why != HoldReason::kNone) {
      if (!stale_) ++counters_.stale_events;
      stale_ = true;
    } else {
      stale_ = false;
      // feedback (FeedbackMode): the plan's gains when it carries usable ones and the mode
      // wants them; the PD in mode pd, in riccati+pd, and whenever there are no gains
      const bool use_k = active_.has_gains && tun_.use_plan_gains && tun_.feedback != FeedbackMode::kPd;
      const bool use_pd = !use_k || tun_.feedback == FeedbackMode::kRiccatiPd;
      for (int j = 0; j < nv_; ++j) {
        dx_[size_t(j)] = q_ref_[size_t(j)] - q[j];
        dx_[size_t(nv_ + j)] = v_ref_[size_t(j)] - v[j];
        tau[j] = u_ff_[size_t(j)];
        if (use_pd) tau[j] += tun_.kp[size_t(j)] * dx_[size_t(j)] + tun_.kd[size_t(j)] * dx_[size_t(nv_ + j)];
      }
      if (use_k) {
        const int nx = 2 * nv_;
        const double* Kk = active_.K.data() + size_t(k) * nv_ * nx;
        bool sat = false;
        for (int j = 0; j < nv_; ++j) {
          double acc = 0.0;
          for (int i = 0; i < nx; ++i) acc += Kk[size_t(j) * nx + i] * dx_[size_t(i)];
          const double lim = tun_.feedback_limit[size_t(j)];
          if (acc > lim) { acc = lim; sat = true; }
          else if (acc < -lim) { acc = -lim; sat = true; }
          tau[j] += acc;
        }
        ++counters_.follow_gains;
        if (sat) ++counters_.gains_saturated;
      }
      if (!all_finite(tau, size_t(nv_))) {
        ++counters_.nonfinite_outputs;
        why = HoldReason::kOutputNonFinite;
      }
    }
  }

  const double* v_use = state_ok ? v : nullptr;  // no damping on a velocity we cannot trust
  if (why != HoldReason::kNone) {
    // A hold keeps the last good position at the moment it began (not wherever the arm
    // drifts to): a new anchor on every entry into hold.
    if (mode_ != ExecMode::kHold) std::copy(q_good_.begin(), q_good_.end(), q_hold_.begin());
    hold(state_ok ? q : nullptr, v_use, tau);
    mode_ = ExecMode::kHold;
    ++counters_.holds;
  } else {
    mode_ = ExecMode::kFollow;
    ++counters_.follow;
  }
  reason_ = why;

  // Position limits: within limit_margin of a URDF limit, no torque beyond the
  // one that holds the joint against gravity (minus damping of motion toward
  // the limit). Joint-local: coupling through the mass matrix is ignored.
  bool cut = false, gravity_done = false;
  const double* qs = q_good_.data();
  for (int j = 0; j < nv_; ++j) {
    const bool at_hi = qs[j] >= q_hi_[size_t(j)] - tun_.limit_margin;
    const bool at_lo = qs[j] <= q_lo_[size_t(j)] + tun_.limit_margin;
    if (!at_hi && !at_lo) continue;
    if (!gravity_done) {
      gravity(qs);
      gravity_done = true;
    }
    const double vj = v_use ? v_use[j] : 0.0, d = tun_.hold_damping[size_t(j)];
    if (at_hi) {
      const double cap = g_[size_t(j)] - d * std::max(vj, 0.0);
      if (tau[j] > cap) { tau[j] = cap; cut = true; }
    }
    if (at_lo) {
      const double floor_ = g_[size_t(j)] - d * std::min(vj, 0.0);
      if (tau[j] < floor_) { tau[j] = floor_; cut = true; }
    }
  }
  if (cut) ++counters_.limit_cuts;

  bool clamped = false;
  for (int j = 0; j < nv_; ++j) {
    const double m = u_max_[size_t(j)];
    if (tau[j] > m) { tau[j] = m; clamped = true; }
    else if (tau[j] < -m) { tau[j] = -m; clamped = true; }
    else if (!std::isfinite(tau[j])) { tau[j] = 0.0; clamped = true; }  // last resort
  }
  if (clamped) ++counters_.clamped;
  return mode_;
}

}  // namespace gato
