// gato_ros/GatoController: see include/gato_ros/gato_controller.hpp.
#include "gato_ros/gato_controller.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include "gato/solver.hpp"  // SolveStats of the embedded solves
#include "hardware_interface/component_parser.hpp"
#include "pluginlib/class_list_macros.hpp"

namespace gato_ros {

using controller_interface::CallbackReturn;
using controller_interface::InterfaceConfiguration;
using controller_interface::interface_configuration_type;

namespace {
constexpr double kMissedPeriodFactor = 1.5;  // a period over 1.5 x the nominal one: a missed cycle

/// The child link of joint `name` in a URDF text, or "" (the first <joint ... name="name"> element).
std::string child_link_of(const std::string& urdf, const std::string& name) {
  const std::string key = "name=\"" + name + "\"";
  for (size_t pos = urdf.find("<joint"); pos != std::string::npos; pos = urdf.find("<joint", pos + 1)) {
    const size_t end = urdf.find('>', pos);
    if (end == std::string::npos) break;
    if (urdf.compare(pos, 7, "<joint ") != 0 && urdf.compare(pos, 7, "<joint\n") != 0) continue;
    if (urdf.substr(pos, end - pos).find(key) == std::string::npos) continue;
    const size_t close = urdf.find("</joint>", end);
    const size_t child = urdf.find("<child", end);
    if (child == std::string::npos || (close != std::string::npos && child > close)) return "";
    const size_t q0 = urdf.find('"', urdf.find("link", child));
    const size_t q1 = q0 == std::string::npos ? q0 : urdf.find('"', q0 + 1);
    return q1 == std::string::npos ? "" : urdf.substr(q0 + 1, q1 - q0 - 1);
  }
  return "";
}

gato::Integrator integrator_from(const std::string& name, bool& ok) {
  ok = true;
  if (name == "euler" || name.empty()) return gato::Integrator::kEuler;
  if (name == "semi_implicit") return gato::Integrator::kSemiImplicit;
  if (name == "rk4") return gato::Integrator::kRk4;
  ok = false;
  return gato::Integrator::kEuler;
}
}  // namespace

CallbackReturn GatoController::on_init() {
  try {
    param_listener_ = std::make_shared<gato_plugin::ParamListener>(get_node());
    params_ = param_listener_->get_params();
  } catch (const std::exception& e) {
    RCLCPP_ERROR(get_node()->get_logger(), "gato plugin parameters: %s", e.what());
    return CallbackReturn::ERROR;
  }
  return CallbackReturn::SUCCESS;
}

InterfaceConfiguration GatoController::command_interface_configuration() const {
  InterfaceConfiguration c{interface_configuration_type::INDIVIDUAL, {}};
  for (const auto& j : joints_) c.names.push_back(j + "/effort");
  return c;
}

InterfaceConfiguration GatoController::state_interface_configuration() const {
  // Order: every joint's position, then every joint's velocity, then (when the hardware
  // offers them, see on_configure) every joint's effort; read_state relies on it.
  InterfaceConfiguration c{interface_configuration_type::INDIVIDUAL, {}};
  for (const auto& j : joints_) c.names.push_back(j + "/position");
  for (const auto& j : joints_) c.names.push_back(j + "/velocity");
  if (use_effort_)
    for (const auto& j : joints_) c.names.push_back(j + "/effort");
  return c;
}

gato::ExecutorTunables GatoController::tunables_from(const gato_plugin::Params& p) const {
  gato::ExecutorTunables t;
  t.plan_timeout_s = p.plan_timeout;
  t.limit_margin = p.limit_margin;
  t.use_plan_gains = p.use_plan_gains;
  t.feedback = p.feedback == "pd" ? gato::FeedbackMode::kPd
               : p.feedback == "riccati+pd" ? gato::FeedbackMode::kRiccatiPd : gato::FeedbackMode::kRiccati;
  // The parameters list gains in interface (joints) order; the executor wants plant order.
  auto reorder = [&](const std::vector<double>& g, const char* name) {
    if (g.empty()) return std::vector<double>();
    if (g.size() != joints_.size())
      throw std::invalid_argument(std::string(name) + ": " + std::to_string(g.size()) + " values for " +
                                  std::to_string(joints_.size()) + " joints (give one per joint, or none)");
    std::vector<double> out(g.size());
    for (size_t j = 0; j < out.size(); ++j) out[j] = g[size_t(plant_to_iface_[j])];
    return out;
  };
  t.kp = reorder(p.kp, "kp");
  t.kd = reorder(p.kd, "kd");
  t.hold_damping = reorder(p.hold_damping, "hold_damping");
  t.feedback_limit = reorder(p.feedback_limit, "feedback_limit");  // empty: 0.25 x the effort limit
  t.hold_frequency_hz = p.hold_frequency_hz;
  return t;
}

CallbackReturn GatoController::on_configure(const rclcpp_lifecycle::State&) {
  auto log = get_node()->get_logger();
  params_ = param_listener_->get_params();
  joints_ = params_.joints;
  if (joints_.empty()) {
    RCLCPP_ERROR(log, "joints: empty; list the joints the plugin commands");
    return CallbackReturn::ERROR;
  }
  const std::string& description = get_robot_description();
  if (description.empty()) {
    RCLCPP_ERROR(log, "no robot_description from the controller manager: the plugin needs the URDF "
                      "(dynamics for the hold torque, effort and position limits)");
    return CallbackReturn::ERROR;
  }
  // The plant loads a URDF file. Its EE frame is what the embedded MPC tracks the
  // reference with (the executor does not use it): `ee_frame`, else the child link of
  // the last commanded joint. (Scanned here, not with urdfdom: the plant's pinocchio
  // brings its own urdfdom, and two in one process would clash.)
  const std::string ee_link = params_.ee_frame.empty() ? child_link_of(description, joints_.back())
                                                       : params_.ee_frame;
  if (ee_link.empty()) {
    RCLCPP_ERROR(log, "joints: '%s' is not a joint of the robot_description", joints_.back().c_str());
    return CallbackReturn::ERROR;
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("gato_plugin_" + std::to_string(::getpid()) + "_" + get_node()->get_name() + ".urdf");
  try {
    {
      std::ofstream f(path);
      f << description;
    }
    plant_ = std::make_shared<gato::Plant<double>>(path.string(), ee_link);
    std::filesystem::remove(path);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    RCLCPP_ERROR(log, "robot_description: %s", e.what());
    return CallbackReturn::ERROR;
  }
  plant_joints_ = plant_->joint_names();
  if (plant_joints_.size() != joints_.size()) {
    RCLCPP_ERROR(log, "joints: %zu given, the robot_description has %zu movable joints; the plugin commands "
                      "all of them", joints_.size(), plant_joints_.size());
    return CallbackReturn::ERROR;
  }
  plant_to_iface_.assign(plant_joints_.size(), -1);
  for (size_t j = 0; j < plant_joints_.size(); ++j) {
    auto it = std::find(joints_.begin(), joints_.end(), plant_joints_[j]);
    if (it == joints_.end()) {
      RCLCPP_ERROR(log, "joints: the robot_description's joint '%s' is not in 'joints'", plant_joints_[j].c_str());
      return CallbackReturn::ERROR;
    }
    plant_to_iface_[j] = int(it - joints_.begin());
  }
  // Measured effort: read when the hardware offers <joint>/effort state interfaces for every
  // commanded joint, as the robot_description's ros2_control blocks (what the controller
  // manager built the hardware from) declare them; otherwise position and velocity only.
  use_effort_ = false;
  try {
    std::set<std::string> with_effort;
    for (const auto& hw : hardware_interface::parse_control_resources_from_urdf(description))
      for (const auto& joint : hw.joints)
        for (const auto& si : joint.state_interfaces)
          if (si.name == "effort") with_effort.insert(joint.name);
    use_effort_ = std::all_of(joints_.begin(), joints_.end(),
                              [&](const std::string& j) { return with_effort.count(j) > 0; });
  } catch (const std::exception& e) {
    RCLCPP_WARN(log, "robot_description: no ros2_control block read (%s): effort state interfaces not used",
                e.what());
  }
  probe_begin_ = probe_end_ = nullptr;
  if (const char* probe = std::getenv("GATO_ALLOC_PROBE"); probe && *probe && std::string(probe) != "0") {
    probe_begin_ = reinterpret_cast<ProbeFn>(dlsym(RTLD_DEFAULT, "gato_alloc_probe_begin"));
    probe_end_ = reinterpret_cast<ProbeFn>(dlsym(RTLD_DEFAULT, "gato_alloc_probe_end"));
    if (!probe_begin_ || !probe_end_) {
      RCLCPP_WARN(log, "GATO_ALLOC_PROBE is set but the probe library (test/cpp/alloc_probe) is not preloaded");
      probe_begin_ = probe_end_ = nullptr;
    } else {
      RCLCPP_INFO(log, "GATO_ALLOC_PROBE: update() is instrumented with the allocation probe markers");
    }
  }
  try {
    gato::ExecutorConfig cfg;
    cfg.max_knots = int(params_.max_knots);
    cfg.tunables = tunables_from(params_);
    embedded_gains_ = params_.embedded_gains && params_.use_plan_gains && params_.feedback != "pd";
    executor_ = std::make_unique<gato::PlanExecutor>(plant_, cfg);
  } catch (const std::exception& e) {
    RCLCPP_ERROR(log, "%s", e.what());
    return CallbackReturn::ERROR;
  }
  const size_t nv = plant_joints_.size();
  q_.assign(nv, 0.0);
  v_.assign(nv, 0.0);
  tau_.assign(nv, 0.0);
  zeros_.assign(nv, 0.0);
  effort_.assign(nv, 0.0);
  last_plan_names_.clear();
  plan_to_plant_.clear();
  timing_hist_.assign(kTimingBins, 0);
  status_msg_.reason.reserve(32);  // no heap in update(): hold reasons are <= 15 characters anyway

  latency_hist_.assign(kLatencyBins, 0);
  embedded_ = params_.mode == "embedded";
  if (embedded_) {
    try {
      gato::EmbeddedMpcConfig mc;
      mc.N = int(params_.N);
      mc.dt = params_.dt;
      mc.settings = settings_from(params_);
      mc.warmup_solves = int(params_.warmup_solves);
      mc.pose_ee_weight_scale = params_.pose_ee_weight_scale;
      if (mc.N > executor_->max_knots())
        throw std::invalid_argument("N: " + std::to_string(mc.N) + " exceeds max_knots " +
                                    std::to_string(executor_->max_knots()));
      mpc_ = std::make_unique<gato::EmbeddedMpc>(plant_, mc);
      linsys_ = mc.settings.linsys;
    } catch (const std::exception& e) {
      RCLCPP_ERROR(log, "embedded mode: %s", e.what());
      return CallbackReturn::ERROR;
    }
    state_box_.init([&](StateSample& st) { st.x.assign(2 * nv, 0.0); });
    ref_in_.allocate(4096);
    ref_work_.allocate(4096);
    ref_in_valid_ = false;
    solve_period_s_ = 1.0 / params_.solve_rate_hz;
    ref_sub_ = get_node()->create_subscription<gato_msgs::msg::EEReference>(
        params_.reference_topic, rclcpp::QoS(10).reliable(),
        [this](const gato_msgs::msg::EEReference::SharedPtr msg) { on_reference(*msg); });
    step_pub_ = get_node()->create_publisher<gato_msgs::msg::StepResult>("~/step_result", rclcpp::QoS(10));
    stats_pub_ = get_node()->create_publisher<gato_msgs::msg::SolverStats>("~/solver_stats", rclcpp::QoS(10));
    rt_step_ = std::make_unique<realtime_tools::RealtimePublisher<gato_msgs::msg::StepResult>>(step_pub_);
    rt_stats_ = std::make_unique<realtime_tools::RealtimePublisher<gato_msgs::msg::SolverStats>>(stats_pub_);
    stop_ = false;
    solving_ = false;
    solver_thread_ = std::thread([this] { solver_loop(); });
  } else {
    // Plans: reliable, keep-last 1 (only the newest matters; the executor keeps the last good one).
    plan_sub_ = get_node()->create_subscription<gato_msgs::msg::Plan>(
        params_.plan_topic, rclcpp::QoS(1).reliable(),
        [this](const gato_msgs::msg::Plan::SharedPtr msg) { on_plan(*msg); });
  }
  // Per-tick records: reliable, 100 batches (1 s at the 10 ms batch period) of writer history
  // so that a subscriber (the recorder) stalled for up to a second loses nothing.
  stop_tick_thread();
  tick_seq_ = 0;
  ring_.allocate(kTickRingCapacity, nv);
  ticks_msg_.joint_names = plant_joints_;
  ticks_pub_ = get_node()->create_publisher<gato_msgs::msg::ControlTicks>("~/ticks", rclcpp::QoS(100).reliable());
  tick_stop_ = false;
  tick_thread_ = std::thread([this] { tick_loop(); });
  status_pub_ = get_node()->create_publisher<gato_msgs::msg::ControllerStatus>("~/status", rclcpp::QoS(10));
  rt_status_ = std::make_unique<realtime_tools::RealtimePublisher<gato_msgs::msg::ControllerStatus>>(status_pub_);
  status_period_ns_ = std::int64_t(1e9 / params_.status_rate_hz);
  // Diagnostics: the updater's timer runs on this node's executor (the controller manager's
  // non-real-time thread); its period is the standard `diagnostic_updater.period` parameter.
  diag_box_.init([](DiagSample& d) { d = DiagSample(); });
  diag_have_prev_ = false;
  missed_cycles_ = overruns_ = 0;
  diagnostics_ = std::make_unique<diagnostic_updater::Updater>(get_node(), 1.0);
  diagnostics_->setHardwareID(get_node()->get_name());
  diagnostics_->add("plan executor", this, &GatoController::diagnose);
  // Tunables: checked off the real-time thread and handed to the executor between updates.
  param_timer_ = get_node()->create_wall_timer(std::chrono::milliseconds(100), [this] { apply_parameters(); });
  if (embedded_)
    RCLCPP_INFO(log, "gato plugin: %zu joints, embedded mode (BSQP N=%ld, dt=%.4f s, %.0f Hz solver thread, "
                "reference %s), plan_timeout %.3f s", nv, long(params_.N), params_.dt, params_.solve_rate_hz,
                params_.reference_topic.c_str(), params_.plan_timeout);
  else
    RCLCPP_INFO(log, "gato plugin: %zu joints, follow mode on %s, plan_timeout %.3f s, max_knots %ld", nv,
                params_.plan_topic.c_str(), params_.plan_timeout, long(params_.max_knots));
  RCLCPP_INFO(log, "gato plugin: %s", use_effort_ ? "reads the <joint>/effort state interfaces (measured torque)"
                                                  : "no <joint>/effort state interface for every joint: "
                                                    "position and velocity only");
  return CallbackReturn::SUCCESS;
}

void GatoController::apply_parameters() {
  if (!param_listener_ || !executor_ || !param_listener_->is_old(params_)) return;
  const auto p = param_listener_->get_params();
  try {
    executor_->set_tunables(tunables_from(p));
    embedded_gains_ = p.embedded_gains && p.use_plan_gains && p.feedback != "pd";
    if (embedded_) {  // the solver thread applies them before its next solve
      std::lock_guard<std::mutex> lk(settings_mutex_);
      pending_settings_ = settings_from(p);
      pending_pose_scale_ = p.pose_ee_weight_scale;
      settings_pending_ = true;
    }
    params_ = p;
    RCLCPP_INFO(get_node()->get_logger(), "gato plugin: tunables applied (plan_timeout %.3f s, limit_margin %.3f "
                "rad, use_plan_gains %s, feedback %s)", p.plan_timeout, p.limit_margin,
                p.use_plan_gains ? "true" : "false", p.feedback.c_str());
  } catch (const std::exception& e) {
    params_ = p;  // do not retry the same values every tick
    RCLCPP_ERROR(get_node()->get_logger(), "gato plugin: tunables refused, previous ones kept: %s", e.what());
  }
}

void GatoController::on_plan(const gato_msgs::msg::Plan& m) {
  auto log = get_node()->get_logger();
  if (!executor_) return;
  const int nv = executor_->nv();
  const int n = m.n_knots;
  // the layout first (in 64 bits: nx + nu of a foreign message may overflow an int)
  const bool dims = m.nx == 2 * nv && m.nu >= nv && n >= 2 && n <= executor_->max_knots();
  const std::int64_t expect = dims ? std::int64_t(n) * (std::int64_t(m.nx) + m.nu) - m.nu : -1;
  const std::int64_t stamp = std::int64_t(m.header.stamp.sec) * 1000000000LL + std::int64_t(m.header.stamp.nanosec);
  if (dims && stamp - get_node()->get_clock()->now().nanoseconds() > 10 * 1000000000LL) {
    // a plan from the future would be held at its first knot until then (the executor samples s < 0 as 0)
    ++plans_rejected_layout_;
    RCLCPP_ERROR_THROTTLE(log, *get_node()->get_clock(), 2000, "plan rejected: stamp %.3f s is more than 10 s "
                          "ahead of the clock", double(stamp) * 1e-9);
    return;
  }
  if (!dims || std::int64_t(m.xu.size()) != expect) {
    ++plans_rejected_layout_;
    RCLCPP_ERROR_THROTTLE(log, *get_node()->get_clock(), 2000,
                          "plan rejected: nx=%d nu=%d n_knots=%d xu=%zu; expected nx=%d, nu>=%d, 2<=n_knots<=%d "
                          "and xu = n_knots*(nx+nu)-nu", m.nx, m.nu, n, m.xu.size(), 2 * nv, nv,
                          executor_->max_knots());
    return;
  }
  if (m.joint_names != last_plan_names_) {
    std::vector<int> map(m.joint_names.size(), -1);
    bool ok = m.joint_names.size() == size_t(nv);
    for (size_t k = 0; ok && k < m.joint_names.size(); ++k) {
      auto it = std::find(plant_joints_.begin(), plant_joints_.end(), m.joint_names[k]);
      ok = it != plant_joints_.end();
      if (ok) map[k] = int(it - plant_joints_.begin());
    }
    if (!ok) {
      ++plans_rejected_names_;
      RCLCPP_ERROR_THROTTLE(log, *get_node()->get_clock(), 2000,
                            "plan rejected: its joint_names are not the robot's %zu joints", plant_joints_.size());
      return;
    }
    last_plan_names_ = m.joint_names;
    plan_to_plant_ = std::move(map);
  }
  bool integ_ok = true;
  const gato::Integrator integ = integrator_from(m.integrator, integ_ok);
  if (!integ_ok) {
    ++plans_rejected_layout_;
    RCLCPP_ERROR_THROTTLE(log, *get_node()->get_clock(), 2000, "plan rejected: unknown integrator '%s'",
                          m.integrator.c_str());
    return;
  }
  gato::ExecutorPlan& p = executor_->plan_slot();
  p.seq = m.seq;
  p.epoch = m.reset_epoch;
  p.stamp_ns = std::int64_t(m.header.stamp.sec) * 1000000000LL + std::int64_t(m.header.stamp.nanosec);
  p.knot_dt = m.knot_dt;
  p.integrator = integ;
  p.n_knots = n;
  p.has_gains = false;
  if (!m.gains.empty()) {
    // issue 33: (n - 1, nu, nx) row-major, u = u_k + K_k (x - x_k) in the plan's joint order ->
    // the executor's (n - 1, nv, 2 nv) in plant order and sign (torque += K (x_plan - x));
    // the rows of contact-force inputs (nu > nv) are not torques here. A wrong size drops the
    // gains (the plan runs with the PD); non-finite ones are dropped by the executor.
    const std::int64_t want = std::int64_t(n - 1) * m.nu * m.nx;
    if (std::int64_t(m.gains.size()) != want) {
      ++gains_rejected_size_;
      RCLCPP_WARN_THROTTLE(log, *get_node()->get_clock(), 2000, "plan gains dropped: %zu values, expected "
                           "(n_knots-1)*nu*nx = %ld; the plan runs with the PD", m.gains.size(), long(want));
    } else {
      const size_t nx = size_t(m.nx), per_knot = size_t(m.nu) * nx, nxe = size_t(2 * nv);
      for (int k = 0; k < n - 1; ++k) {
        const double* Kk = m.gains.data() + size_t(k) * per_knot;
        double* Ko = p.K.data() + size_t(k) * size_t(nv) * nxe;
        for (int i = 0; i < nv; ++i) {
          const int r = plan_to_plant_[size_t(i)];
          for (int c = 0; c < nv; ++c) {
            const int col = plan_to_plant_[size_t(c)];
            Ko[size_t(r) * nxe + size_t(col)] = -Kk[size_t(i) * nx + size_t(c)];
            Ko[size_t(r) * nxe + size_t(nv + col)] = -Kk[size_t(i) * nx + size_t(nv + c)];
          }
        }
      }
      p.has_gains = true;
    }
  }
  const size_t stride = size_t(m.nx + m.nu);
  for (int k = 0; k < n; ++k) {
    const double* xk = m.xu.data() + size_t(k) * stride;
    double* xo = p.x.data() + size_t(k) * 2 * nv;
    for (int i = 0; i < nv; ++i) {
      const int j = plan_to_plant_[size_t(i)];
      xo[j] = xk[i];
      xo[nv + j] = xk[nv + i];
      if (k < n - 1) p.u[size_t(k) * nv + j] = xk[2 * nv + i];
    }
  }
  // NaN / Inf, epoch and sequence are checked by the executor (counted there).
  executor_->submit();
}

gato::Settings GatoController::settings_from(const gato_plugin::Params& p) const {
  gato::Settings st;
  st.q_cost = p.q_cost;
  st.qd_cost = p.qd_cost;
  st.u_cost = p.u_cost;
  st.N_cost = p.N_cost;
  st.q_lim_cost = p.q_lim_cost;
  st.rot_cost = st.N_rot_cost = p.orientation_weight;  // issue 30: of windows with orientations only
  st.mu = p.mu;
  st.rho = p.rho;
  st.max_sqp_iters = int(p.max_sqp_iters);
  st.max_pcg_iters = int(p.max_pcg_iters);
  st.pcg_tol = p.pcg_tol;
  st.linsys = p.linsys == "pcg" ? gato::LinSys::kPcg
              : p.linsys == "bdsv_first" ? gato::LinSys::kBdsvFirst : gato::LinSys::kBdsv;
  return st;
}

void GatoController::solver_loop() {
  using clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(solve_period_s_));
  auto next = clock::now();
  while (!stop_) {
    next += period;
    const auto now = clock::now();
    if (next < now) next = now;  // after a long solve: no burst of catch-up solves
    std::this_thread::sleep_until(next);
    if (!solving_ || !state_box_.take()) continue;  // inactive, or no new state since the last solve
    // Solve from a state the control loop has just published, not one up to a control period
    // old: drop the one at hand and wait (briefly polling) for the next update()'s. That takes
    // up to one control period off the state -> applied-command latency.
    {
      const auto give_up = clock::now() + std::chrono::milliseconds(5);
      bool fresh = false;
      while (!stop_ && solving_ && !(fresh = state_box_.take()) && clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (!fresh) continue;  // no update() ran (deactivated or stalled): try again next period
    }
    const StateSample& st = state_box_.front();
    bool have_ref;
    {
      std::lock_guard<std::mutex> lk(ref_mutex_);
      have_ref = ref_in_valid_;
      if (have_ref) {
        ref_work_.stamp_ns = ref_in_.stamp_ns;
        ref_work_.knot_dt = ref_in_.knot_dt;
        ref_work_.n_knots = ref_in_.n_knots;
        std::copy_n(ref_in_.p.begin(), 3 * ref_in_.n_knots, ref_work_.p.begin());
        ref_work_.has_orientations = ref_in_.has_orientations;  // issue 30: rotation vectors per knot
        if (ref_in_.has_orientations) std::copy_n(ref_in_.r.begin(), 3 * ref_in_.n_knots, ref_work_.r.begin());
      }
    }
    {
      std::lock_guard<std::mutex> lk(settings_mutex_);
      if (settings_pending_) {
        mpc_->set_settings(pending_settings_);
        mpc_->set_pose_ee_weight_scale(pending_pose_scale_);
        linsys_ = pending_settings_.linsys;
        settings_pending_ = false;
      }
    }
    if (reset_mpc_.exchange(false)) mpc_->reset();
    mpc_->set_gains(embedded_gains_.load());
    gato::ExecutorPlan& plan = executor_->plan_slot();
    bool ok = false;
    try {
      ok = mpc_->step(st.stamp_ns, st.x.data(), have_ref ? &ref_work_ : nullptr, plan);
    } catch (const std::exception& e) {
      RCLCPP_ERROR_THROTTLE(get_node()->get_logger(), *get_node()->get_clock(), 2000, "embedded solve: %s",
                            e.what());
    }
    last_solve_us_.store(mpc_->last_solve_us(), std::memory_order_relaxed);
    ee_pos_err_.store(ok ? mpc_->ee_position_error() : std::numeric_limits<double>::quiet_NaN(),
                      std::memory_order_relaxed);
    ee_rot_err_.store(ok ? mpc_->ee_orientation_error() : std::numeric_limits<double>::quiet_NaN(),
                      std::memory_order_relaxed);
    if (!ok) {  // the executor keeps its last plan until it goes stale, then holds
      ++solve_failures_;
      continue;
    }
    if (mpc_->last_was_cold()) ++plan_epoch_;
    plan.seq = ++plan_seq_;
    plan.epoch = plan_epoch_;
    executor_->submit();
    publish_solve(st.stamp_ns);
  }
}

void GatoController::publish_solve(std::int64_t stamp_ns) {
  const auto& st = mpc_->stats();
  const int iters = st.iters_run, nv = mpc_->nv();
  auto& s = stats_msg_;
  s.header.stamp.sec = std::int32_t(stamp_ns / 1000000000LL);
  s.header.stamp.nanosec = std::uint32_t(stamp_ns % 1000000000LL);
  s.batch_size = 1;
  s.n_iters = iters;
  s.n_row_groups = 0;
  s.solve_time_us = st.solve_time_us;
  s.sqp_iters.assign(st.sqp_iters.begin(), st.sqp_iters.begin() + 1);
  s.kkt_converged.assign(1, st.converged[0] != 0);
  s.final_merit.assign(st.final_merit.begin(), st.final_merit.begin() + 1);
  s.initial_merit.assign(st.initial_merit.begin(), st.initial_merit.begin() + 1);
  s.pcg_iters.assign(st.pcg_iters.begin(), st.pcg_iters.begin() + iters);
  s.pcg_times_us.assign(st.linsys_time_us.begin(), st.linsys_time_us.begin() + iters);
  s.min_merit.assign(st.min_merit.begin(), st.min_merit.begin() + iters);
  s.step_size.assign(st.step_size.begin(), st.step_size.begin() + iters);
  s.linsys = gato::linsys_name(linsys_);  // solver-thread copy (params_ belongs to the timer thread)
  s.budget_hit = st.budget_hit;
  s.has_row_stats = false;
  if (rt_stats_) (void)rt_stats_->try_publish(s);
  auto& r = step_msg_;
  r.header = s.header;
  const auto& xu = mpc_->xu();
  r.u.assign(xu.begin() + 2 * nv, xu.begin() + 3 * nv);
  r.best_id = 0;
  r.xu_best = xu;
  r.solve.xu = xu;
  r.solve.batch_size = 1;
  r.solve.xu_size = int(xu.size());
  r.solve.solve_time_us = st.solve_time_us;
  r.solve.stats = s;
  r.solve.nx = 2 * nv;
  r.solve.nu = nv;
  r.solve.n_knots = mpc_->N();
  r.solve.n_actuated = nv;
  r.iterations = iters;
  r.budget_hit = st.budget_hit;
  r.wall_s = mpc_->last_solve_us() * 1e-6;
  r.limits = "off";
  if (rt_step_) (void)rt_step_->try_publish(r);
}

CallbackReturn GatoController::on_activate(const rclcpp_lifecycle::State&) {
  const size_t n_state = (use_effort_ ? 3 : 2) * joints_.size();
  if (command_interfaces_.size() != joints_.size() || state_interfaces_.size() != n_state) {
    RCLCPP_ERROR(get_node()->get_logger(), "expected %zu effort command and %zu state interfaces, got %zu and %zu",
                 joints_.size(), n_state, command_interfaces_.size(), state_interfaces_.size());
    return CallbackReturn::ERROR;
  }
  have_prev_cmd_ = false;  // the effort measured at the first update answers no command of ours
  effort_err_max_ = 0.0;
  effort_err_nan_ = false;
  executor_->reset();  // hold until a plan arrives; a restarted publisher is accepted
  next_status_ns_ = 0;
  std::fill(latency_hist_.begin(), latency_hist_.end(), 0u);
  latency_count_ = 0;
  latency_max_us_ = latency_last_us_ = 0.0;
  seen_accepted_ = executor_->counters().plans_accepted;
  ee_pos_err_ = ee_rot_err_ = std::numeric_limits<double>::quiet_NaN();
  if (embedded_) {
    reset_mpc_ = true;  // a cold start from the first state after activation
    solving_ = true;
  }
  std::fill(timing_hist_.begin(), timing_hist_.end(), 0u);
  timing_count_ = 0;
  timing_max_us_ = 0.0;
  const unsigned int rate = get_update_rate();
  nominal_period_ns_ = rate > 0 ? std::int64_t(1e9 / double(rate)) : 0;
  first_update_ = true;   // its period spans the inactive time: not a missed cycle
  period_max_ms_ = 0.0;
  diag_restart_ = true;   // the first report after activation has no window
  active_ = true;
  return CallbackReturn::SUCCESS;
}

CallbackReturn GatoController::on_deactivate(const rclcpp_lifecycle::State&) {
  // Leave the effort interfaces at zero: the next owner (or the hardware's own
  // safety) starts from no torque rather than from our last command.
  solving_ = false;
  active_ = false;
  executor_->reset();
  for (auto& c : command_interfaces_) (void)c.set_value(0.0);
  return CallbackReturn::SUCCESS;
}

void GatoController::stop_solver_thread() {
  stop_ = true;
  if (solver_thread_.joinable()) solver_thread_.join();
}

void GatoController::tick_loop() {
  const auto period = std::chrono::milliseconds(kTickBatchMs);
  auto next = std::chrono::steady_clock::now();
  while (!tick_stop_.load(std::memory_order_relaxed)) {
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // behind (a slow publish): no burst, the ring holds the ticks
    std::this_thread::sleep_until(next);
    drain_ticks();
  }
  drain_ticks();  // what update() stored before the stop
}

void GatoController::drain_ticks() {
  auto& m = ticks_msg_;
  const std::size_t n = ring_.joints();
  // At most one ring's worth per message (a batch stays bounded after a stall).
  m.seq.clear();
  m.stamp_ns.clear();
  m.mode.clear();
  m.q.clear();
  m.qd.clear();
  m.effort.clear();
  const std::size_t k = ring_.pop(ring_.capacity(), [&](std::uint64_t seq, std::int64_t stamp, std::uint8_t mode,
                                                        const double* q, const double* qd, const double* tau) {
    m.seq.push_back(seq);
    m.stamp_ns.push_back(stamp);
    m.mode.push_back(mode);
    m.q.insert(m.q.end(), q, q + n);
    m.qd.insert(m.qd.end(), qd, qd + n);
    m.effort.insert(m.effort.end(), tau, tau + n);
  });
  if (k == 0 || !ticks_pub_) return;
  m.header.stamp.sec = std::int32_t(m.stamp_ns.back() / 1000000000LL);
  m.header.stamp.nanosec = std::uint32_t(m.stamp_ns.back() % 1000000000LL);
  m.ring_dropped = ring_.dropped();
  try {
    ticks_pub_->publish(m);
  } catch (const std::exception& e) {  // the context is shutting down: the ticks are lost, the loop ends
    // (a named logger: get_node() itself throws once the controller's node is gone)
    RCLCPP_WARN_ONCE(rclcpp::get_logger("gato_plugin"), "~/ticks: publish failed (%s)", e.what());
  }
}

void GatoController::stop_tick_thread() {
  tick_stop_ = true;
  if (tick_thread_.joinable()) tick_thread_.join();
}

GatoController::~GatoController() {
  stop_solver_thread();
  stop_tick_thread();
}

CallbackReturn GatoController::on_cleanup(const rclcpp_lifecycle::State&) {
  stop_solver_thread();
  stop_tick_thread();
  ticks_pub_.reset();
  mpc_.reset();
  ref_sub_.reset();
  rt_step_.reset();
  rt_stats_.reset();
  step_pub_.reset();
  stats_pub_.reset();
  param_timer_.reset();
  diagnostics_.reset();
  plan_sub_.reset();
  rt_status_.reset();
  status_pub_.reset();
  executor_.reset();
  plant_.reset();
  return CallbackReturn::SUCCESS;
}

bool GatoController::read_state() noexcept {
  const size_t n = joints_.size();
  bool ok = true;
  for (size_t j = 0; j < plant_to_iface_.size(); ++j) {
    const size_t i = size_t(plant_to_iface_[j]);
    const auto qp = state_interfaces_[i].get_optional();
    const auto vp = state_interfaces_[n + i].get_optional();
    // An interface that cannot be read this cycle counts as a non-finite state: hold.
    q_[j] = qp ? *qp : std::numeric_limits<double>::quiet_NaN();
    v_[j] = vp ? *vp : std::numeric_limits<double>::quiet_NaN();
    ok = ok && qp && vp;
    if (use_effort_) {  // diagnostic only: an unreadable effort never makes the plugin hold
      const auto ep = state_interfaces_[2 * n + i].get_optional();
      effort_[j] = ep ? *ep : std::numeric_limits<double>::quiet_NaN();
    }
  }
  return ok;
}

void GatoController::track_effort() noexcept {
  // tau_ still holds the previous update's command: the hardware read the measured effort
  // after that command was written.
  if (!use_effort_ || !have_prev_cmd_) return;
  for (size_t j = 0; j < effort_.size(); ++j) {
    const double d = std::abs(effort_[j] - tau_[j]);
    if (!std::isfinite(d))
      effort_err_nan_ = true;
    else
      effort_err_max_ = std::max(effort_err_max_, d);
  }
}

void GatoController::write_torque(const std::vector<double>& tau) noexcept {
  for (size_t j = 0; j < plant_to_iface_.size(); ++j)
    (void)command_interfaces_[size_t(plant_to_iface_[j])].set_value(tau[j]);
}

namespace {
/// Calls the allocation probe's end marker when update() returns (test instrumentation).
struct ProbeScope {
  void (*end)();
  ~ProbeScope() {
    if (end) end();
  }
};
}  // namespace

controller_interface::return_type GatoController::update(const rclcpp::Time& time,
                                                         const rclcpp::Duration& period) {
  if (probe_begin_) probe_begin_();
  const ProbeScope probe{probe_end_};
  const auto t_start = std::chrono::steady_clock::now();
  const bool state_ok = read_state();
  track_effort();
  const std::int64_t now = time.nanoseconds();
  const gato::ExecMode mode = executor_->update(now, q_.data(), v_.data(), tau_.data());
  write_torque(tau_);
  have_prev_cmd_ = true;
  // The tick's record for ~/ticks (a full ring drops it, counted; its seq then shows the gap).
  (void)ring_.push(++tick_seq_, now, std::uint8_t(mode), q_.data(), v_.data(), tau_.data());
  if (embedded_ && state_ok) {  // the newest state for the solver thread (wait-free)
    StateSample& st = state_box_.back();
    st.stamp_ns = now;
    std::copy(q_.begin(), q_.end(), st.x.begin());
    std::copy(v_.begin(), v_.end(), st.x.begin() + long(q_.size()));
    state_box_.publish();
  }
  const std::uint64_t accepted = executor_->counters().plans_accepted;
  if (accepted != seen_accepted_) {  // a new plan runs from this update on
    seen_accepted_ = accepted;
    const double lat = double(now - executor_->active_plan().stamp_ns) * 1e-3;
    latency_last_us_ = lat;
    ++latency_hist_[size_t(std::clamp(int(lat / kLatencyBinUs), 0, kLatencyBins - 1))];
    ++latency_count_;
    latency_max_us_ = std::max(latency_max_us_, lat);
  }
  // The time of the control part of update() (interfaces + executor), for ~/status.
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t_start).count();
  ++timing_hist_[size_t(std::min(int(us / kTimingBinUs), kTimingBins - 1))];
  ++timing_count_;
  timing_max_us_ = std::max(timing_max_us_, us);
  // Missed cycles (a period well over the nominal one) and overruns (update() itself longer
  // than the nominal period), then the tick's snapshot for the diagnostics timer (wait-free).
  const std::int64_t period_ns = period.nanoseconds();
  if (first_update_) {
    first_update_ = false;
  } else {
    period_max_ms_ = std::max(period_max_ms_, double(period_ns) * 1e-6);
    if (nominal_period_ns_ > 0 && double(period_ns) > kMissedPeriodFactor * double(nominal_period_ns_))
      ++missed_cycles_;
  }
  if (nominal_period_ns_ > 0 && us * 1e3 > double(nominal_period_ns_)) ++overruns_;
  {
    DiagSample& d = diag_box_.back();
    d.now_ns = now;
    d.has_plan = executor_->has_plan();
    d.plan_stamp_ns = executor_->active_plan().stamp_ns;
    d.mode = mode;
    d.reason = executor_->hold_reason();
    d.plan_timeout_s = executor_->tunables().plan_timeout_s;
    d.counters = executor_->counters();
    d.missed_cycles = missed_cycles_;
    d.overruns = overruns_;
    d.rejected_names = plans_rejected_names_.load(std::memory_order_relaxed);
    d.rejected_layout = plans_rejected_layout_.load(std::memory_order_relaxed);
    d.rejected_references = refs_rejected_.load(std::memory_order_relaxed);
    d.solver_failures = solve_failures_.load(std::memory_order_relaxed);
    d.gains_rejected_size = gains_rejected_size_.load(std::memory_order_relaxed);
    d.update_max_us = timing_max_us_;
    d.period_max_ms = period_max_ms_;
    diag_box_.publish();
  }
  if (rt_status_ && now >= next_status_ns_) {
    next_status_ns_ = now + status_period_ns_;
    fill_status(time, mode);
    if (rt_status_->try_publish(status_msg_)) {  // the next status covers the updates from here on
      effort_err_max_ = 0.0;
      effort_err_nan_ = false;
    }
  }
  return controller_interface::return_type::OK;
}

}  // namespace gato_ros

PLUGINLIB_EXPORT_CLASS(gato_ros::GatoController, controller_interface::ControllerInterface)
