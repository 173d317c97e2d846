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
// Issue 30: a window may carry EE orientations (one per knot, gato_msgs/EEReference
// .orientations). A step toward one solves with the orientation term on: the reference's slots
// [3:6] take the window's orientations sampled at the solver's knots (spherical interpolation,
// gato.references.ReferenceWindow.sample_orientations), the term's weights are the settings'
// rot_cost / N_rot_cost, and the EE position weights q_cost / N_cost are multiplied by
// pose_ee_weight_scale (the Python MPCController's). A position-only step solves with
// rot_cost = N_rot_cost = 0 and the settings' q_cost / N_cost (zeros in slots [3:6]).
//
// Not real-time: step() runs a solve (allocation-free inside the solver) and
// is meant for a non-real-time thread. Units: rad, rad/s, N*m, m, s, ns.
#pragma once

#include <cstddef>
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

/// How far the norm of an orientation quaternion may be from 1 (gato.references.QUAT_UNIT_TOL).
inline constexpr double kQuatUnitTol = 1e-3;

/// Whether n quaternions (n, 4) xyzw are finite with norms within kQuatUnitTol of 1.
bool unit_quaternions(const double* q, std::size_t n);

/// An EE reference window: n_knots positions (capacity, 3) [m], knot j at
/// stamp_ns + j * knot_dt; optionally n_knots orientations r (capacity, 3), rotation vectors
/// [rad] (world frame, norm in [0, pi]), used when has_orientations.
struct EeWindow {
  std::int64_t stamp_ns = 0;
  double knot_dt = 0.0;  // [s]
  int n_knots = 0;
  bool has_orientations = false;
  std::vector<double> p, r;
  void allocate(int capacity) {
    p.assign(size_t(capacity) * 3, 0.0);
    r.assign(size_t(capacity) * 3, 0.0);
    n_knots = 0;
    has_orientations = false;
  }
  int capacity() const { return int(p.size() / 3); }
  /// The orientations of the first n knots from unit quaternions q (n, 4) xyzw (as
  /// gato.references.quat_to_rotvec: q and -q alike); false (nothing set) when n exceeds the
  /// capacity or unit_quaternions(q, n) fails. n == 0: position only.
  bool set_orientations_xyzw(const double* q, int n);
};

struct EmbeddedMpcConfig {
  int N = 32;                // horizon [knots]
  double dt = 0.03125;       // knot spacing [s]
  Settings settings;         // solver settings (costs, iterations, integrator, linsys)
  int warmup_solves = 5;     // solves on a cold start before the first plan
  int threads = 1;           // solver threads (batch 1: one is enough)
  double pose_ee_weight_scale = 1.0;  // factor on q_cost / N_cost of steps toward orientations (> 0)
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

  /// New solver settings, used from the next step on (rot_cost / N_rot_cost: the orientation
  /// weights of steps toward a window with orientations).
  void set_settings(const Settings& s);
  /// The factor on q_cost / N_cost of steps toward orientations (> 0, else invalid_argument).
  void set_pose_ee_weight_scale(double scale);
  double pose_ee_weight_scale() const { return pose_scale_; }
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
  /// The angle [rad] of R_ref^T R_ee at the measured state against knot 0's orientation
  /// (reference()[3:6]) of the last step; NaN when it solved toward positions only (as
  /// ControllerStatus.ee_orientation_error), before the first step and after a failed one.
  double ee_orientation_error() const { return ee_rot_err_; }
  const SolveStats& stats() const;
  double last_solve_us() const { return solve_us_; }

 private:
  void sample_reference(std::int64_t stamp_ns, const EeWindow* ref);
  void apply_pose_settings(bool pose);  // the settings of a pose / position-only step (on a change)

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
  double ee_rot_err_ = std::numeric_limits<double>::quiet_NaN();
  Settings base_;              // the configured settings
  double pose_scale_ = 1.0;
  bool pose_on_ = false, settings_dirty_ = false;  // the solver's settings are a pose step's
};

}  // namespace gato
