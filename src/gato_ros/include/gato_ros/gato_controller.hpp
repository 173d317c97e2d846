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
// PlanExecutor::update() and try_publish()es a preallocated status message;
// it never allocates, locks (only try_lock in RealtimePublisher) or throws.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "controller_interface/controller_interface.hpp"
#include "gato/plan_executor.hpp"
#include "gato_msgs/msg/controller_status.hpp"
#include "gato_msgs/msg/plan.hpp"
#include "gato_ros/gato_controller_parameters.hpp"
#include "rclcpp/rclcpp.hpp"
#include "realtime_tools/realtime_publisher.hpp"

namespace gato_ros {

class GatoController : public controller_interface::ControllerInterface {
 public:
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
  void apply_parameters();                          // timer thread: tunables -> executor
  gato::ExecutorTunables tunables_from(const gato_plugin::Params& p) const;
  bool read_state() noexcept;                       // interfaces -> q_, v_ (plant order)
  void write_torque(const std::vector<double>& tau) noexcept;  // plant order -> interfaces

  std::shared_ptr<gato_plugin::ParamListener> param_listener_;
  gato_plugin::Params params_;
  std::vector<std::string> joints_;                 // interface order
  std::shared_ptr<gato::Plant<double>> plant_;
  std::unique_ptr<gato::PlanExecutor> executor_;
  std::vector<int> plant_to_iface_;                 // plant joint j -> interface index
  std::vector<double> q_, v_, tau_, zeros_;         // plant order, preallocated
  std::vector<std::string> plant_joints_;
  // Plan conversion (subscription thread only): plan joint k -> plant joint index.
  std::vector<std::string> last_plan_names_;
  std::vector<int> plan_to_plant_;
  std::atomic<std::uint64_t> plans_rejected_names_{0}, plans_rejected_layout_{0};

  rclcpp::Subscription<gato_msgs::msg::Plan>::SharedPtr plan_sub_;
  rclcpp::TimerBase::SharedPtr param_timer_;
  rclcpp::Publisher<gato_msgs::msg::ControllerStatus>::SharedPtr status_pub_;
  std::unique_ptr<realtime_tools::RealtimePublisher<gato_msgs::msg::ControllerStatus>> rt_status_;
  gato_msgs::msg::ControllerStatus status_msg_;
  // update() durations since activation: 0.5 us bins up to 1 ms, the last bin for longer
  // ones, the exact maximum (preallocated at configure; percentiles read at status time).
  static constexpr int kTimingBins = 2001;
  static constexpr double kTimingBinUs = 0.5;
  std::vector<std::uint32_t> timing_hist_;
  std::uint64_t timing_count_ = 0;
  double timing_max_us_ = 0.0;
  double timing_percentile(double fraction) const noexcept;
  std::int64_t next_status_ns_ = 0, status_period_ns_ = 50000000;
};

}  // namespace gato_ros
