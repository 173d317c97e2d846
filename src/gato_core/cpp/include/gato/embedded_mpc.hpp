// A ROS-free MPC loop around one BSQP problem (batch 1), for the ros2_control
// plugin's embedded mode: the plugin's solver thread calls step() with the
// newest measured state and EE reference window and hands the plan to the
// PlanExecutor. Warm start, time shift and reference sampling follow the Python
// MPCController's conventions: a cold start seeds a hold (every knot the
// measured state, zero torques) and runs warm-up solves; later steps shift the
// previous solution by the elapsed whole knots; the reference is sampled at the
// state's time with the solver's knot spacing (linear interpolation, clamped to
// the window's ends; gato.references.ReferenceWindow.sample).
//
// Not real-time: step() runs a solve (allocation-free inside the solver) and
// is meant for a non-real-time thread. Units: rad, rad/s, N*m, m, s, ns.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "gato/plan_executor.hpp"
#include "gato/plant.hpp"
#include "gato/types.hpp"

namespace gato {

template <typename S>
class BatchSolver;
struct SolveStats;

/// An EE reference window: n_knots positions (capacity, 3) [m], knot j at
/// stamp_ns + j * knot_dt.
struct EeWindow {
  std::int64_t stamp_ns = 0;
  double knot_dt = 0.0;  // [s]
  int n_knots = 0;
  std::vector<double> p;
  void allocate(int capacity) { p.assign(size_t(capacity) * 3, 0.0); n_knots = 0; }
  int capacity() const { return int(p.size() / 3); }
};

struct EmbeddedMpcConfig {
  int N = 32;                // horizon [knots]
  double dt = 0.03125;       // knot spacing [s]
  Settings settings;         // solver settings (costs, iterations, integrator, linsys)
  int warmup_solves = 5;     // solves on a cold start before the first plan
  int threads = 1;           // solver threads (batch 1: one is enough)
};

class EmbeddedMpc {
 public:
  /// Builds the solver (allocates). Throws std::invalid_argument on bad sizes.
  EmbeddedMpc(std::shared_ptr<const Plant<double>> plant, const EmbeddedMpcConfig& config);
  ~EmbeddedMpc();
  EmbeddedMpc(const EmbeddedMpc&) = delete;
  EmbeddedMpc& operator=(const EmbeddedMpc&) = delete;

  int N() const { return N_; }
  double dt() const { return dt_; }
  int nv() const { return nv_; }
  int xu_size() const;

  /// New solver settings, used from the next step on.
  void set_settings(const Settings& s);
  /// The next step starts cold (hold warm start, warm-up solves, hold reference
  /// at the EE position of that state when no window is given).
  void reset();

  /// One MPC step from x (2 nv: q then v, plant order) measured at stamp_ns,
  /// toward ref (nullptr or no knots: hold the EE position of the last cold
  /// start's state). Writes the plan into out (n_knots = N, knot_dt = dt, the
  /// settings' integrator, stamp_ns; seq / epoch are the caller's). Returns
  /// false when the solution is not finite: out is untouched and the next step
  /// starts cold.
  bool step(std::int64_t stamp_ns, const double* x, const EeWindow* ref, ExecutorPlan& out);

  /// Issue 33: with gains on, every step also writes the plan's feedback gains into
  /// out.K (the solver's BatchSolver::feedback_gains of the solved plan, negated to the
  /// executor's convention torque += K (x_plan - x); has_gains set) when they exist (a
  /// knot whose R + B' P B is not positive definite leaves has_gains false, counted in
  /// gains_failed()). Costs one KKT assembly and a Riccati sweep per step (no allocation
  /// for the fixed-size 6- / 7-DoF kernels). Off by default.
  void set_gains(bool on) { gains_ = on; }
  bool gains() const { return gains_; }
  std::uint64_t gains_failed() const { return gains_failed_; }

  bool last_was_cold() const { return last_cold_; }
  /// The solved trajectory [x_0, u_0, ..., x_{N-1}] (xu_size()).
  const std::vector<double>& xu() const { return xu_; }
  /// The (6N) reference the last step solved toward.
  const std::vector<double>& reference() const { return ref_; }
  /// Issue 30: the EE tracking of the last step, as the controller node's ControllerStatus
  /// reports it: the distance [m] of the EE at the measured state the step solved from
  /// (forward kinematics of x, the EE the solver tracks) from knot 0 of the reference it
  /// solved toward (reference()[0:3]: the window sampled at the state's time, or the hold
  /// position). NaN before the first step and after a step that failed.
  double ee_position_error() const { return ee_err_; }
  const SolveStats& stats() const;
  double last_solve_us() const { return solve_us_; }

 private:
  void sample_reference(std::int64_t stamp_ns, const EeWindow* ref);

  std::shared_ptr<const Plant<double>> plant_;
  std::unique_ptr<PlantWorkspace<double>> ws_;
  std::unique_ptr<BatchSolver<double>> solver_;
  int N_ = 0, nv_ = 0, warmup_ = 0;
  double dt_ = 0.0;
  bool cold_ = true, last_cold_ = false, gains_ = false;
  std::uint64_t gains_failed_ = 0;
  std::vector<double> K_;  // (N - 1, nv, 2 nv) the solver's gains of the last step
  std::int64_t last_stamp_ = 0;
  std::vector<double> xu_, ref_, hold_ee_, x_;
  double solve_us_ = 0.0;
  double ee_err_ = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace gato
