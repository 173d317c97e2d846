"""The other nodes' parameters (simulation world, reference, estimator, live view), groups of the
schema, and the node-name -> schema table the per-robot YAML files are keyed by
(:mod:`gato_ros.params` re-exports them all)."""
from __future__ import annotations

import math

from .cpu_priority import MODES as PRIORITY_MODES
from .param_controller import CONTROLLER
from .param_defaults import goals as _goals, joint_names as _joint_names, q_ready as _q_ready
from .param_spec import Param


# ---------------------------------------------------------------- the simulation-world node
SIM = (
    Param("robot", "string", lambda r: r, "registered robot (URDF from gato_description)", read_only=True),
    Param("world", "string", "mujoco", "simulator: mujoco (gato.worlds.MuJoCoWorld, independent of the solver's "
          "model) or pinocchio (gato.worlds.PinocchioWorld, RK4)", choices=("mujoco", "pinocchio"),
          read_only=True),
    Param("lockstep", "bool", True, "true: advance one control period only when the stamped command for the "
          "current tick has arrived (reproducible); false: free-running at wall-clock pace, zero-order hold of "
          "the latest command", read_only=True),
    Param("control_rate_hz", "double", 100.0, "tick rate: joint states and /clock are published every "
          "1/control_rate_hz of simulated time", "Hz", range=(1.0, 2000.0), read_only=True),
    Param("physics_dt", "double", 0.001, "simulator step; must divide the control period", "s",
          range=(1e-5, 0.1), read_only=True),
    Param("duration_s", "double", 0.0, "simulated time after which the node exits 0 (0 = run until stopped)", "s",
          range=(0.0, 1e6), read_only=True),
    Param("q0", "double_array", _q_ready, "start joint positions (gato.tasks.Q_READY)", "rad", read_only=True),
    Param("joint_names", "string_array", _joint_names, "joint names published in /joint_states (the URDF's)",
          read_only=True),
    Param("controller_name", "string", "effort_controller",
          "realtime mode: efforts are read from /<controller_name>/commands", read_only=True),
    Param("command_topic", "string", "/gato_controller/command",
          "lockstep mode: the stamped gato_msgs/EffortCommand topic", read_only=True),
    Param("start_subscribers", "integer", 0, "lockstep: publish the first joint state only once /joint_states "
          "has this many subscribers (the controller, a recorder), so that nobody misses the start (0 = at once)",
          "subscribers", range=(0, 100), read_only=True),
    Param("start_recorder", "string", "", "lockstep: recorder node names, separated by spaces or commas (e.g. gato_recorder, "
          "the bringup's, and rosbag2_recorder, the node of a `ros2 bag record` beside it); the first joint state "
          "then also waits until each has subscribed to every topic of start_recorder_topics that has a publisher, "
          "so that its bag holds the run from the first command (empty = no such wait)", read_only=True),
    Param("start_recorder_topics", "string_array", ["/joint_states", "/ee_reference",
                                                    "/gato_controller/command", "/gato_controller/solve_input",
                                                    "/gato_controller/step_result"],
          "lockstep, start_recorder set: the topics that recorder must have subscribed to before the start "
          "(those with no publisher yet are not waited for)", read_only=True),
    Param("start_recorder_timeout_s", "double", 60.0, "lockstep, start_recorder set: wall-clock limit of that "
          "wait; then the world starts anyway and logs an error naming the topics the recorder did not subscribe "
          "to", "s", range=(0.1, 3600.0), read_only=True),
    Param("lockstep_resend_s", "double", 0.5, "lockstep: re-publish the current joint state and clock when no "
          "command arrived for this long (wall clock): covers start-up and lost messages", "s",
          range=(0.01, 60.0), read_only=True),
    Param("command_timeout_s", "double", 0.05, "command watchdog: no command for this long is a timeout; "
          "realtime (simulated time: the world's own cycles): the world applies command_timeout_action until "
          "commands resume; lockstep (wall clock, at least lockstep_resend_s): the world keeps waiting and reports "
          "that the controller stopped answering (~/status, log)", "s",
          range=(0.001, 10.0), read_only=True),
    Param("command_timeout_action", "string", "hold", "realtime: what the world applies without fresh commands "
          "(before the first one and after a timeout): hold (PD to the joint positions at the timeout, critically "
          "damped through the mass matrix at hold_frequency_hz, plus gravity compensation, within the effort "
          "limits) or brake (motor torque zero, joint brakes stop the joints with up to the effort limit)",
          choices=("hold", "brake"), read_only=True),
    Param("hold_frequency_hz", "double", 4.0, "natural frequency of the timeout hold's PD (damping ratio 1)", "Hz",
          range=(0.1, 50.0), read_only=True),
    Param("payload_mass_kg", "double", 0.0, "rigid payload at the EE frame origin: its weight is applied as an "
          "EE force (inertia neglected)", "kg", range=(0.0, 100.0), read_only=True),
    Param("external_wrench", "double_array", [0.0] * 6, "constant wrench at the EE frame origin, world axes "
          "[fx, fy, fz, tx, ty, tz]", "N, N*m", read_only=True),
    Param("link_mass_scale", "string", "", "model error of the world: comma-separated LINK:FACTOR entries (URDF "
          "link names, e.g. L4:1.2,L6:0.9): each link's mass and rotational inertia are multiplied by FACTOR "
          "(finite, > 0; COM unchanged) in the simulator's model only, the controller's model stays nominal "
          "(empty = none)", read_only=True),
    Param("pendulum_mass_kg", "double", 0.0, "pinocchio world only: a pendulum payload hanging from the EE "
          "(0 = none)", "kg", range=(0.0, 100.0), read_only=True),
    Param("pendulum_length_m", "double", 0.3, "pinocchio world only: pendulum length", "m", range=(0.01, 5.0),
          read_only=True),
)

# ---------------------------------------------------------------- the reference node
REFERENCE = (
    Param("robot", "string", lambda r: r, "registered robot (EE frame, task tables)", read_only=True),
    Param("mode", "string", "fig8", "fig8: a figure-8 around the EE position at q0; goals: a sequence of EE "
          "goals; hold: the EE position at q0", choices=("fig8", "goals", "hold"), read_only=True),
    Param("n_knots", "integer", 32, "knots per published window (>= the controller's N)", "knots",
          range=(1, 4096), read_only=True),
    Param("knot_dt", "double", 0.03125, "knot spacing of the window", "s", range=(0.001, 1.0), read_only=True),
    Param("rate_hz", "double", 100.0, "publish rate when not clock-driven", "Hz", range=(0.1, 2000.0),
          read_only=True),
    Param("clock_driven", "bool", True, "publish one window per /clock message, stamped with that time "
          "(lockstep); false: a timer at rate_hz", read_only=True),
    Param("q0", "double_array", _q_ready, "pose whose EE position centres the figure-8 / is held", "rad",
          read_only=True),
    Param("fig8_amplitude_x", "double", 0.1, "figure-8 horizontal half-amplitude", "m", range=(0.0, 1.0),
          read_only=True),
    Param("fig8_amplitude_z", "double", 0.1, "figure-8 vertical half-amplitude", "m", range=(0.0, 1.0),
          read_only=True),
    Param("fig8_theta", "double", 1.5707963267948966, "figure-8 plane rotation about world z (pi/2: the y-z "
          "plane)", "rad", range=(-math.pi, math.pi), read_only=True),
    Param("fig8_period_s", "double", 4.0, "figure-8 period", "s", range=(0.1, 1000.0), read_only=True),
    Param("goals", "double_array", _goals, "goals mode: flat [x, y, z] * n EE goals, world frame", "m",
          read_only=True),
    Param("goal_seed", "integer", -1, "goals mode: >= 0 draws the goals from gato.tasks.pickplace_scenarios "
          "with this seed instead of 'goals'", range=(-1, 2**31 - 1), read_only=True),
    Param("goal_hold_s", "double", 2.0, "goals mode: time at each goal (ramp included)", "s",
          range=(0.01, 1000.0), read_only=True),
    Param("goal_ramp_s", "double", 0.6, "goals mode: minimum-jerk travel time between goals (0 = steps)", "s",
          range=(0.0, 1000.0), read_only=True),
    Param("orientation", "string", "none", "EE orientation in the windows (gato_msgs/EEReference.orientations): "
          "none (position only); tool_down (any mode: tool z axis along world -z, tool x the horizontal "
          "heading of the EE x axis at q0; constant, except in goals mode, where the first goal's ramp slerps to it "
          "from the EE orientation at q0); sweep (fig8 mode: that tool-down orientation swinging +/- sweep_deg "
          "about a horizontal axis whose exact-IK path keeps 0.1 rad inside the joint box, one swing per figure-8, "
          "gato.core.sweep_axis.choose_sweep_axis)", choices=("none", "tool_down", "sweep"),
          read_only=True),
    Param("sweep_deg", "double", 30.0, "orientation sweep: amplitude of the swing", "deg", range=(0.0, 90.0),
          read_only=True),
)

# ---------------------------------------------------------------- the estimator node
ESTIMATOR = (
    Param("robot", "string", lambda r: r, "registered robot (URDF and EE frame of the identification model)",
          read_only=True),
    Param("joint_names", "string_array", _joint_names, "joints of the model; /joint_states and the effort "
          "commands are mapped by name (any order, extra joints ignored)", read_only=True),
    Param("effort_source", "string", "command",
          "where the applied torque of an interval comes from: command (gato_msgs/EffortCommand on "
          "effort_topic, stamped with the joint state it answers: applied from that state to the next; exact "
          "in lockstep) | joint_states (the effort field of /joint_states: the torque applied since the "
          "previous state, as the simulation world and effort state interfaces report it)",
          choices=("command", "joint_states"), read_only=True),
    Param("effort_topic", "string", "/gato_controller/command",
          "effort_source=command: the stamped effort command topic", read_only=True),
    Param("mode", "string", "wrench", "wrench: the full 6-D EE wrench (EMA alpha); weight: the payload weight "
          "only (gravity-aligned force, low-passed over weight_tau_s, floored at 0)", choices=("wrench", "weight"),
          read_only=True),
    Param("alpha", "double", 0.5, "EMA weight of a new fit (1 = raw per-interval fits)", range=(0.001, 1.0),
          read_only=True),
    Param("damping", "double", 0.001, "Tikhonov damping of the least-squares fit J^T w = tau_residual "
          "(added to J J^T)", "m^2", range=(0.0, 10.0), read_only=True),
    Param("weight_tau_s", "double", 0.1, "mode=weight: time constant of the weight filter", "s",
          range=(0.001, 100.0), read_only=True),
    Param("max_wrench", "double", 500.0, "divergence guard: the force and torque halves of every fit are "
          "clamped to this norm, counted and reported (~/stats, log); the estimate is never NaN", "N, N*m",
          range=(0.001, 1e5), read_only=True),
    Param("max_interval_s", "double", 0.1, "a gap between consecutive joint states longer than this (lost "
          "messages, a pause) is not fitted (the finite difference would be meaningless)", "s",
          range=(1e-4, 10.0), read_only=True),
    Param("frame_id", "string", "world", "header.frame_id of the published wrench (the world frame; the point "
          "of application is the EE frame origin)", read_only=True),
)

# ---------------------------------------------------------------- the live view node
VIEW = (
    Param("robot", "string", lambda r: r, "registered robot (URDF visuals and meshes, EE frame)", read_only=True),
    Param("host", "string", "127.0.0.1", "address the page and the Foxglove server bind to (127.0.0.1: this "
          "machine only; 0.0.0.0: every interface)", read_only=True),
    Param("port", "integer", 8080, "HTTP port of the browser page (0 = a free port, logged)", "port",
          range=(0, 65535), read_only=True),
    Param("foxglove", "bool", True, "also serve the Foxglove WebSocket protocol (foxglove-sdk): the scene and "
          "the graph's topics with their schemas", read_only=True),
    Param("foxglove_port", "integer", 8765, "port of the Foxglove WebSocket server (0 = a free port, logged)",
          "port", range=(0, 65535), read_only=True),
    Param("rate_hz", "double", 10.0, "frames per second the view computes and sends (its own thread; the "
          "subscriptions only store the newest message)", "Hz", range=(0.5, 120.0), read_only=True),
    Param("plot_window_s", "double", 10.0, "history of the scrolling plot (EE error, solve time)", "s",
          range=(0.5, 3600.0), read_only=True),
    Param("scheduling", "string", "idle", "CPU priority of the view's process, set at start-up for every thread: "
          "idle (Linux SCHED_IDLE: it runs only on CPU time the controller and the simulation leave over; nice 19 "
          "where SCHED_IDLE is not permitted), nice (nice 19), normal (unchanged)",
          choices=PRIORITY_MODES, read_only=True),
    Param("controller_node", "string", "/gato_controller", "node whose plan, step_result, status, "
          "solver_stats and command topics are shown (the gato plugin in embedded mode: /gato_plugin_embedded)",
          read_only=True),
)

#: Node name -> schema. The node names are the keys of the per-robot YAML files.
SCHEMAS = {"gato_controller": CONTROLLER, "gato_sim": SIM, "gato_reference": REFERENCE, "gato_estimator": ESTIMATOR,
           "gato_view": VIEW}
NODE_NAMES = tuple(SCHEMAS)
