// executor_alloc URDF EE_FRAME: runs 10^4 PlanExecutor::update() calls through
// every path (follow with and without plan gains, new plans accepted, invalid /
// out-of-order / stale-epoch plans dropped, stale plan, NaN state, non-finite
// output, clamp, limit cut, tunables applied, reset) while a malloc hook counts
// heap calls, and prints "key=value" lines. The hook replaces malloc & co. in
// this executable (glibc lets the main program interpose them) and forwards to
// glibc's own implementation; a control allocation proves it counts.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gato/plan_executor.hpp"
#include "gato/solver.hpp"  // the solver target links too (the plugin's embedded mode uses it)

#include "../malloc_hook.hpp"  // g_counting, g_allocs, g_frees, count_control_allocation

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: executor_alloc URDF EE_FRAME\n");
    return 2;
  }
  auto plant = std::make_shared<gato::Plant<double>>(argv[1], argv[2]);
  const int nv = plant->nv(), nx = 2 * nv, N = 32;
  const auto& L = plant->limits();
  gato::ExecutorConfig cfg;
  cfg.max_knots = 64;
  cfg.tunables.kp.assign(nv, 50.0);
  cfg.tunables.kd.assign(nv, 5.0);
  cfg.tunables.hold_damping.assign(nv, 2.0);
  gato::PlanExecutor ex(plant, cfg);

  if (!count_control_allocation()) return 3;  // the hook must count, or the zeros prove nothing

  // Plans (writer side, filled before counting): a slow sinusoid, with gains.
  const double h = 0.02;
  gato::ExecutorPlan plan;
  plan.allocate(nv, cfg.max_knots);
  plan.n_knots = N;
  plan.knot_dt = h;
  plan.integrator = gato::Integrator::kRk4;
  plan.has_gains = true;
  for (int k = 0; k < N; ++k)
    for (int j = 0; j < nv; ++j) {
      plan.x[k * nx + j] = 0.3 * std::sin(0.5 * k * h + j);
      plan.x[k * nx + nv + j] = 0.15 * std::cos(0.5 * k * h + j);
      if (k < N - 1) plan.u[k * nv + j] = 5.0 * std::sin(j + 0.1 * k);
    }
  for (size_t i = 0; i < plan.K.size(); ++i) plan.K[i] = (i % 3 == 0) ? 1.0 : 0.0;
  gato::ExecutorPlan bad = plan;
  bad.x[3] = std::numeric_limits<double>::quiet_NaN();
  gato::ExecutorPlan huge = plan;  // finite plan whose feedback overflows to inf
  for (int j = 0; j < nv; ++j) huge.x[j] = 1e308;
  gato::ExecutorTunables tun = cfg.tunables;
  tun.kp.assign(nv, 80.0);
  tun.use_plan_gains = false;

  std::vector<double> q(nv), v(nv, 0.01), tau(nv);
  for (int j = 0; j < nv; ++j) q[j] = 0.5 * (L.q_lo[j] + L.q_hi[j]);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::int64_t period = 1000000;  // 1 kHz
  std::uint64_t seq = 0;
  std::uint32_t epoch = 1;
  std::int64_t t = 1000000000;
  long updates = 0, follow = 0, hold = 0;

  g_counting = true;
  for (int i = 0; i < 10000; ++i) {
    const int phase = i % 200;
    if (phase == 0) {  // a fresh plan every 200 ms, stamped now
      plan.seq = ++seq;
      plan.epoch = epoch;
      plan.stamp_ns = t;
      ex.submit(plan);
    }
    if (phase == 20) {  // NaN plan: dropped
      bad.seq = ++seq; bad.epoch = epoch; bad.stamp_ns = t;
      ex.submit(bad);
    }
    if (phase == 40) {  // out of order: dropped
      plan.seq = seq > 5 ? seq - 5 : 0; plan.stamp_ns = t;
      ex.submit(plan);
    }
    if (phase == 60 && i % 1000 == 60) {  // new epoch, low seq: accepted
      ++epoch;
      seq = 1;
      plan.seq = seq; plan.epoch = epoch; plan.stamp_ns = t;
      ex.submit(plan);
    }
    if (phase == 70) {  // stale epoch: dropped
      plan.seq = seq + 100; plan.epoch = epoch - 1; plan.stamp_ns = t;
      ex.submit(plan);
    }
    if (phase == 80 && i % 1000 == 80) {  // overflowing plan: non-finite output -> hold
      huge.seq = ++seq; huge.epoch = epoch; huge.stamp_ns = t;
      ex.submit(huge);
    }
    if (i == 5000) {  // tunables: copied on the non-RT side uncounted, applied in update()
      g_counting = false;
      ex.set_tunables(tun);
      g_counting = true;
    }
    if (i == 7000) ex.reset();
    const bool nan_state = phase == 100;
    const bool at_limit = phase >= 110 && phase < 115;
    std::vector<double>& qq = q;
    double saved = qq[0];
    if (nan_state) qq[1] = nan;
    if (at_limit) {  // at the upper limit, feedback pushing up (kd * 100 rad/s): cut
      qq[0] = L.q_hi[0];
      v[0] = -100.0;
    }
    const bool fast = phase >= 120 && phase < 125;  // kd * 1000 rad/s: clamped
    if (fast) v[2] = 1000.0;
    const std::int64_t now = (phase >= 150 && phase < 160) ? t + 500000000 : t;  // stale plan
    const gato::ExecMode m = ex.update(now, qq.data(), v.data(), tau.data());
    qq[0] = saved;
    v[2] = v[0] = 0.01;
    if (nan_state) qq[1] = 0.5 * (L.q_lo[1] + L.q_hi[1]);
    ++updates;
    follow += m == gato::ExecMode::kFollow;
    hold += m == gato::ExecMode::kHold;
    t += period;
  }
  g_counting = false;

  const auto& c = ex.counters();
  std::printf("updates=%ld\nupdate_allocs=%ld\nupdate_frees=%ld\nfollow=%ld\nhold=%ld\n", updates, g_allocs,
              g_frees, follow, hold);
  std::printf("plans_accepted=%llu\ndropped_invalid=%llu\ndropped_out_of_order=%llu\n"
              "dropped_stale_epoch=%llu\nnonfinite_states=%llu\nnonfinite_outputs=%llu\n"
              "stale_events=%llu\nclamped=%llu\nlimit_cuts=%llu\n",
              (unsigned long long)c.plans_accepted, (unsigned long long)c.dropped_invalid,
              (unsigned long long)c.dropped_out_of_order, (unsigned long long)c.dropped_stale_epoch,
              (unsigned long long)c.nonfinite_states, (unsigned long long)c.nonfinite_outputs,
              (unsigned long long)c.stale_events, (unsigned long long)c.clamped,
              (unsigned long long)c.limit_cuts);
  std::printf("kp_applied=%g\n", ex.tunables().kp[0]);
  return 0;
}
