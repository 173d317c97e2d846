// gato_ros/GatoController's diagnostics (/diagnostics through diagnostic_updater, off the real-time
// path), the ControllerStatus it reports and the histogram percentiles in it: apart from gato_controller.cpp so each file
// keeps one job (the plugin's lifecycle, plans and update() there; what it reports here).
#include "gato_ros/gato_controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace gato_ros {

namespace {
// Diagnostics levels (src/gato_ros/README.md): a following plan older than this fraction of
// plan_timeout is a WARN (the planner is late; at plan_timeout the executor holds: ERROR), and
// so is a report window in which more than this fraction of the updates came late.
constexpr double kPlanAgeWarnFraction = 0.5;
constexpr double kMissedWarnFraction = 0.05;
}  // namespace

double GatoController::percentile(const std::vector<std::uint32_t>& hist, std::uint64_t count, double bin_us,
                                  double max_us, double fraction) noexcept {
  if (count == 0) return 0.0;
  const std::uint64_t want = std::uint64_t(std::ceil(fraction * double(count)));
  std::uint64_t acc = 0;
  for (size_t b = 0; b < hist.size(); ++b) {
    acc += hist[b];
    if (acc >= want) return std::min(double(b + 1) * bin_us, max_us);  // the bin's upper edge
  }
  return max_us;
}

void GatoController::diagnose(diagnostic_updater::DiagnosticStatusWrapper& stat) {
  using diagnostic_msgs::msg::DiagnosticStatus;
  if (!active_.load()) {
    stat.summary(DiagnosticStatus::OK, "inactive: not commanding");
    stat.add("state", "inactive");
    diag_have_prev_ = false;
    return;
  }
  if (diag_restart_.exchange(false)) diag_have_prev_ = false;
  if (!diag_box_.take() && diag_have_prev_) {
    // Active, but no update() since the previous report: the controller manager's loop stalled.
    stat.summary(DiagnosticStatus::ERROR, "no update() since the last report (the control loop is not running)");
    stat.add("state", "stalled");
    return;
  }
  const DiagSample& d = diag_box_.front();
  if (d.counters.updates == 0) {
    stat.summary(DiagnosticStatus::WARN, "active, no update() yet");
    stat.add("state", "starting");
    return;
  }
  const DiagSample& p = diag_have_prev_ ? diag_prev_ : d;  // the window: since the previous report
  const auto& c = d.counters;
  const auto& pc = p.counters;
  const std::uint64_t window = c.updates - pc.updates;
  const double age_ms = d.has_plan ? double(d.now_ns - d.plan_stamp_ns) * 1e-6 : -1.0;
  const double timeout_ms = d.plan_timeout_s * 1e3;
  std::vector<std::string> errors, warns;
  auto ms = [](double v) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(1);
    o << v << " ms";
    return o.str();
  };
  const char* reason = gato::hold_reason_name(d.reason);
  switch (d.mode) {
    case gato::ExecMode::kNoState:
      errors.push_back("no finite joint state yet: zero torque");
      break;
    case gato::ExecMode::kHold:
      if (d.reason == gato::HoldReason::kNoPlan)
        warns.push_back(embedded_ ? "holding: no plan from the embedded solver yet"
                                  : "holding: no plan yet (waiting for " + params_.plan_topic + ")");
      else if (d.reason == gato::HoldReason::kPlanStale)
        errors.push_back(std::string("holding (gravity compensation): plan_stale, the newest plan is ") + ms(age_ms) +
                         " old (plan_timeout " + ms(timeout_ms) + ")");
      else
        errors.push_back(std::string("holding (gravity compensation): ") + reason);
      break;
    case gato::ExecMode::kFollow:
      if (age_ms > kPlanAgeWarnFraction * timeout_ms)
        warns.push_back("plan age " + ms(age_ms) + ", over half of plan_timeout " + ms(timeout_ms));
      if (c.holds > pc.holds)
        warns.push_back("held for " + std::to_string(c.holds - pc.holds) + " updates since the last report");
      break;
  }
  const std::uint64_t missed = d.missed_cycles - p.missed_cycles;
  if (window > 0 && double(missed) > kMissedWarnFraction * double(window))
    warns.push_back(std::to_string(missed) + " of " + std::to_string(window) +
                    " cycles missed since the last report (period over 1.5 x the nominal one)");
  const std::uint64_t refused = (c.dropped_invalid - pc.dropped_invalid) + (d.rejected_layout - p.rejected_layout) +
                                (d.rejected_names - p.rejected_names) +
                                (c.dropped_out_of_order - pc.dropped_out_of_order) +
                                (c.dropped_stale_epoch - pc.dropped_stale_epoch);
  if (refused > 0) warns.push_back(std::to_string(refused) + " plans refused since the last report");
  const std::uint64_t gains_dropped = c.dropped_gains + d.gains_rejected_size,
                      gains_dropped_prev = pc.dropped_gains + p.gains_rejected_size;
  if (gains_dropped > gains_dropped_prev)
    warns.push_back(std::to_string(gains_dropped - gains_dropped_prev) +
                    " plans' feedback gains dropped (not finite or misshapen; run with the PD) since the last report");
  if (d.rejected_references > p.rejected_references)
    warns.push_back(std::to_string(d.rejected_references - p.rejected_references) +
                    " EE references refused since the last report");
  if (d.solver_failures > p.solver_failures)
    warns.push_back(std::to_string(d.solver_failures - p.solver_failures) +
                    " embedded solves failed since the last report");
  std::string message;
  for (const auto* list : {&errors, &warns})
    for (const auto& r : *list) message += (message.empty() ? "" : "; ") + r;
  const unsigned char level = !errors.empty() ? DiagnosticStatus::ERROR
                              : !warns.empty() ? DiagnosticStatus::WARN : DiagnosticStatus::OK;
  if (message.empty()) message = "following: plan age " + ms(age_ms);
  stat.summary(level, message);
  stat.add("state", state_name(d.mode));
  stat.add("reason", d.mode == gato::ExecMode::kFollow ? "" : reason);
  stat.add("fallback", d.mode == gato::ExecMode::kFollow ? "none"
                       : d.mode == gato::ExecMode::kHold ? "hold (gravity compensation + damping)" : "zero torque");
  stat.add("mode", embedded_ ? "embedded" : "follow");
  if (d.has_plan)
    stat.add("plan_age_ms", age_ms);
  else
    stat.add("plan_age_ms", "-");
  stat.add("plan_timeout_ms", timeout_ms);
  stat.add("update_rate_hz", nominal_period_ns_ > 0 ? 1e9 / double(nominal_period_ns_) : 0.0);
  stat.add("updates", c.updates);
  stat.add("updates_since_last_report", window);
  stat.add("missed_cycles", d.missed_cycles);
  stat.add("missed_cycles_since_last_report", missed);
  stat.add("overruns", d.overruns);
  stat.add("period_max_ms", d.period_max_ms);
  stat.add("update_max_us", d.update_max_us);
  stat.add("holds", c.holds);
  stat.add("stale_events", c.stale_events);
  stat.add("plans_accepted", c.plans_accepted);
  stat.add("plans_dropped_invalid", c.dropped_invalid + d.rejected_layout);
  stat.add("plans_dropped_order", c.dropped_out_of_order + c.dropped_stale_epoch);
  stat.add("rejected_names", d.rejected_names);
  stat.add("rejected_nonfinite_states", c.nonfinite_states);
  stat.add("fallbacks_nonfinite_output", c.nonfinite_outputs);
  stat.add("clamped", c.clamped);
  stat.add("limit_cuts", c.limit_cuts);
  stat.add("feedback", params_.feedback);
  stat.add("gains_dropped", gains_dropped);
  stat.add("follow_with_gains", c.follow_gains);
  stat.add("gains_saturated", c.gains_saturated);
  if (embedded_) {
    stat.add("rejected_references", d.rejected_references);
    stat.add("solver_failures", d.solver_failures);
    stat.add("solve_us", last_solve_us_.load(std::memory_order_relaxed));
  }
  diag_prev_ = d;
  diag_have_prev_ = true;
}

// The ControllerStatus of one report (real-time path: fixed fields, no heap beyond the short state
// names' small-string buffers); update() publishes it.
void GatoController::fill_status(const rclcpp::Time& time, gato::ExecMode mode) noexcept {
  const auto& c = executor_->counters();
  auto& s = status_msg_;
  s.header.stamp = time;
  s.state = state_name(mode);           // short names: no heap (small-string buffer)
  s.reason = mode == gato::ExecMode::kFollow ? "" : gato::hold_reason_name(executor_->hold_reason());
  s.ticks = c.updates;
  s.holds = c.holds;
  s.stale_events = c.stale_events;
  s.clamped = c.clamped;
  s.rejected_nonfinite = c.nonfinite_states;
  s.fallbacks = c.nonfinite_outputs;
  s.dropped_out_of_order = c.dropped_out_of_order + c.dropped_stale_epoch;
  s.rejected_names = plans_rejected_names_.load(std::memory_order_relaxed);
  s.rejected_references = refs_rejected_.load(std::memory_order_relaxed);
  s.plans_accepted = c.plans_accepted;
  s.plans_dropped_invalid = c.dropped_invalid + plans_rejected_layout_.load(std::memory_order_relaxed);
  s.plans_dropped_order = c.dropped_out_of_order + c.dropped_stale_epoch;
  s.limit_cuts = c.limit_cuts;
  s.update_p50_us = percentile(timing_hist_, timing_count_, kTimingBinUs, timing_max_us_, 0.5);
  s.update_p99_us = percentile(timing_hist_, timing_count_, kTimingBinUs, timing_max_us_, 0.99);
  s.plan_latency_p50_us = percentile(latency_hist_, latency_count_, kLatencyBinUs, latency_max_us_, 0.5);
  s.plan_latency_p99_us = percentile(latency_hist_, latency_count_, kLatencyBinUs, latency_max_us_, 0.99);
  s.plan_latency_max_us = latency_max_us_;
  s.latency_us = latency_last_us_;
  s.solve_us = last_solve_us_.load(std::memory_order_relaxed);
  s.solver_failures = solve_failures_.load(std::memory_order_relaxed);
  s.update_max_us = timing_max_us_;
  s.effort_measured = use_effort_;
  s.effort_error_max = effort_err_nan_ ? std::numeric_limits<double>::quiet_NaN() : effort_err_max_;
  // Issue 30, as the controller node reports them: embedded mode, following, the last solve's
  // measured EE against knot 0 of the reference it solved toward (position [m]; orientation [rad],
  // the angle of R_ref^T R_ee, NaN when that window had no orientations); both NaN on holds and
  // in follow mode (the node that planned reports them).
  const bool following = embedded_ && mode == gato::ExecMode::kFollow;
  s.ee_position_error = following ? ee_pos_err_.load(std::memory_order_relaxed)
                                  : std::numeric_limits<double>::quiet_NaN();
  s.ee_orientation_error = following ? ee_rot_err_.load(std::memory_order_relaxed)
                                     : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace gato_ros
