// ROS-free real-time plan executor (the logic of the ros2_control plugin, like
// ros2_controllers' AdmittanceRule): holds the latest MPC plan, samples it at
// the control rate and applies the safety rules. docs: src/gato_ros/README.md
// ("ros2_control plugin"), safety table included.
//
// Threads: one writer (the plan subscriber or the embedded solver thread)
// fills plan_slot() and calls submit(); one real-time thread calls update().
// set_tunables() may run on a third, non-real-time thread. update() and
// reset() never allocate, lock or throw; everything is allocated here at
// construction (configure time).
//
// Joint order everywhere: the plant's (URDF) order. Units: rad, rad/s, N*m, s;
// times in integer nanoseconds on one clock (the plan stamps' and update()'s).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gato/plant.hpp"
#include "gato/triple_buffer.hpp"
#include "gato/types.hpp"

namespace gato {

/// One plan, preallocated for up to capacity() knots. Layout (row-major):
/// x (capacity, 2 nv) = [q; v] per knot; u (capacity - 1, nv) = the torque the
/// solver held constant over [t_k, t_{k+1}), t_k = stamp + k knot_dt;
/// K (capacity - 1, nv, 2 nv) = optional local feedback gains, torque
/// += K_k (x_plan(t) - x): the NEGATED solver gains (BSQP.feedback_gains() writes
/// u = u_k + K_k (x - x_k)), zero-order held over [t_k, t_{k+1}) like u_k. Only the
/// first n_knots (n_knots - 1) rows are valid.
struct ExecutorPlan {
  std::uint64_t seq = 0;      // sequence number, increasing within an epoch
  std::uint32_t epoch = 0;    // reset epoch of the publisher (new MPC start = higher epoch)
  std::int64_t stamp_ns = 0;  // t_0: stamp of the measured state the plan was solved from
  double knot_dt = 0.0;       // knot spacing [s]
  Integrator integrator = Integrator::kEuler;  // the solver's discretization (state interpolation)
  int n_knots = 0;            // valid knots (>= 2)
  bool has_gains = false;     // K is valid
  std::vector<double> x, u, K;

  /// Sizes the buffers for nv joints and up to max_knots knots (allocates).
  void allocate(int nv, int max_knots);
  int capacity() const { return capacity_; }
  int nv() const { return nv_; }

 private:
  int nv_ = 0, capacity_ = 0;
};

/// How a plan is executed between two plans (issue 33; gato.sim.FeedbackLaw's modes):
/// kPd: u_k + kp (q_plan - q) + kd (v_plan - v), the plan's gains ignored;
/// kRiccati: u_k + sat(K_k (x_plan - x)) when the plan carries usable gains, else the PD;
/// kRiccatiPd: u_k + PD + sat(K_k (x_plan - x)) (the PD alone without gains).
/// sat clips each joint to +-feedback_limit.
enum class FeedbackMode : std::uint8_t { kPd = 0, kRiccati = 1, kRiccatiPd = 2 };
/// "pd", "riccati", "riccati+pd".
const char* feedback_mode_name(FeedbackMode m);

/// The gains and limits that may change while the executor runs (each (nv)
/// vector in plant joint order).
struct ExecutorTunables {
  double plan_timeout_s = 0.1;  // a plan older than this (now - stamp) is not executed [s]
  std::vector<double> kp;       // joint stiffness toward the planned position [N*m/rad]
  std::vector<double> kd;       // joint damping toward the planned velocity [N*m*s/rad]
  std::vector<double> hold_damping;  // extra joint damping in the hold torque [N*m*s/rad]
  // The hold keeps the position where it began: tau = g(q) + M(q) (w^2 (q_hold - q) - 2 w v)
  // - hold_damping * v with w = 2 pi hold_frequency_hz (critically damped, scaled by the
  // mass matrix so that every joint, wrist or shoulder, settles alike and stays stable
  // for control lags up to 1 / w). 0: gravity compensation and hold_damping only. [Hz]
  double hold_frequency_hz = 4.0;
  double limit_margin = 0.05;   // the limit cut acts this far inside a URDF position limit [rad]
  bool use_plan_gains = true;   // false: never the plan's K (as feedback = kPd)
  FeedbackMode feedback = FeedbackMode::kRiccati;
  // |K_k (x_plan - x)| per joint is clipped to this [N*m]; empty: 0.25 x the URDF effort limit
  std::vector<double> feedback_limit;
};

/// Fixed at construction.
struct ExecutorConfig {
  int max_knots = 128;  // longest plan accepted (buffer size) [knots]
  ExecutorTunables tunables;  // initial values; empty vectors mean 0 for every joint
};

enum class ExecMode : std::uint8_t {
  kFollow = 0,   // plan torque + feedback
  kHold = 1,     // gravity compensation at the last good state + damping
  kNoState = 2,  // never had a finite state: zero torque (nothing to hold at)
};

/// Why the executor holds (kNone while following).
enum class HoldReason : std::uint8_t {
  kNone = 0,
  kNoPlan = 1,           // no plan accepted since configure / reset
  kPlanStale = 2,        // now - stamp > plan_timeout_s
  kPlanExhausted = 3,    // now is past the plan's last knot
  kStateNonFinite = 4,   // NaN / Inf in the measured position or velocity ("state_nan_inf")
  kOutputNonFinite = 5,  // the follow torque came out NaN / Inf ("output_nan_inf")
};
/// Short names (at most 15 characters: no heap in a std::string): "none", "no_plan",
/// "plan_stale", "plan_exhausted", "state_nan_inf", "output_nan_inf".
const char* hold_reason_name(HoldReason r);

/// Counters since construction (reset() keeps them).
struct ExecutorCounters {
  std::uint64_t updates = 0;
  std::uint64_t follow = 0;                // updates that executed the plan
  std::uint64_t holds = 0;                 // updates that output the hold torque
  std::uint64_t plans_accepted = 0;
  std::uint64_t dropped_out_of_order = 0;  // seq not above the last accepted one in its epoch
  std::uint64_t dropped_stale_epoch = 0;   // epoch below the last accepted one
  std::uint64_t dropped_invalid = 0;       // non-finite values, bad sizes, knot_dt <= 0
  std::uint64_t dropped_gains = 0;         // accepted plans whose gains were not finite (run with PD)
  std::uint64_t follow_gains = 0;          // follow updates that applied a plan's gains
  std::uint64_t gains_saturated = 0;       // follow updates with the gain term clipped
  std::uint64_t nonfinite_states = 0;      // updates with a NaN / Inf measured state
  std::uint64_t nonfinite_outputs = 0;     // updates whose follow torque was NaN / Inf
  std::uint64_t stale_events = 0;          // transitions into a stale / exhausted plan
  std::uint64_t clamped = 0;               // updates with a torque clamped to the effort limit
  std::uint64_t limit_cuts = 0;            // updates with a torque cut at a position limit
};

/// Samples p at s seconds after its stamp (s < 0 is taken as 0): knot k =
/// floor(s / knot_dt), tau = s - k knot_dt. Writes the planned q, v (nv) and
/// the torque u (nv) = u_k (zero-order hold: the solver held u_k constant over
/// the interval under every integrator). The state between knots follows the
/// integrator and meets both knots exactly:
///   kEuler (constant acceleration):  q = q_k + tau v_k + (tau/h)^2 (q_{k+1} - q_k - h v_k),
///                                    v linear from v_k to v_{k+1};
///   kSemiImplicit (q_{k+1} = q_k + h v_{k+1}): q and v linear between the knots;
///   kRk4 (smooth solution): q the cubic Hermite through (q_k, v_k), (q_{k+1}, v_{k+1}),
///                           v its time derivative.
/// Returns k, or -1 when s is at or past the last knot (nothing written).
int sample_plan(const ExecutorPlan& p, double s, double* q, double* v, double* u);

class PlanExecutor {
 public:
  /// Allocates everything. Throws std::invalid_argument when max_knots < 2, a
  /// tunable vector is neither empty nor nv long, a tunable is negative or
  /// non-finite, or a URDF effort limit is not positive.
  PlanExecutor(std::shared_ptr<const Plant<double>> plant, const ExecutorConfig& config);
  ~PlanExecutor();
  PlanExecutor(const PlanExecutor&) = delete;
  PlanExecutor& operator=(const PlanExecutor&) = delete;

  int nv() const { return nv_; }
  int max_knots() const { return max_knots_; }
  const Plant<double>& plant() const { return *plant_; }

  // ---- writer side (one non-real-time thread) ----
  /// The plan buffer to fill before submit() (preallocated; do not resize).
  ExecutorPlan& plan_slot() { return inbox_.back(); }
  /// Hands the filled plan_slot() to update(), which validates it.
  void submit() { inbox_.publish(); }
  /// Copies p into plan_slot() and submits it. Throws std::invalid_argument
  /// when p has more knots than max_knots or another joint count.
  void submit(const ExecutorPlan& p);

  // ---- tunables (any non-real-time thread, one at a time) ----
  /// Validates and hands new tunables to update(); applied at its next call.
  /// Throws std::invalid_argument like the constructor.
  void set_tunables(const ExecutorTunables& t);
  /// The tunables update() uses now (real-time thread, or when it is idle).
  const ExecutorTunables& tunables() const { return tun_; }

  // ---- real-time side (one thread) ----
  /// One control step at time now_ns from the measured q, v (nv): writes tau
  /// (nv) [N*m]. Takes a newly submitted plan (accepts or drops it), samples
  /// the active plan, applies the safety rules (see the class comment file).
  ExecMode update(std::int64_t now_ns, const double* q, const double* v, double* tau) noexcept;
  /// Drops the active plan and forgets the sequence / epoch (controller
  /// activation). The next update() holds until a new plan arrives.
  void reset() noexcept;

  ExecMode mode() const { return mode_; }
  HoldReason hold_reason() const { return reason_; }
  const ExecutorCounters& counters() const { return counters_; }
  bool has_plan() const { return has_plan_; }
  const ExecutorPlan& active_plan() const { return active_; }
  /// The last update()'s planned q, v and feed-forward torque (nv; follow mode only).
  const std::vector<double>& q_ref() const { return q_ref_; }
  const std::vector<double>& v_ref() const { return v_ref_; }
  const std::vector<double>& u_ff() const { return u_ff_; }
  /// The last good (finite) measured position (nv); valid once a finite state was seen.
  const std::vector<double>& q_good() const { return q_good_; }

 private:
  void validate(const ExecutorTunables& t) const;
  void accept_incoming() noexcept;
  void gravity(const double* q) noexcept;  // into g_
  // q, v: the measured state, or nullptr when it is not finite (then g(q_good) only).
  void hold(const double* q_or_null, const double* v_or_null, double* tau) noexcept;

  std::shared_ptr<const Plant<double>> plant_;
  std::unique_ptr<PlantWorkspace<double>> ws_;
  int nv_ = 0, max_knots_ = 0;
  TripleBuffer<ExecutorPlan> inbox_;
  TripleBuffer<ExecutorTunables> tun_inbox_;
  ExecutorTunables tun_;
  ExecutorPlan active_;
  bool has_plan_ = false, seen_plan_ = false, have_good_ = false, stale_ = false;
  std::uint64_t last_seq_ = 0;
  std::uint32_t last_epoch_ = 0;
  ExecMode mode_ = ExecMode::kNoState;
  HoldReason reason_ = HoldReason::kNoPlan;
  ExecutorCounters counters_;
  std::vector<double> q_ref_, v_ref_, u_ff_, q_good_, zeros_, g_, dx_;
  std::vector<double> fb_limit_default_;  // 0.25 x u_max: feedback_limit when none is given
  std::vector<double> q_hold_, a_hold_;  // where the current hold began; its acceleration
  std::vector<double> q_lo_, q_hi_, u_max_;
};

}  // namespace gato
