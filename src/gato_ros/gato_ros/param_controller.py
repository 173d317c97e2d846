"""The controller node's parameters (``gato_controller``), one group of the schema
(:mod:`gato_ros.params` assembles the groups; :mod:`gato_ros.param_defaults` gives the
robot-specific and core defaults)."""
from __future__ import annotations

from .param_defaults import (COLLISION_MECHS, SOLVER as _SOLVER, LIMITS as _LIMITS, LINSYS as _LINSYS,
                             COLLISION_DEFAULTS as _COLLISION, DEFAULT_LINSYS as _DEFAULT_LINSYS,
                             joint_names as _joint_names, obstacle_check as _obstacles)
from .param_spec import Param
from gato.planners.shipped_weights import ORIENTATION_WEIGHTS as _ORIENTATION_WEIGHTS
from gato.planners.shipped_weights import pose_ee_weight_scale as _pose_scale

#: What the description of a parameter whose default is the arm's shipped value says.
SHIPPED_NOTE = " (default per arm: its shipped weights, gato.planners.shipped_weights)"


def _shipped(name: str):
    """The default of solver field ``name`` as a callable ``robot -> value``: the arm's shipped value
    (gato.planners.shipped_weights, the one table of them: u_ref gravity and the weights tuned with
    it), the struct's default (SolverParams()) for a robot without one."""
    from gato.planners.shipped_weights import SHIPPED_WEIGHTS

    if not hasattr(_SOLVER, name):
        raise ValueError(f"{name}: not a SolverParams field")
    return lambda robot: SHIPPED_WEIGHTS.get(robot, {}).get(name, getattr(_SOLVER, name))

#: The controller node's parameters, in the order of the generated files.
CONTROLLER = (
    # structural (read-only)
    Param("robot", "string", lambda r: r, "registered robot (gato.robot_info); selects URDF, EE frame and limits",
          read_only=True, group="structure"),
    Param("joint_names", "string_array", _joint_names,
          "joints the solver controls, in the order of the command arrays; /joint_states is mapped by name "
          "(any order, extra joints ignored)", read_only=True, group="structure"),
    Param("controller_name", "string", "effort_controller",
          "ros2_control forward controller: commands go to /<controller_name>/commands (Float64MultiArray)",
          read_only=True, group="structure"),
    Param("N", "integer", 32, "horizon length in knots", "knots", range=(2, 512), read_only=True,
          group="structure"),
    Param("dt", "double", 0.03125, "knot spacing of the horizon", "s", range=(0.001, 1.0), read_only=True,
          group="structure"),
    Param("batch_size", "integer", 1, "batched solves per tick (best of batch wins)", "problems",
          range=(1, 512), read_only=True, group="structure"),
    Param("backend", "string", "cpu", "solver backend (the CPU backend runs everywhere)", choices=("cpu",),
          read_only=True, group="structure"),
    Param("control_rate_hz", "double", 100.0,
          "control rate: the deadline of a tick is 1/control_rate_hz; the timer rate when trigger=timer", "Hz",
          range=(1.0, 2000.0), read_only=True, group="structure"),
    Param("trigger", "string", "state",
          "what starts a tick: 'state' solves on every new joint state (lowest latency; lockstep), 'timer' "
          "solves at control_rate_hz on the latest state", choices=("state", "timer"), read_only=True,
          group="structure"),
    Param("reference_sync", "bool", False,
          "wait for the EE reference stamped at the joint state's time before solving (lockstep "
          "reproducibility); false: use the latest reference, resampled at the state's time",
          read_only=True, group="structure"),
    Param("warm_start", "string", "shift", "warm start of the next tick: the plan shifted one knot, or as solved",
          choices=("shift", "hold"), read_only=True, group="structure"),
    # solver costs (tunable); q_cost, qd_cost, u_cost, N_cost, u_ref and max_sqp_iters default to the
    # arm's shipped weights (tuned with u_ref gravity); SolverParams() keeps the reference's
    Param("q_cost", "double", _shipped("q_cost"), "running end-effector position weight" + SHIPPED_NOTE,
          range=(0.0, 1e4), group="cost"),
    Param("qd_cost", "double", _shipped("qd_cost"), "joint velocity weight" + SHIPPED_NOTE, range=(0.0, 1e3),
          group="cost"),
    Param("u_cost", "double", _shipped("u_cost"), "joint torque weight" + SHIPPED_NOTE, range=(0.0, 1.0),
          group="cost"),
    Param("N_cost", "double", _shipped("N_cost"), "terminal end-effector position weight" + SHIPPED_NOTE,
          range=(0.0, 1e5), group="cost"),
    Param("q_lim_cost", "double", _SOLVER.q_lim_cost, "joint position limit barrier weight (0 = off)", range=(0.0, 1e3),
          group="cost"),
    Param("vel_lim_cost", "double", _SOLVER.vel_lim_cost, "joint velocity limit barrier weight (0 = off)",
          range=(0.0, 1e3),
          group="cost"),
    Param("ctrl_lim_cost", "double", _SOLVER.ctrl_lim_cost, "torque limit barrier weight (0 = off)", range=(0.0, 1e3),
          group="cost"),
    Param("u_ref", "string", _shipped("u_ref"), "reference of the torque cost: zero (penalise u, the reference's "
          "cost: holding the arm up costs, the plan sags under gravity) or gravity (penalise u - g(q) at every "
          "knot: gravity compensation is free; docs/solver_method.md)" + SHIPPED_NOTE, choices=("zero", "gravity"),
          group="cost"),
    # solver settings (tunable)
    Param("mu", "double", _SOLVER.mu, "merit-function weight of the L1 defect norm", range=(0.0, 1e4),
          group="solver"),
    Param("rho", "double", _SOLVER.rho, "initial trust-region weight on the position block", "1/rad^2",
          range=(1e-9, 1e3), group="solver"),
    Param("max_sqp_iters", "integer", _shipped("max_sqp_iters"), "SQP iterations per tick (1 = real-time "
          "iteration)" + SHIPPED_NOTE, "iterations",
          range=(1, 100), group="solver"),
    Param("max_pcg_iters", "integer", _SOLVER.max_pcg_iters, "PCG iteration cap per SQP iteration", "iterations",
          range=(1, 10000), group="solver"),
    Param("pcg_tol", "double", _SOLVER.pcg_tol, "PCG relative tolerance", range=(0.0, 1.0), group="solver"),
    Param("linsys", "string", _DEFAULT_LINSYS,
          "Schur-system path: pcg | bdsv (exact block-tridiagonal) | bdsv_first | auto (cold steps exact, "
          "warm steps PCG)", choices=_LINSYS, group="solver"),
    Param("budget_s", "double", 0.0, "wall-clock budget of a tick's SQP loop (0 = off: max_sqp_iters run)", "s",
          range=(0.0, 1.0), group="solver"),
    Param("limits", "string", "admm",
          "URDF joint-limit rows (position, velocity, torque boxes) on the solver: off | telemetry | barrier | al "
          "| admm (the library's default for fixed-base arms, with its measured settings); needs the solver's "
          "row-group layer: refused when the solver has no enable_limit_<mechanism>", choices=_LIMITS,
          group="solver"),
    Param("reseed_threshold", "double", 0.0,
          "re-seed the warm start to a hold when ||x_measured - x_predicted|| exceeds this (0 = off)",
          range=(0.0, 1e3), group="solver"),
    # collision clearance rows (tunable, like limits): docs/constraints.md "Collision clearance rows"
    Param("collision_spheres", "double_array", [],
          "world obstacles of the BSQP planner's collision rows: flat [x, y, z, r] per sphere, world frame "
          "(empty with collision_planes empty = rows off); every collision sphere of the arm keeps "
          "collision_margin from them at knots 1..N-1; needs limits other than off (the collision group comes "
          "after the limit groups); the OSC fallback and the sampling / osc planners ignore obstacles, the "
          "simulated world does not model them", "m", group="collision", check=_obstacles("collision_spheres")),
    Param("collision_planes", "double_array", [],
          "world half-space obstacles of the collision rows: flat [nx, ny, nz, offset] per plane, the obstacle "
          "is n.p <= offset (e.g. [0, 0, 1, 0]: below the floor z = 0); normal non-zero (normalized)", "m",
          group="collision", check=_obstacles("collision_planes")),
    Param("collision_margin", "double", _COLLISION["collision_margin"],
          "clearance every collision sphere keeps from every obstacle", "m", range=(0.0, 1.0), group="collision"),
    Param("collision_mech", "string", _COLLISION["collision_mech"],
          "mechanism of the collision rows, with its measured weight (admm rho 10, al rho 100, barrier mu 0.01; "
          "admm held the margin within 1 mm in closed loop, barrier keeps a wide berth and biases tracking; "
          "telemetry: clearances in the stats only)", choices=COLLISION_MECHS,
          group="collision"),
    # safety (tunable)
    Param("joint_state_timeout_s", "double", 0.1,
          "joint states older than this (by receipt time) are stale: the controller holds "
          "(gravity compensation at the last good state)", "s", range=(0.001, 10.0), group="safety"),
    Param("orientation_weight", "double", _ORIENTATION_WEIGHTS["rot_cost"],
          "planner bsqp: EE orientation weight (rot_cost = N_rot_cost, every knot) of the ticks whose reference "
          "carries orientations (gato_msgs/EEReference.orientations; ~/goal_pose with goal_orientation); a "
          "position-only reference solves without the term, as before (default: "
          "gato.planners.shipped_weights.ORIENTATION_WEIGHTS)", "1/rad^2", range=(0.0, 1e4), group="cost"),
    Param("pose_ee_weight_scale", "double", _pose_scale,
          "planner bsqp: factor on the EE position weights (q_cost, N_cost) of the ticks whose reference "
          "carries orientations (the pose path moves the joints faster and lags more at the same weights); "
          "position-only ticks solve with q_cost / N_cost as set, bit for bit (default per arm: "
          "gato.planners.shipped_weights.POSE_EE_WEIGHT_SCALE, 1 for an arm without one; 1 = off)", "x",
          range=(0.01, 100.0), group="cost"),
    Param("runaway_factor", "double", 3.0,
          "runaway guard (gato.sim.guard.RunawayGuard, as in the closed loop): a joint faster than this multiple of "
          "its URDF velocity limit at two ticks in a row (or than max(10, this) at one), or more than 0.5 rad beyond "
          "its position limits, switches to a damped joint hold at the positions of the trip (state runaway, "
          "fallback_reason runaway, logged as an error) for runaway_hold_s and until every joint is under its "
          "velocity limit; then the planner restarts cold (0 = off; otherwise > 1)", "x limit",
          range=(0.0, 100.0), group="safety"),
    Param("runaway_hold_s", "double", 0.5,
          "runaway guard: least time (joint-state stamps) the joint hold keeps control after a trip", "s",
          range=(0.0, 60.0), group="safety"),
    Param("resume_speed_mps", "double", 0.2,
          "after a warm-start reset (start-up, restart, recovery from a hold or a lost reference) the EE "
          "reference is blended from the measured EE position into the live one (minimum jerk) over "
          "distance / resume_speed_mps, so the first commands stay near the hold torque (0 = off)", "m/s",
          range=(0.0, 10.0), group="safety"),
    Param("plan_gains", "bool", False, "planner bsqp: the published ~/plan carries the winning row's "
          "time-varying feedback gains (gato_msgs/Plan.gains, BSQP.feedback_gains(): about one SQP iteration's "
          "linearisation per tick), which the ros2_control plugin applies between plans (its feedback "
          "parameter); false: plans without gains (the plugin's PD)", group="output"),
    Param("publish_step_result", "bool", True, "publish gato_msgs/StepResult every tick (the largest message)",
          group="output"),
    Param("publish_commands", "bool", True,
          "publish the torques (/<controller_name>/commands, ~/command); false: plans only (~/plan), which the "
          "gato ros2_control plugin executes in follow mode", read_only=True, group="output"),
    # planner and OSC fallback (gato.planner registry; controller_logic)
    Param("planner", "string", "bsqp",
          "planner of the node (gato.planner registry): bsqp (batched SQP MPC, plans with knots), sampling "
          "(sampling MPC over MuJoCo rollouts: the sampling_* parameters) or osc (operational-space controller, "
          "the torque of the tick: the osc_* parameters); the N / dt reference window is built for every planner",
          choices=("bsqp", "sampling", "osc"), read_only=True, group="planner"),
    Param("fallback", "string", "osc",
          "osc: the node switches to the OSC (tracking the last reference window, osc_* gains) when the planner "
          "misses fallback_after_misses deadlines in a row, diverges (non-finite or diverged solve, solver error) "
          "or re-seeds its warm start, and back to the planner (cold start at the measured state) after "
          "fallback_recover_ticks; off: the planner's own gravity fallback and a hold on solver errors; no effect "
          "with planner=osc", choices=("osc", "off"), group="planner"),
    Param("fallback_after_misses", "integer", 3,
          "consecutive deadline misses (receipt to publish > 1/control_rate_hz) that switch to the OSC fallback "
          "(0 = deadline misses never switch); not with reference_sync (lockstep: the world waits for the "
          "command, so a late tick costs no tracking and a switch would make the run machine-dependent)", "ticks",
          range=(0, 1000), group="planner"),
    Param("fallback_grace_ticks", "integer", 10,
          "planner ticks after each cold start (start-up, return from the OSC fallback or a hold) in which only a "
          "tick later than two periods counts toward fallback_after_misses: the first solves without a warm start "
          "take several times longer, and counting every late one sent the planner straight back to the fallback "
          "on a loaded machine; a stalled solver still switches at once",
          "ticks", range=(0, 100000), group="planner"),
    Param("fallback_recover_ticks", "integer", 50,
          "hysteresis: ticks the OSC fallback keeps control before the planner is tried again (cold start at the "
          "measured state)", "ticks", range=(1, 100000), group="planner"),
    Param("osc_stiffness", "double", 400.0, "OSC (planner osc and the fallback): EE position stiffness per axis, "
          "inertia-decoupled; the default (with osc_damping 40) stays stable with up to 25 ms of state-to-command "
          "latency at 100 Hz, 900 / 60 (the 1 kHz gains) up to 15 ms only (docs/benchmarks_ros.md)", "1/s^2",
          range=(0.0, 1e5), group="osc"),
    Param("osc_damping", "double", 40.0, "OSC: EE position damping per axis, inertia-decoupled", "1/s",
          range=(0.0, 1e4), group="osc"),
    Param("osc_orientation_stiffness", "double", 400.0, "OSC: stiffness holding the tool orientation the OSC "
          "started with (the measured one when it takes over)", "1/s^2", range=(0.0, 1e5), group="osc"),
    Param("osc_orientation_damping", "double", 40.0, "OSC: tool orientation damping", "1/s", range=(0.0, 1e4),
          group="osc"),
    Param("osc_null_space_stiffness", "double", 25.0, "OSC, robots with more than 6 joints: null-space stiffness "
          "toward the posture the OSC started with", "1/s^2", range=(0.0, 1e4), group="osc"),
    Param("osc_null_space_damping", "double", 10.0, "OSC, robots with more than 6 joints: null-space damping",
          "1/s", range=(0.0, 1e4), group="osc"),
    Param("sampling_num_samples", "integer", 64, "planner sampling: candidate control sequences per iteration",
          "samples", range=(2, 4096), read_only=True, group="sampling"),
    Param("sampling_iterations", "integer", 2, "planner sampling: sampling iterations per tick", "iterations",
          range=(1, 100), read_only=True, group="sampling"),
    Param("sampling_horizon_s", "double", 0.5, "planner sampling: rollout horizon", "s", range=(0.01, 10.0),
          read_only=True, group="sampling"),
    Param("sampling_timestep_s", "double", 0.005, "planner sampling: timestep of the MuJoCo planning scene",
          "s", range=(1e-4, 0.1), read_only=True, group="sampling"),
    Param("sampling_ctrl_std", "double", 0.01, "planner sampling: noise of the joint-target nodes", "rad",
          range=(0.0, 10.0), read_only=True, group="sampling"),
    Param("sampling_ee_weight", "double", 2000.0, "planner sampling: EE tracking weight per rollout step",
          "1/m^2", range=(0.0, 1e7), read_only=True, group="sampling"),
    Param("sampling_ctrl_weight", "double", 1.0, "planner sampling: weight of the joint targets' distance to "
          "the IK reference", "1/rad^2", range=(0.0, 1e6), read_only=True, group="sampling"),
    Param("sampling_threads", "integer", 0, "planner sampling: mujoco.rollout threads (0 = all CPUs)", "threads",
          range=(0, 256), read_only=True, group="sampling"),
    Param("sampling_seed", "integer", 0, "planner sampling: noise seed (a lockstep run is reproducible for a seed "
          "and thread count)", range=(0, 2**31 - 1), read_only=True, group="sampling"),
    Param("sampling_method", "string", "mppi", "planner sampling: mppi (exponentially weighted elites), cem "
          "(cross-entropy: equal elite weights) or ilqr (iLQR over the same rollouts, sampling_iterations per plan)",
          choices=("mppi", "cem", "ilqr"), read_only=True, group="sampling"),
    Param("fault_solver_delay_s", "double", 0.0, "fault injection for tests: every planner step sleeps this long "
          "first (a stalled solver: deadline misses on demand; 0 = off)", "s", range=(0.0, 1.0),
          group="testing"),
    # external-wrench hypotheses from the estimator node (tunable: switched between ticks)
    Param("hypotheses", "string", "none",
          "external-wrench hypotheses of the solve: none (the robot-only model) | estimator (the latest "
          "geometry_msgs/WrenchStamped on wrench_topic, world axes at the EE frame origin, is programmed into "
          "every batch entry's dynamics; with batch_size > 1 the entries also try zero and wrenches "
          "hypothesis_spread_n around it and the one-step rollout picks the winner); switched between ticks",
          choices=("none", "estimator"), group="hypotheses"),
    Param("wrench_topic", "string", "/gato_estimator/wrench",
          "hypotheses=estimator: the wrench estimate topic (geometry_msgs/WrenchStamped, the estimator node's)",
          read_only=True, group="hypotheses"),
    Param("estimate_timeout_s", "double", 0.5,
          "hypotheses=estimator: an estimate older than this (receipt time, node clock) is dropped and the "
          "solve uses zero wrench until a fresh one arrives", "s", range=(0.001, 60.0), group="hypotheses"),
    Param("hypothesis_spread_n", "double", 5.0,
          "hypotheses=estimator, batch_size > 1: radius of the wrench hypotheses around the estimate", "N",
          range=(0.0, 1000.0), group="hypotheses"),
    Param("estimate_sync", "bool", False,
          "hypotheses=estimator, lockstep (trigger=state): wait for the estimate stamped at the joint state's "
          "time (the estimator's fit of the interval that state closes) before solving, so the run is "
          "reproducible; when the world has re-sent the state 3 times without it, the tick solves under the "
          "last estimate received (logged, ~/status reason) and ticks stop waiting until one arrives again; "
          "false: the latest estimate received (asynchronous)", read_only=True, group="hypotheses"),
    # standard ROS 2 interfaces (issue 31: gato_ros.standard_io, target_logic, trajectory_logic, health)
    Param("target_frame", "string", "",
          "frame of the EE positions the targets resolve into (~/goal_pose, ~/delta_twist_cmds; a target in "
          "another frame is transformed through /tf); empty = the URDF root link", read_only=True, group="targets"),
    Param("goal_speed_mps", "double", 0.1,
          "~/goal_pose: average EE speed of the minimum-jerk path to a goal (duration = distance / speed, at "
          "least goal_min_duration_s)", "m/s", range=(0.001, 2.0), group="targets"),
    Param("goal_min_duration_s", "double", 0.5, "~/goal_pose: shortest minimum-jerk path", "s",
          range=(0.0, 600.0), group="targets"),
    Param("goal_orientation", "bool", False,
          "~/goal_pose: also track the goal's orientation (slerp from the measured EE orientation, weight "
          "orientation_weight); false: position only (a PoseStamped always carries an orientation, and an "
          "unset identity one would turn the tool over)", read_only=False, group="targets"),
    Param("target_max_distance_m", "double", 1.0,
          "~/goal_pose: a goal farther than this from the measured EE is refused (logged, counted)", "m",
          range=(0.0, 10.0), group="targets"),
    Param("servo_max_speed_mps", "double", 0.25,
          "~/delta_twist_cmds: a faster linear twist is scaled down to this speed (logged, counted)", "m/s",
          range=(0.0, 2.0), group="targets"),
    Param("servo_max_angular_rps", "double", 0.5,
          "~/delta_twist_cmds: a faster angular twist is scaled down to this rate (logged, counted); a twist that "
          "turns starts tracking the EE orientation (from the measured one), the servo target turns at the "
          "angular velocity (weight orientation_weight)", "rad/s", range=(0.0, 10.0), group="targets"),
    Param("servo_timeout_s", "double", 0.1,
          "~/delta_twist_cmds: a twist moves the target for this long after it arrived (then it stops: a stream "
          "that ends stops the arm)", "s", range=(0.001, 10.0), group="targets"),
    Param("traj_posture_weight", "double", 20.0,
          "joint trajectories (~/follow_joint_trajectory, ~/joint_trajectory) and a cancelled goal's hold: weight "
          "of the per-knot joint posture targets (the EE term tracks the forward kinematics of the same "
          "samples)", "1/rad^2", range=(0.0, 1e5), group="targets"),
    Param("traj_path_tolerance_rad", "double", 0.2,
          "joint trajectories: path tolerance of a joint whose goal gives none (0); -1 in a goal = none", "rad",
          range=(0.0, 10.0), group="targets"),
    Param("traj_goal_tolerance_rad", "double", 0.02,
          "joint trajectories: goal tolerance of a joint whose goal gives none (0)", "rad", range=(0.0, 10.0),
          group="targets"),
    Param("traj_goal_time_s", "double", 1.0,
          "joint trajectories: time after the last point for the joints to settle within the goal tolerance "
          "when the goal gives none (0); then GOAL_TOLERANCE_VIOLATED", "s", range=(0.0, 600.0), group="targets"),
    Param("viz_rate_hz", "double", 10.0,
          "rate of ~/plan_path, ~/reference_path, ~/batch_paths/row_<b> and the gato_ee_target TF (the plan's ticks, "
          "by their stamps; at or above control_rate_hz: every plan; 0 = off)", "Hz", range=(0.0, 2000.0),
          read_only=True, group="output"),
    Param("viz_batch_rows", "integer", 4,
          "batch_size > 1: EE paths of this many batch rows on ~/batch_paths/row_<b> (one forward-kinematics pass "
          "of N knots each per published view)", "rows", range=(0, 512), read_only=True, group="output"),
    Param("diagnostics_period_s", "double", 1.0, "period of /diagnostics (diagnostic_msgs/DiagnosticArray)", "s",
          range=(0.01, 60.0), read_only=True, group="output"),
    Param("diagnostics_error_after_s", "double", 2.0,
          "/diagnostics: a planner degraded (deadline misses, OSC fallback) this long in a row is an ERROR "
          "(WARN before)", "s", range=(0.0, 600.0), read_only=True, group="output"),
    Param("diagnostics_recover_s", "double", 1.0,
          "/diagnostics: the degraded spell ends after this long without a missed or fallback tick", "s",
          range=(0.0, 600.0), read_only=True, group="output"),
    Param("start_recorder", "string", "",
          "recorder node name (e.g. rosbag2_recorder, the node of `ros2 bag record`; hardware.launch.xml "
          "record:=true sets it): the controller subscribes to /joint_states, and so sends its first command, "
          "only once that node has subscribed to its command, step-result, plan and solve-input topics, so that "
          "the bag holds the run from the first command (gato_ros.recorder_gate; empty = no wait)",
          read_only=True, group="output"),
    Param("start_recorder_timeout_s", "double", 60.0,
          "start_recorder set: wall-clock limit of that wait; then the controller starts anyway and logs an "
          "error naming the topics the recorder did not subscribe to", "s", range=(0.1, 3600.0), read_only=True,
          group="output"),
)
