// gato_ros/GatoController: the ros2_control controller plugin of gato, a thin
// shell over the core's ROS-free gato::PlanExecutor (include/gato/plan_executor.hpp).
//
// follow mode: gato_msgs/Plan messages from the gato controller node (started
// with publish_commands:=false) are converted to the plant's joint order on the
// subscription thread and handed to the real-time loop through the executor's
// wait-free triple buffer; update() samples the newest valid plan and writes
// the torques to the <joint>/effort command interfaces. The safety rules
// (hold, clamp, limit cut, dropped plans) are the executor's; see
// src/gato_ros/README.md ("ros2_control plugin").
//
// Real-time rules: update() reads and writes the interfaces, calls
// PlanExecutor::update(), try_publish()es a preallocated status message and pushes
// the tick's record into a preallocated lock-free ring (TickRing); it never allocates,
// locks (only try_lock in RealtimePublisher) or throws. A non-real-time thread drains
// the ring and publishes the ticks in batches on ~/ticks (gato_msgs/ControlTicks).
//
// Diagnostics: update() also hands a plain snapshot (DiagSample: mode, hold reason, plan age,
// counters, missed cycles) to a wait-free triple buffer every tick; a diagnostic_updater task
// on the controller's node (the controller manager's executor, not the real-time loop) reads
// it and publishes one status on /diagnostics every `diagnostic_updater.period` (1 s) with the
// levels of src/gato_ros/README.md ("ros2_control plugin", diagnostics).
#pragma once

#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller_interface/controller_interface.hpp"
#include "diagnostic_updater/diagnostic_updater.hpp"
#include "gato/embedded_mpc.hpp"
#include "gato/plan_executor.hpp"
#include "gato/triple_buffer.hpp"
#include "gato_msgs/msg/control_ticks.hpp"
#include "gato_msgs/msg/controller_status.hpp"
#include "gato_msgs/msg/ee_reference.hpp"
#include "gato_msgs/msg/plan.hpp"
#include "gato_msgs/msg/solver_stats.hpp"
#include "gato_msgs/msg/step_result.hpp"
#include "gato_ros/gato_controller_parameters.hpp"
#include "gato_ros/tick_ring.hpp"
#include "rclcpp/rclcpp.hpp"
#include "realtime_tools/realtime_publisher.hpp"

namespace gato_ros {

/// The executor mode's short name in ~/status and /diagnostics ("follow", "hold", "waiting"):
/// string literals, no heap (update() calls it).
inline const char* state_name(gato::ExecMode m) noexcept {
  switch (m) {
    case gato::ExecMode::kFollow: return "follow";
    case gato::ExecMode::kHold: return "hold";
    case gato::ExecMode::kNoState: return "waiting";
  }
  return "?";
}

class GatoController : public controller_interface::ControllerInterface {
 public:
  ~GatoController() override;
  controller_interface::CallbackReturn on_init() override;
  controller_interface::InterfaceConfiguration command_interface_configuration() const override;
  controller_interface::InterfaceConfiguration state_interface_configuration() const override;
  controller_interface::CallbackReturn on_configure(const rclcpp_lifecycle::State& previous) override;
  controller_interface::CallbackReturn on_activate(const rclcpp_lifecycle::State& previous) override;
  controller_interface::CallbackReturn on_deactivate(const rclcpp_lifecycle::State& previous) override;
  controller_interface::CallbackReturn on_cleanup(const rclcpp_lifecycle::State& previous) override;
  controller_interface::return_type update(const rclcpp::Time& time, const rclcpp::Duration& period) override;

 private:
  void on_plan(const gato_msgs::msg::Plan& msg);    // subscription thread
  void on_reference(const gato_msgs::msg::EEReference& msg);  // subscription thread (embedded)
  void solver_loop();                               // embedded mode's solver thread
  void stop_solver_thread();
  void tick_loop();                                 // ticks thread: ring -> ~/ticks batches
  void drain_ticks();                               // ticks thread: one batch message
  void stop_tick_thread();
  gato::Settings settings_from(const gato_plugin::Params& p) const;
  void publish_solve(std::int64_t stamp_ns);        // solver thread: StepResult, SolverStats
  void apply_parameters();                          // timer thread: tunables -> executor
  gato::ExecutorTunables tunables_from(const gato_plugin::Params& p) const;
  bool read_state() noexcept;                       // interfaces -> q_, v_, effort_ (plant order)
  void track_effort() noexcept;                     // measured effort vs the previous command
  void write_torque(const std::vector<double>& tau) noexcept;  // plant order -> interfaces
  void diagnose(diagnostic_updater::DiagnosticStatusWrapper& stat);  // diagnostics timer (not RT)
  void fill_status(const rclcpp::Time& time, gato::ExecMode mode) noexcept;  // status_msg_ (RT)

  std::shared_ptr<gato_plugin::ParamListener> param_listener_;
  gato_plugin::Params params_;
  std::vector<std::string> joints_;                 // interface order
  std::shared_ptr<gato::Plant<double>> plant_;
  std::unique_ptr<gato::PlanExecutor> executor_;
  std::vector<int> plant_to_iface_;                 // plant joint j -> interface index
  std::vector<double> q_, v_, tau_, zeros_;         // plant order, preallocated
  // <joint>/effort state interfaces: claimed when the robot_description's ros2_control block
  // offers one for every joint (use_effort_); then effort_ holds the measured torques (plant
  // order) and effort_err_max_ the largest |measured - previous command| since the last status.
  bool use_effort_ = false, have_prev_cmd_ = false, effort_err_nan_ = false;
  std::vector<double> effort_;
  double effort_err_max_ = 0.0;
  // Test instrumentation (test/cpp/alloc_probe): markers around update(), looked up with dlsym
  // at configure only when GATO_ALLOC_PROBE is set; null otherwise (one untaken branch).
  using ProbeFn = void (*)();
  ProbeFn probe_begin_ = nullptr, probe_end_ = nullptr;
  std::vector<std::string> plant_joints_;
  // Plan conversion (subscription thread only): plan joint k -> plant joint index.
  std::vector<std::string> last_plan_names_;
  std::vector<int> plan_to_plant_;
  std::atomic<std::uint64_t> plans_rejected_names_{0}, plans_rejected_layout_{0};
  // plans whose gains were not (n_knots - 1) nu nx values: the plan ran without them (issue 33);
  // non-finite gains are dropped by the executor (ExecutorCounters::dropped_gains)
  std::atomic<std::uint64_t> gains_rejected_size_{0};
  // embedded mode: the solver thread computes the plan's gains (feedback != pd, use_plan_gains)
  std::atomic<bool> embedded_gains_{false};
  // EE reference windows refused by on_reference (embedded mode; ~/status rejected_references)
  std::atomic<std::uint64_t> refs_rejected_{0};

  rclcpp::Subscription<gato_msgs::msg::Plan>::SharedPtr plan_sub_;
  rclcpp::TimerBase::SharedPtr param_timer_;
  rclcpp::Publisher<gato_msgs::msg::ControllerStatus>::SharedPtr status_pub_;
  std::unique_ptr<realtime_tools::RealtimePublisher<gato_msgs::msg::ControllerStatus>> rt_status_;
  gato_msgs::msg::ControllerStatus status_msg_;
  // update() durations since activation: 0.5 us bins up to 1 ms, the last bin for longer
  // ones, the exact maximum (preallocated at configure; percentiles read at status time).
  // embedded mode: the control loop's newest state for the solver thread (stamp, x = [q; v]),
  // the EE reference window (subscription -> solver thread, under ref_mutex_), pending settings.
  struct StateSample {
    std::int64_t stamp_ns = 0;
    std::vector<double> x;
  };
  bool embedded_ = false;
  std::unique_ptr<gato::EmbeddedMpc> mpc_;
  gato::TripleBuffer<StateSample> state_box_;
  std::thread solver_thread_;
  std::atomic<bool> stop_{false}, solving_{false}, reset_mpc_{false};
  std::mutex ref_mutex_, settings_mutex_;
  gato::EeWindow ref_in_, ref_work_;
  bool ref_in_valid_ = false, settings_pending_ = false;
  gato::Settings pending_settings_;
  gato::LinSys linsys_ = gato::LinSys::kBdsv;  // solver thread's copy, for SolverStats
  std::uint64_t plan_seq_ = 0;
  std::uint32_t plan_epoch_ = 0;
  std::atomic<std::uint64_t> solve_failures_{0};
  std::atomic<double> last_solve_us_{0.0};
  // issue 30: the last successful embedded solve's measured EE against knot 0 of the reference it
  // solved toward [m] (EmbeddedMpc::ee_position_error; NaN after a failed solve), for ~/status
  std::atomic<double> ee_pos_err_{std::numeric_limits<double>::quiet_NaN()};
  // ... and the angle [rad] of R_ref^T R_ee against knot 0's orientation (EmbeddedMpc::ee_orientation_error;
  // NaN when the window had no orientations)
  std::atomic<double> ee_rot_err_{std::numeric_limits<double>::quiet_NaN()};
  double pending_pose_scale_ = 1.0;  // pose_ee_weight_scale with pending_settings_ (issue 30)
  double solve_period_s_ = 0.01;
  rclcpp::Subscription<gato_msgs::msg::EEReference>::SharedPtr ref_sub_;
  rclcpp::Publisher<gato_msgs::msg::StepResult>::SharedPtr step_pub_;
  rclcpp::Publisher<gato_msgs::msg::SolverStats>::SharedPtr stats_pub_;
  std::unique_ptr<realtime_tools::RealtimePublisher<gato_msgs::msg::StepResult>> rt_step_;
  std::unique_ptr<realtime_tools::RealtimePublisher<gato_msgs::msg::SolverStats>> rt_stats_;
  gato_msgs::msg::StepResult step_msg_;
  gato_msgs::msg::SolverStats stats_msg_;
  // State stamp -> first update() that executes the plan solved from it (plan latency):
  // 10 us bins up to 100 ms, exact maximum, the last value.
  static constexpr int kLatencyBins = 10001;
  static constexpr double kLatencyBinUs = 10.0;
  std::vector<std::uint32_t> latency_hist_;
  std::uint64_t latency_count_ = 0, seen_accepted_ = 0;
  double latency_max_us_ = 0.0, latency_last_us_ = 0.0;
  static double percentile(const std::vector<std::uint32_t>& hist, std::uint64_t count, double bin_us,
                           double max_us, double fraction) noexcept;

  static constexpr int kTimingBins = 2001;
  static constexpr double kTimingBinUs = 0.5;
  std::vector<std::uint32_t> timing_hist_;
  std::uint64_t timing_count_ = 0;
  double timing_max_us_ = 0.0;

  std::int64_t next_status_ns_ = 0, status_period_ns_ = 50000000;

  // Per-tick records (~/ticks): update() numbers every tick (tick_seq_, from 1 after configure)
  // and pushes it into ring_; tick_thread_ publishes what accumulated every kTickBatchMs.
  static constexpr std::size_t kTickRingCapacity = 8192;  // 8 s at 1 kHz before update() drops
  static constexpr int kTickBatchMs = 10;
  TickRing ring_;
  std::uint64_t tick_seq_ = 0;
  std::thread tick_thread_;
  std::atomic<bool> tick_stop_{false};
  rclcpp::Publisher<gato_msgs::msg::ControlTicks>::SharedPtr ticks_pub_;
  gato_msgs::msg::ControlTicks ticks_msg_;            // tick thread only

  // Diagnostics (/diagnostics). update() fills and publishes one DiagSample per tick (plain
  // values: no heap); diagnose() takes the newest and compares it with the previous report's.
  struct DiagSample {
    std::int64_t now_ns = 0;          // the update's time
    std::int64_t plan_stamp_ns = 0;   // the active plan's stamp (valid when has_plan)
    bool has_plan = false;
    gato::ExecMode mode = gato::ExecMode::kNoState;
    gato::HoldReason reason = gato::HoldReason::kNoPlan;
    double plan_timeout_s = 0.0;      // the executor's (live tunable)
    gato::ExecutorCounters counters;
    std::uint64_t missed_cycles = 0;  // updates whose period exceeded 1.5 x the nominal one
    std::uint64_t overruns = 0;       // updates whose own run time exceeded the nominal period
    std::uint64_t rejected_names = 0, rejected_layout = 0, rejected_references = 0, solver_failures = 0;
    std::uint64_t gains_rejected_size = 0;
    double update_max_us = 0.0, period_max_ms = 0.0;  // since activation
  };
  gato::TripleBuffer<DiagSample> diag_box_;
  std::unique_ptr<diagnostic_updater::Updater> diagnostics_;
  std::int64_t nominal_period_ns_ = 0;  // 1 / the controller's update rate (0: unknown)
  bool first_update_ = true;
  std::uint64_t missed_cycles_ = 0, overruns_ = 0;
  double period_max_ms_ = 0.0;
  std::atomic<bool> active_{false}, diag_restart_{true};
  DiagSample diag_prev_;                // diagnostics timer only: the previous report's sample
  bool diag_have_prev_ = false;
};

}  // namespace gato_ros
