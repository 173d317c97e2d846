"""ROS-free logic of the gato controller node: joint states and EE references in,
effort commands out, with the safety rules of the node. The node
(:mod:`gato_ros.controller_node`) only converts messages, keeps the clock and publishes.

Inputs are time-stamped on two clocks: ``stamp_ns`` (the producer's header stamp;
ordering and the plan's time) and ``now_ns`` (the node's clock at receipt; staleness).

Safety rules (each tested in test/test_ros_controller_logic.py):

- **Out-of-order stamps**: a joint state whose stamp is older than the last accepted
  one is dropped and counted (``dropped_out_of_order``); no command. A state with the
  SAME stamp as the last accepted one is a duplicate: the command already computed
  for it is returned again (no new solve), so a lockstep simulation that re-sends a
  state after a lost command gets the same answer.
- **Joint-name mismatch** (a controlled joint missing from the message, or position /
  velocity arrays whose length differs from the names): the state is refused
  (``rejected_names``, status ``refused`` with the missing names) and the controller
  HOLDS.
- **NaN / Inf** in a controlled joint's position or velocity: refused
  (``rejected_nonfinite``, status ``hold``) and the controller HOLDS.
- **Implausible values** (a controlled joint a full turn beyond its URDF position limit, or
  faster than 100x its velocity limit: :func:`gato_ros.inputs.state_bounds`): refused
  (``rejected_range``) and the controller HOLDS.
- **Malformed messages** (the node's boundary, ``on_*_msg``: :mod:`gato_ros.inputs`, each
  message validated once): a joint state with repeated names or arrays that do not match them
  is a name mismatch; one stamped before the epoch or more than 10 s ahead of the node clock is
  dropped (``rejected_stamps``, no hold); an EE reference or wrench estimate that fails its
  checks is dropped (``rejected_references`` / ``rejected_wrenches``) and the previous ones
  stay in force. Every refused message is counted once; rejections are logged once a second.
- **Stale joint states**: no good state received within ``joint_state_timeout_s``
  (node clock) -> one ``stale_events`` count, status ``hold``, and the controller
  HOLDS on every watchdog / timer tick until a good state arrives; the next good state
  resets the MPC warm start at it.
- **HOLD** = gravity compensation at the last good joint positions (pinocchio
  ``rnea(q, 0, 0)``), clamped to the URDF effort limits, published as a command with
  ``source="hold"``. Before any good state there is nothing to hold at: no command is
  published (a ros2_control forward controller then keeps its initial zero command).
- **Resume without a torque jump**: after every warm-start reset (start-up, a restarted
  node, recovery from a hold, a reference that comes back) the MPC restarts cold at the
  measured state, and the solver's EE reference is blended (minimum jerk) from the
  measured EE position into the live reference over distance / ``resume_speed_mps``
  (status reason "resuming: ..."), so the first commands stay near gravity compensation
  instead of jumping towards a reference that moved on.
- **Stale EE reference** (the reference node died): the controller follows the last
  window it received to its end (its last knot held: the window is clamped), and from
  the first tick past the window's end holds the EE position measured then (status
  reason "EE reference stale: ..."). With ``reference_sync`` (lockstep) a tick waits for
  its window; when the world has re-sent the tick's joint state ``REFERENCE_LOST_RESENDS``
  times (no command for that many ``lockstep_resend_s``: a reference node stalled by
  machine load answers well before; waiting keeps such runs reproducible) while a window
  was received before, the reference counts as lost: that tick and the following ones
  solve with the stale-reference rule at once, until a window arrives again (then the
  blend above applies).
- **Wrench estimate in lockstep** (``estimate_sync`` with ``hypotheses=estimator``): a tick
  also waits for the estimator's estimate stamped at its joint state (the fit of the interval
  that state closes; none is awaited at a first state or after a state this controller did not
  answer), so the solve never depends on DDS timing. When the world has re-sent the state
  ``REFERENCE_LOST_RESENDS`` times without it, the tick solves under the last estimate received
  (zero once older than ``estimate_timeout_s``), counted in ``estimates_missed``, logged and
  named in the status reason, and ticks stop waiting until an estimate arrives again.
- **Non-finite solver output**: MPCController's own fallback (gravity compensation at
  the measured state, ``source="fallback"``, counted in ``fallbacks``); a solver
  exception holds.
- **Torque clamp**: every MPC command is clamped to the URDF effort limits (ticks with a
  clamped joint are counted in ``clamped``).
- **Deadlines**: a tick whose receipt-to-publish time exceeds 1 / control_rate_hz
  counts as a deadline miss (:meth:`ControllerLogic.record_publish`).

Planners (``planner``, built through the :mod:`gato.planner` registry): ``bsqp`` (the
MPCController: plans, SolveInput, replay), ``sampling`` (gato.sampling over MuJoCo rollouts)
or ``osc`` (the operational-space controller). Every planner gets the same reference
(the N / dt window above, blended and stale-handled alike; a ReferenceWindow for sampling
and osc) and the same safety rules. Command ``source``: "mpc" (bsqp), "sampling", "osc",
"osc_fallback", "fallback" (bsqp's gravity fallback with ``fallback=off``), "hold".

**OSC fallback** (``fallback=osc``, planners bsqp and sampling): the tick's command comes
from the OSC (gato.osc_planner, osc_* gains, started at the measured state: it holds that
tool orientation and posture) tracking the tick's reference window when

- the planner missed ``fallback_after_misses`` deadlines in a row (free-running only: with
  reference_sync the world waits for the command, and a switch would depend on the machine),
- the solve diverged (BSQP's divergence flag, a non-finite command, a solver exception), or
- the planner re-seeded its warm start (BSQP's reseed_threshold).

The OSC keeps control for ``fallback_recover_ticks`` ticks (hysteresis); then the planner is
tried again with a cold start at the measured state (the resume blend above applies). Status
``state`` "fallback", ``active_planner`` "osc", ``fallback_reason`` the trigger; every OSC
tick counts in ``fallbacks``, every switch in ``fallback_switches``.

**Collision rows** (``collision_spheres`` / ``collision_planes``, planner bsqp only): the BSQP
solver's COLLISION group keeps every collision sphere of the arm ``collision_margin`` from the
obstacles (gato.controller_setup installs it after the limit groups). The OSC fallback and the
planners sampling / osc know nothing of obstacles: while the OSC fallback commands, the arm
tracks the reference window straight, obstacles or not.

Parameter changes are validated against the schema (:mod:`gato_ros.params`) plus a
capability check (limit mechanisms need the solver's row-group layer; obstacles need a
limit mechanism) and applied at the start of the next tick, never inside one.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf
from gato.planners import controller_setup as setup
from gato.planners import planner as planners
from gato.planners.controller_setup import COST_KEYS, SOLVER_KEYS
from gato.planners.safety import GravityHold

from . import inputs
from . import params as schema
from .inputs import Rejected
from .joint_order import JointOrder
from .reference_logic import min_jerk
from .types import JointStateSample, Plan, ReferenceWindow, SolveInput, ns_to_sec, sec_to_ns

__all__ = ["ControllerLogic", "TickOutput", "Status", "COST_KEYS", "SOLVER_KEYS", "REFERENCE_LOST_RESENDS"]
#: reference_sync: re-sends of a tick's joint state without its window after which the reference is lost
REFERENCE_LOST_RESENDS = 3
_SCHEMA = schema.by_name(schema.CONTROLLER)
#: OSC gains of the schema (osc_<name>) = gato.osc_planner config keys
_OSC_GAINS = ("stiffness", "damping", "orientation_stiffness", "orientation_damping", "null_space_stiffness",
              "null_space_damping")
_FALLBACK_KEYS = ("fallback", "fallback_after_misses", "fallback_grace_ticks", "fallback_recover_ticks",
                  "fault_solver_delay_s")


@dataclass
class Status:
    """Health counters and state (gato_msgs/ControllerStatus without the header)."""

    state: str = "waiting"
    reason: str = "no joint state received yet"
    ticks: int = 0
    deadline_misses: int = 0
    dropped_out_of_order: int = 0
    rejected_nonfinite: int = 0
    rejected_names: int = 0
    rejected_range: int = 0        # joint states beyond the plausible range (gato_ros.inputs.state_bounds)
    rejected_stamps: int = 0       # joint states stamped negative or too far ahead of the node clock
    rejected_references: int = 0   # EE reference windows refused (gato_ros.inputs.reference_window)
    rejected_wrenches: int = 0     # wrench estimates refused (gato_ros.inputs.wrench)
    stale_events: int = 0
    fallbacks: int = 0
    clamped: int = 0
    holds: int = 0
    latency_us: float = 0.0
    solve_us: float = 0.0
    params_json: str = ""
    active_planner: str = ""       # planner that computed the last command ("" on hold ticks)
    fallback_reason: str = ""      # "" | "deadline" | "diverged" | "reseeded" while the OSC fallback commands
    fallback_switches: int = 0     # switches from the planner to the OSC fallback


@dataclass
class TickOutput:
    """What one tick publishes.

    ``effort`` (n,) N*m in ``joint_names`` order, or None when there is nothing to command
    (refused input before any good state). ``stamp_ns``: the stamp of the joint state it
    answers. ``step`` / ``plan`` / ``solve_input`` are set on MPC ticks only (``solve_input``:
    what the step solved from, for recording and replay). ``duplicate``: a re-send of the
    previous output for a repeated state stamp. ``planner_step``: the
    :class:`gato.planner.StepResult` of a planner tick (any planner, the OSC fallback
    included); ``step`` stays the BSQP controller's own result (bsqp ticks only).
    """

    stamp_ns: int
    effort: np.ndarray | None
    source: str
    tick: int
    step: object = None
    plan: Plan | None = None
    solve_input: SolveInput | None = None
    duplicate: bool = False
    events: list = field(default_factory=list)
    planner_step: object = None
    planner: str = ""


class ControllerLogic:
    """MPC controller with the node's safety rules; no ROS.

    Args:
        config: parameter values by name (the controller schema of gato_ros.params);
            missing names take their defaults for ``config["robot"]``. Validated like a
            parameter file (read-only parameters allowed).
        log: optional ``log(level, text)`` callback, level in {"info", "warn", "error"},
            called on state changes (entering / leaving hold, refusals), not every tick.

    Raises ValueError on an invalid configuration (the reason names the parameter).
    """

    def __init__(self, config: dict, *, log=None):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.CONTROLLER, config, "controller")
        self.cfg = cfg
        self._log = log or (lambda level, text: None)
        self.urdf = robot_urdf(robot)
        self.period_s = 1.0 / cfg["control_rate_hz"]
        self.planner_name = cfg["planner"]
        if self.planner_name != "bsqp" and not cfg["publish_commands"]:
            raise ValueError(f"publish_commands: false (plans only, for the ros2_control plugin) needs planner "
                             f"bsqp; planner {self.planner_name!r} has no plan the plugin executes")
        if self.planner_name == "bsqp":
            # The controller replay rebuilds (controller_setup), behind the registry's bsqp planner.
            self.controller = setup.build_controller(cfg, urdf=self.urdf)
            self.planner = planners.planner_class("bsqp").from_controller(self.controller)
            self.solver = self.controller.solver
            model = self.solver.model
            solver_joints = list(self.solver.joint_names)
            self.effort_limit = np.asarray(self.solver.limits["u"], dtype=np.float64)  # solver order
            self._ee_pos = self.solver.ee_pos
        else:
            import pinocchio as pin

            self.controller = self.solver = None
            self.planner = planners.make(self.planner_name, robot, self._planner_config(cfg))
            model = pin.buildModelFromUrdf(str(self.urdf))
            solver_joints = list(model.names)[1:]
            self.effort_limit = np.asarray(model.effortLimit, dtype=np.float64)
            self._ee_pos = _ee_position(model, robot_info(robot)["ee_frame"])
        self._order = JointOrder(cfg["joint_names"], solver_joints, robot)
        self.joint_names, self._solver_joints = self._order.names, self._order.model_joints
        self._cmd_from_solver = self._order.to_names  # command order <- solver order
        self.nq, self.nv = int(model.nq), int(model.nv)
        self._x_lo, self._x_hi = inputs.state_bounds(model)   # plausible [q; qd], solver order
        self._reject_logged: dict = {}  # what -> node time [ns] of its last rejection log (1 per second)
        self._gravity = GravityHold(model, self.effort_limit)
        # the OSC: the planner itself (planner=osc) or the fallback (built now, not in the first fallback tick)
        self._osc = self.planner if self.planner_name == "osc" else (
            planners.make("osc", robot, self._osc_config(cfg)) if cfg["fallback"] == "osc" else None)
        self._fb = None                # OSC fallback in control: {"reason", "ticks", "x0"}; None: the planner
        self._miss_run = 0             # consecutive deadline misses of planner ticks
        self._grace_left = 0           # planner ticks after a cold start whose misses do not count
        self._osc_x0 = None            # state the OSC last started at (reset)
        if self.planner_name != "bsqp" and (cfg["collision_spheres"] or cfg["collision_planes"]):
            raise ValueError(f"collision_spheres: the collision rows are planner bsqp's; planner "
                             f"{self.planner_name!r} ignores obstacles (clear collision_spheres / collision_planes)")
        if self.planner_name != "bsqp" and cfg.get("hypotheses", "none") != "none":
            raise ValueError(f"hypotheses: {cfg['hypotheses']!r} needs planner bsqp (the solver's wrench "
                             f"hypotheses); planner is {self.planner_name!r}")
        self.status = Status()
        self._pending: dict = {}
        self._last_stamp_ns = None     # stamp of the last accepted state
        self._good = None              # (stamp_ns, x (nx,) solver order, recv now_ns) of the last good state
        self._stale = False
        self._need_reset = True        # next MPC tick resets the warm start at its state
        self._last_out: TickOutput | None = None
        self._refs: dict = {}          # stamp_ns -> ReferenceWindow (recent)
        self._ref_latest: ReferenceWindow | None = None
        self._hold_ref: ReferenceWindow | None = None
        self._ref_lost = False         # reference_sync: the reference stopped arriving (solve without it)
        self._pending_resends = 0      # reference_sync: re-sends of the state waiting for its window
        self._stale_ref = None         # (window stamp_ns, EE position (3,)) held past the window's end
        self._ramp = None              # (t0_ns, EE position (3,) at t0, duration s): resume blend
        self._ramp_pending = False     # start a resume blend at the next tick
        self._no_ref_yet = False       # ticks ran on the start-up hold reference (no window yet)
        self._pending_tick_stamp = None  # reference_sync: a state waiting for its reference
        self._prev_tick_stamp = None
        self._plan_seq = 0             # plans emitted (gato_msgs/Plan seq)
        self._plan_epoch = 0           # cold starts (gato_msgs/Plan reset_epoch)
        self._feed = None              # hypotheses=estimator: the latest wrench estimate (wrench_hypotheses)
        self._est: dict = {}           # estimate_sync: stamp_ns -> (6,) wrench estimate stamped at a joint state
        self._est_lost = False         # estimate_sync: estimates stopped arriving (solve without waiting)
        self._prev_state_stamp = None  # stamp of the state accepted before the latest one
        self._last_cmd_stamp = None    # stamp of the latest command emitted
        self.estimates_missed = 0      # estimate_sync: ticks that gave up waiting for their estimate
        # issue 31: the node's targets (gato_ros.target_logic.TargetLogic: pose / twist / joint trajectory);
        # while one is active its window replaces the EE reference and its per-knot posture is programmed
        self.target_source = None
        self._posture_on = False       # the solver's posture term carries target_source's knots
        self.status.params_json = self.params_json()
        self._config_json = self._make_config_json()

    # ------------------------------------------------------------------ parameters
    def validate_changes(self, changes: dict) -> str | None:
        """Why a run-time change is refused (first reason), or None. Schema checks (type,
        range, choices, read-only) plus the limit-mechanism capability check."""
        for name, value in changes.items():
            reason = schema.validate(schema.CONTROLLER, name, value)
            if reason:
                return reason
            if name == "limits" and value != "off" and not callable(getattr(self.solver, f"enable_limit_{value}",
                                                                               None)):
                return (f"limits: {value!r} needs the solver's constraint row-group layer, which this solver "
                        f"({type(self.solver).__name__}, backend {self.cfg['backend']}) does not have "
                        f"(no enable_limit_{value}); only 'off' is available")
            if self.controller is None and (name in setup.TUNABLE_KEYS or (name == "hypotheses"
                                                                              and value != "none")):
                return (f"{name}: a setting of planner bsqp; this node runs planner {self.planner_name!r} "
                        "(planner is read-only)")
        if self.controller is not None and set(changes) & {"limits", *setup.COLLISION_KEYS}:
            merged = {**self.cfg, **self._pending, **changes}
            try:
                setup.check_collision_limits(merged, merged["limits"])
            except ValueError as e:
                return str(e)
            if (merged["collision_spheres"] or merged["collision_planes"]) \
                    and not callable(getattr(self.solver, "enable_collision", None)):
                return (f"collision_spheres: this solver ({type(self.solver).__name__}, backend "
                        f"{self.cfg['backend']}) has no collision rows")
        return None

    def request_changes(self, changes: dict) -> None:
        """Queue validated changes; they take effect at the start of the next tick."""
        reason = self.validate_changes(changes)
        if reason:
            raise ValueError(reason)
        self._pending.update({k: schema.coerce(_SCHEMA[k], v) for k, v in changes.items()})

    def _apply_pending(self) -> None:
        if not self._pending:
            return
        ch, self._pending = self._pending, {}
        if self.controller is not None:
            setup.apply_tunables(self.controller, {k: v for k, v in ch.items() if k in setup.TUNABLE_KEYS})
        self.cfg.update(ch)
        if any(k.startswith("osc_") for k in ch) and self._osc is not None:
            self._rebuild_osc()
        if self.cfg["fallback"] != "osc" and self._fb is not None:
            self._leave_fallback("fallback switched off")
        elif self.cfg["fallback"] == "osc" and self._osc is None:
            self._osc = planners.make("osc", self.cfg["robot"], self._osc_config(self.cfg))
        self.status.params_json = self.params_json()
        self._config_json = self._make_config_json()
        self._log("info", "parameters applied: " + ", ".join(f"{k}={v}" for k, v in sorted(ch.items())))

    def params_json(self) -> str:
        """The tunables in force, read back from the solver and controller objects (JSON); the
        planner, the fallback settings and the OSC gains read back from the OSC in force."""
        out = setup.tunables(self.controller) if self.controller is not None else {}
        out.update(budget_s=self.cfg["budget_s"], joint_state_timeout_s=self.cfg["joint_state_timeout_s"],
                   resume_speed_mps=self.cfg["resume_speed_mps"], planner=self.planner_name,
                   **{k: self.cfg[k] for k in _FALLBACK_KEYS})
        if self._osc is not None:
            out.update({"osc_" + k: float(self._osc.config[k]) for k in _OSC_GAINS})
        return json.dumps(out, sort_keys=True)

    # ------------------------------------------------------------------ planners
    @staticmethod
    def _osc_config(cfg: dict) -> dict:
        """gato.osc_planner config from the node's osc_* parameters, stepped at the control rate."""
        return {"dt": 1.0 / cfg["control_rate_hz"], **{k: cfg["osc_" + k] for k in _OSC_GAINS}}

    @classmethod
    def _planner_config(cls, cfg: dict) -> dict:
        """The registry config of a planner other than bsqp (planner sampling / osc)."""
        if cfg["planner"] == "osc":
            return cls._osc_config(cfg)
        if cfg["sampling_horizon_s"] > cfg["N"] * cfg["dt"] + 1e-12:
            raise ValueError(f"sampling_horizon_s: {cfg['sampling_horizon_s']:g} s is longer than the reference "
                             f"window N * dt = {cfg['N'] * cfg['dt']:g} s")
        return {"dt": 1.0 / cfg["control_rate_hz"], "timestep": cfg["sampling_timestep_s"],
                "horizon_s": cfg["sampling_horizon_s"], "num_samples": cfg["sampling_num_samples"],
                "iterations": cfg["sampling_iterations"], "ctrl_std": cfg["sampling_ctrl_std"],
                "ee_weight": cfg["sampling_ee_weight"], "ctrl_weight": cfg["sampling_ctrl_weight"],
                "nthread": cfg["sampling_threads"] or None, "seed": cfg["sampling_seed"],
                "planner": cfg["sampling_method"]}

    def _rebuild_osc(self) -> None:
        """New OSC gains: a new OSC, restarted at the state the running one started from (same
        orientation and posture targets)."""
        osc = planners.make("osc", self.cfg["robot"], self._osc_config(self.cfg))
        x0 = self._fb["x0"] if self._fb is not None else self._osc_x0
        if x0 is not None:
            osc.reset(x0)
        if self.planner is self._osc:
            self.planner = osc
        self._osc = osc

    def _make_config_json(self) -> str:
        """SolveInput.config_json: what gato replay rebuilds (bsqp); the configuration otherwise."""
        if self.controller is not None:
            return setup.config_json(self.cfg, self.controller, self.urdf)
        return json.dumps(self.cfg, sort_keys=True)

    # ------------------------------------------------------------------ inputs
    def _set_state(self, state: str, reason: str, events: list, level: str = "warn") -> None:
        """Change the reported state; log (and list in ``events``) only actual changes."""
        if (state, reason) == (self.status.state, self.status.reason):
            return
        self.status.state, self.status.reason = state, reason
        text = f"{state}: {reason}" if reason else state
        events.append((level, text))
        self._log(level, text)

    # ------------------------------------------------------------------ messages: the node's boundary
    def on_joint_state_msg(self, msg, now_ns: int) -> TickOutput | None:
        """A sensor_msgs/JointState message (rclpy's, or anything with its fields), validated
        once (:func:`gato_ros.inputs.joint_state`), then :meth:`on_joint_state`. Refused there:
        a stamp before the epoch or more than ``inputs.FUTURE_TOLERANCE_S`` ahead of ``now_ns``
        is dropped (``rejected_stamps``; no hold: a foreign publisher's stamp says nothing about
        the robot), and so is one more than that ahead of the last accepted state while the stream
        is live (stamps on a clock other than the node's); arrays that do not match the names (or repeated names) are a joint-name
        mismatch (``rejected_names``, HOLD), or out of order when stamped before the last
        accepted state (``dropped_out_of_order``). Each refused message is counted once."""
        try:
            js = inputs.joint_state(msg, now_ns)
            last = self._last_stamp_ns
            if last is not None and js.stamp_ns - last > inputs.FUTURE_TOLERANCE_S * 1e9 and not (
                    self._good is not None and ns_to_sec(int(now_ns) - self._good[2]) > self.cfg["joint_state_timeout_s"]):
                # the stream is live and this one is far ahead of it: the same rule for stamps on another
                # clock than the node's (a live stream jumps no 10 s; after it went stale a jump is taken)
                raise Rejected("stamp", f"JointState: stamp {js.stamp_ns / 1e9:.3f} s is more than "
                               f"{inputs.FUTURE_TOLERANCE_S:g} s ahead of the live stream's ({last / 1e9:.3f} s)")
        except Rejected as e:
            events: list = []
            st = self.status
            if e.kind == "stamp":
                st.rejected_stamps += 1
                self._log_rejection("joint_state_stamp", f"joint state dropped: {e}", now_ns)
                return None
            try:
                stamp = inputs.stamp_ns(msg.header)
            except (AttributeError, TypeError, ValueError):
                stamp = None
            if stamp is None or (self._last_stamp_ns is not None and stamp < self._last_stamp_ns):
                st.dropped_out_of_order += 1
                return None
            st.rejected_names += 1
            self._set_state("refused", f"joint state refused: {e}", events, "error")
            return self._hold(stamp, events)
        return self.on_joint_state(js, now_ns)

    def on_reference_msg(self, msg, now_ns: int) -> TickOutput | None:
        """A gato_msgs/EEReference message, validated once (:func:`gato_ros.inputs.reference_window`:
        shape, finite, targets within reach of any arm, knot spacing, stamp not too far ahead of
        ``now_ns``), then :meth:`on_reference`. A refused window is dropped and counted
        (``rejected_references``); the previous windows stay in force."""
        try:
            w = inputs.reference_window(msg, now_ns)
        except Rejected as e:
            self.status.rejected_references += 1
            self._log_rejection("reference", f"EE reference rejected: {e}", now_ns)
            return None
        return self.on_reference(w, now_ns)

    def on_wrench_msg(self, msg, now_ns: int) -> TickOutput | None:
        """A geometry_msgs/WrenchStamped (the estimator's estimate), validated once
        (:func:`gato_ros.inputs.wrench`), then :meth:`on_wrench_estimate`. A refused one is
        dropped and counted (``rejected_wrenches``)."""
        try:
            stamp, w = inputs.wrench(msg, now_ns)
            return self.on_wrench_estimate(w, now_ns, stamp)
        except ValueError as e:          # Rejected, or on_wrench_estimate's own check
            self.status.rejected_wrenches += 1
            self._log_rejection("wrench", f"wrench estimate rejected: {e}", now_ns)
            return None

    def _log_rejection(self, what: str, text: str, now_ns: int) -> None:
        """Log a refused message at most once per second (of node time) per ``what``; the counters
        in the status count every one."""
        last = self._reject_logged.get(what)
        if last is None or abs(int(now_ns) - last) >= 1_000_000_000:
            self._reject_logged[what] = int(now_ns)
            self._log("warn", text)

    def on_joint_state(self, js: JointStateSample, now_ns: int) -> TickOutput | None:
        """A joint state arrived at node time ``now_ns``. Returns the output to publish, or None.

        trigger=state: a good state triggers a tick (unless reference_sync is waiting for
        its reference); trigger=timer: it is stored for the next timer tick. A refused
        state returns a HOLD output immediately (None before any good state).
        """
        events: list = []
        st = self.status
        if self._last_stamp_ns is not None and js.stamp_ns < self._last_stamp_ns:
            st.dropped_out_of_order += 1
            return None
        # validated before the duplicate check: a bad message that repeats the last stamp is refused too
        n = len(js.names)
        idx = self._order.index(js.names)
        if idx is None or len(js.position) != n or len(js.velocity) != n:
            st.rejected_names += 1
            if idx is None:
                why = (f"joint-name mismatch: /joint_states lacks {self._order.missing(js.names)} "
                       f"(got {list(js.names)}); expected {self.joint_names}")
            else:
                why = (f"joint-state arrays do not match the names: {n} names, {len(js.position)} positions, "
                       f"{len(js.velocity)} velocities")
            self._set_state("refused", why, events, "error")
            return self._hold(js.stamp_ns, events)
        x = np.concatenate([np.asarray(js.position, dtype=np.float64)[idx],
                            np.asarray(js.velocity, dtype=np.float64)[idx]])
        if not np.all(np.isfinite(x)):
            st.rejected_nonfinite += 1
            bad = int(np.argwhere(~np.isfinite(x))[0][0])
            kind = "position" if bad < self.nq else "velocity"
            jn = self._solver_joints[bad % self.nq]
            self._set_state("hold", f"non-finite joint state ({kind} of {jn} = {x[bad]}) at stamp "
                            f"{ns_to_sec(js.stamp_ns):.6f} s", events)
            return self._hold(js.stamp_ns, events)
        out_of_range = (x < self._x_lo) | (x > self._x_hi)
        if np.any(out_of_range):
            st.rejected_range += 1
            bad = int(np.argwhere(out_of_range)[0][0])
            kind = "position" if bad < self.nq else "velocity"
            jn = self._solver_joints[bad % self.nq]
            self._set_state("hold", f"implausible joint state ({kind} of {jn} = {x[bad]:.6g}, plausible "
                            f"[{self._x_lo[bad]:.4g}, {self._x_hi[bad]:.4g}]) at stamp {ns_to_sec(js.stamp_ns):.6f} s",
                            events)
            return self._hold(js.stamp_ns, events)
        if self._last_stamp_ns is not None and js.stamp_ns == self._last_stamp_ns:
            if self._last_out is not None and self._last_out.stamp_ns == js.stamp_ns:
                dup = TickOutput(**{**self._last_out.__dict__, "duplicate": True, "events": []})
                return dup
            if self._pending_tick_stamp == js.stamp_ns and self._good is not None and self._good[0] == js.stamp_ns:
                return self._resent(js.stamp_ns, now_ns, events)
            return None
        # accepted
        self._prev_state_stamp = self._last_stamp_ns
        self._last_stamp_ns = js.stamp_ns
        if self._stale or self.status.state in ("hold", "refused"):
            self._need_reset = True
        self._stale = False
        self._good = (js.stamp_ns, x, int(now_ns))
        if self._hold_ref is None:
            self._hold_ref = ReferenceWindow(js.stamp_ns, self.cfg["dt"], self._ee_pos(x[:self.nq])[None, :])
        if self.cfg["trigger"] != "state":
            return None
        wait_ref = self._waits_for_reference(js.stamp_ns)
        if wait_ref or self._waits_for_estimate(js.stamp_ns):
            self._pending_resends = 0
            self._pending_tick_stamp = js.stamp_ns
            if wait_ref and self._ref_latest is None:
                self._set_state("waiting", "no EE reference received yet (reference_sync waits for the window "
                                "stamped at each joint state's time)", events, "info")
            return None
        return self._tick(now_ns, events)

    def on_reference(self, w: ReferenceWindow, now_ns: int) -> TickOutput | None:
        """An EE reference window arrived. With reference_sync, completes a tick that waited
        for it (returns its output); otherwise it is only stored."""
        self._refs[w.stamp_ns] = w
        if self._ref_lost:
            self._ref_lost = False
            self._log("info", f"EE reference back at t={ns_to_sec(w.stamp_ns):.3f} s")
        if len(self._refs) > 64:
            for k in sorted(self._refs)[:-32]:
                del self._refs[k]
        if self._ref_latest is None or w.stamp_ns >= self._ref_latest.stamp_ns:
            self._ref_latest = w
        return self._complete_pending(now_ns)

    # ------------------------------------------------------------------ lockstep waits (reference_sync, estimate_sync)
    def _waits_for_reference(self, stamp_ns: int) -> bool:
        return bool(self.cfg["reference_sync"]) and stamp_ns not in self._refs and not self._ref_lost \
            and not (self.target_source is not None and self.target_source.active)

    def _waits_for_estimate(self, stamp_ns: int) -> bool:
        """estimate_sync: the tick at ``stamp_ns`` waits for the estimate stamped there. One is due
        when the previous state got a command from this controller (the estimator fits the interval
        between the two with it); the first state after a start closes no interval."""
        return (bool(self.cfg["estimate_sync"]) and not self._est_lost and stamp_ns not in self._est
                and self._pending.get("hypotheses", self.cfg.get("hypotheses", "none")) == "estimator"
                and self._prev_state_stamp is not None and self._last_cmd_stamp == self._prev_state_stamp)

    def _complete_pending(self, now_ns: int) -> TickOutput | None:
        """The tick waiting for its reference window / wrench estimate, once it has both."""
        st = self._pending_tick_stamp
        if st is None or self._good is None or self._good[0] != st:
            return None
        if self._waits_for_reference(st) or self._waits_for_estimate(st):
            return None
        return self._tick(now_ns, [])

    def _resent(self, stamp_ns: int, now_ns: int, events: list) -> TickOutput | None:
        """The world re-sent the state of the waiting tick: after REFERENCE_LOST_RESENDS re-sends what
        it still waits for counts as lost (the reference once a window was received before; the
        estimate) and the tick solves without it."""
        wait_ref, wait_est = self._waits_for_reference(stamp_ns), self._waits_for_estimate(stamp_ns)
        if not (wait_ref or wait_est):
            return self._tick(now_ns, events)        # e.g. hypotheses switched off meanwhile
        if wait_ref and self._ref_latest is None and not wait_est:
            return None                              # no window received yet: wait for the first one
        self._pending_resends += 1
        if self._pending_resends < REFERENCE_LOST_RESENDS:
            return None
        if wait_ref and self._ref_latest is not None:
            self._ref_lost = True
            self._log("warn", f"EE reference for t={ns_to_sec(stamp_ns):.3f} s did not arrive (the joint "
                      "state was re-sent): solving without waiting for references until one arrives")
        if wait_est:
            self._est_lost = True
            self.estimates_missed += 1
            self._log("warn", f"wrench estimate for t={ns_to_sec(stamp_ns):.3f} s did not arrive (the joint state "
                      f"was re-sent {self._pending_resends} times): solving under the last estimate received "
                      "(zero once older than estimate_timeout_s) without waiting for estimates until one arrives; "
                      "this run is not reproducible from here")
        if self._waits_for_reference(stamp_ns):
            return None
        return self._tick(now_ns, events)

    def on_timer(self, now_ns: int) -> TickOutput | None:
        """Timer callback (control_rate_hz). trigger=timer: the tick. trigger=state: the
        staleness watchdog (HOLD while the joint states are stale)."""
        events: list = []
        if self.cfg["trigger"] == "timer":
            return self._tick(now_ns, events)
        self._apply_pending()  # between ticks: a new joint_state_timeout_s governs this watchdog
        if self._good is not None and self._is_stale(now_ns, events):
            return self._hold(self._good[0], events)
        return None

    # ------------------------------------------------------------------ ticks
    def _is_stale(self, now_ns: int, events: list) -> bool:
        age = ns_to_sec(int(now_ns) - self._good[2])
        if age <= self.cfg["joint_state_timeout_s"]:
            return False
        if not self._stale:
            self._stale = True
            self.status.stale_events += 1
        self._set_state("hold", f"stale joint states: last good one received {age:.3f} s ago "
                        f"(joint_state_timeout_s = {self.cfg['joint_state_timeout_s']:g})", events)
        return True

    def _reference_for(self, stamp_ns: int, x: np.ndarray) -> tuple[np.ndarray, str]:
        """The solver reference (6N,) for the tick at ``stamp_ns`` and a status note: the
        window of the tick (reference_sync) or the latest one; past the end of the latest
        window, the EE position measured at the first tick past it (stale reference)."""
        N, dt = self.cfg["N"], self.cfg["dt"]
        if self.target_source is not None and self.target_source.active:     # issue 31: the node's targets
            return self.target_source.window(stamp_ns).solver_reference(stamp_ns, N, dt), ""
        w = self._refs.get(stamp_ns) if self.cfg["reference_sync"] else None
        w = w or self._ref_latest
        if w is None:
            self._no_ref_yet = True                # the first window, when it comes, is blended in
            return self._hold_ref.solver_reference(stamp_ns, N, dt), "no EE reference received: holding the EE " \
                "position of the first joint state"
        if self._no_ref_yet:
            self._no_ref_yet = False
            self._ramp_pending = True
        if stamp_ns <= w.end_ns:
            if self._stale_ref is not None:        # a window covers this tick again: blend back into it
                self._stale_ref = None
                self._ramp_pending = True
            note = "" if stamp_ns - w.stamp_ns <= sec_to_ns(max(0.1, 2.0 * self.period_s)) else \
                "EE reference stale: following the last window to its end"
            return w.solver_reference(stamp_ns, N, dt), note
        if self._stale_ref is None or self._stale_ref[0] != w.stamp_ns:
            self._stale_ref = (w.stamp_ns, np.asarray(self._ee_pos(x[:self.nq]), dtype=np.float64).copy(),
                               stamp_ns)
        hold = ReferenceWindow(stamp_ns, dt, self._stale_ref[1][None, :])
        return hold.solver_reference(stamp_ns, N, dt), (
            f"EE reference stale: the last window (stamp {ns_to_sec(w.stamp_ns):.3f} s) ended at "
            f"{ns_to_sec(w.end_ns):.3f} s; holding the EE position measured at {ns_to_sec(self._stale_ref[2]):.3f} s")

    def _resume_blend(self, stamp_ns: int, x: np.ndarray, ref: np.ndarray, start: bool) -> tuple[np.ndarray, str]:
        """The reference blended from the EE position at the resume into ``ref`` (6N,):
        minimum jerk over distance / resume_speed_mps. ``start``: a resume begins now."""
        v = self.cfg["resume_speed_mps"]
        if start:
            self._ramp = None
            if v > 0:
                p0 = np.asarray(self._ee_pos(x[:self.nq]), dtype=np.float64).copy()
                dist = float(np.linalg.norm(ref[:3] - p0))
                if dist > 1e-3:
                    self._ramp = (stamp_ns, p0, max(dist / v, 0.5))
        if self._ramp is None:
            return ref, ""
        t0, p0, T = self._ramp
        N, dt = self.cfg["N"], self.cfg["dt"]
        tk = ns_to_sec(stamp_ns - t0) + dt * np.arange(N)
        if tk[0] >= T:
            self._ramp = None
            return ref, ""
        s = min_jerk(tk / T)
        r = ref.reshape(N, 6).copy()
        r[:, :3] = p0 + s[:, None] * (r[:, :3] - p0)
        return r.ravel(), f"resuming: EE reference blended from the measured EE position over {T:.2f} s"

    def _tick(self, now_ns: int, events: list) -> TickOutput | None:
        self._apply_pending()
        est_note = self._sync_hypotheses(now_ns, None if self._good is None else self._good[0])
        self._pending_tick_stamp = None
        if self._good is None:
            return None
        if self._is_stale(now_ns, events):
            return self._hold(self._good[0], events)
        stamp, x, _ = self._good
        self._fallback_transitions(events)
        ref, note = self._reference_for(stamp, x)
        # A cold start of the planner blends its reference in; the OSC fallback tracks the live one
        # (a blend restarted on every fallback tick would pin it to the measured EE position).
        ref, blend_note = self._resume_blend(stamp, x, ref,
                                             (self._need_reset and self._fb is None) or self._ramp_pending)
        self._ramp_pending = False
        note = "; ".join(n for n in (blend_note, note, est_note) if n)
        dt_el = None
        if self._prev_tick_stamp is not None and stamp > self._prev_tick_stamp:
            dt_el = ns_to_sec(stamp - self._prev_tick_stamp)
        if self._fb is not None:
            return self._osc_tick(stamp, x, ref, dt_el, note, events)
        if self.controller is None:
            return self._planner_tick(stamp, x, ref, dt_el, note, events)
        budget = self.cfg["budget_s"] or None
        reset = self._need_reset
        try:
            self._program_posture(stamp)
            if reset:
                self.planner.reset(x)
                self.planner.warmup(x, ref)
                self._need_reset = False
                self._grace_left = self.cfg["fallback_grace_ticks"]
                dt_el = None
            warm = self.controller.xu_warm
            carried = self.controller.carried_state()  # with warm: what replay needs to continue exactly
            self._fault_delay()
            pres = self.planner.step(x, ref, dt_el, budget_s=budget)
            res = pres.detail
        except (ValueError, RuntimeError, FloatingPointError) as e:
            return self._planner_failed(f"solver error: {e}", stamp, x, ref, dt_el, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            return self._planner_failed("solver returned a non-finite command", stamp, x, ref, dt_el, events)
        if self._fallback_on and (res.diverged or res.reseeded):
            self._need_reset = True
            why = f"solver diverged ({res.fallback})" if res.diverged else \
                f"warm start re-seeded (prediction error {res.pred_err:.3g} > reseed_threshold)"
            return self._enter_fallback("diverged" if res.diverged else "reseeded", why, stamp, x, ref, dt_el,
                                        events)
        source = "mpc"
        if res.diverged:
            source = "fallback"
            self.status.fallbacks += 1
            self._set_state("running", f"solver diverged: {res.fallback} fallback this tick", events)
        else:
            self._set_state("running", note, events, "info")
        clamped = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(clamped != u):
            self.status.clamped += 1
        self._prev_tick_stamp = stamp
        self.status.solve_us = float(res.wall_s) * 1e6
        self._plan_seq += 1
        self._plan_epoch += int(reset)  # a cold start begins a new epoch: consumers drop older plans
        plan = Plan(stamp_ns=stamp, knot_dt=self.cfg["dt"], nx=res.solve.nx, nu=res.solve.nu, n_knots=res.solve.N,
                    joint_names=self._solver_joints, xu=np.asarray(res.xu_best, dtype=np.float64),
                    seq=self._plan_seq, reset_epoch=self._plan_epoch, integrator=str(self.solver.integrator))
        if np.all(warm == warm[:1]):
            warm = warm[:1]          # every entry starts from the same plan: store it once
        # the (B, 6) world wrenches this step's hypothesis batch programmed and scored: replay re-solves under them
        hyp = self.controller.hypotheses
        wrenches = None if hyp is None or getattr(hyp, "batch_used", None) is None else np.array(hyp.batch_used)
        solve_input = SolveInput(stamp_ns=stamp, tick=self.status.ticks + 1, joint_names=self._solver_joints,
                                 x_measured=x, reference=ref, xu_warm=warm, dt_elapsed=dt_el or 0.0,
                                 budget_s=budget or 0.0, reset=reset, config_json=self._config_json,
                                 solver_state=None if carried is None else carried["solver"],
                                 capped_out=bool(carried and carried["capped_out"]),
                                 force_reseed=bool(carried and carried["force_reseed"]),
                                 wrench_hypotheses=wrenches)
        return self._emit(stamp, clamped[self._cmd_from_solver], source, events, step=res, plan=plan,
                          solve_input=solve_input, planner_step=pres, planner="bsqp")

    # ------------------------------------------------------------------ sampling / osc planners, OSC fallback
    def _window(self, stamp_ns: int, ref: np.ndarray) -> ReferenceWindow:
        """The tick's (6N,) solver-layout reference as the ReferenceWindow the planners take."""
        return window_from_flat(stamp_ns, self.cfg["dt"], ref)

    @property
    def _fallback_on(self) -> bool:
        """The OSC fallback covers this planner (fallback=osc, a planner other than the OSC)."""
        return self.cfg["fallback"] == "osc" and self._osc is not None and self.planner is not self._osc

    def _fault_delay(self) -> None:
        if self.cfg["fault_solver_delay_s"] > 0:     # fault injection (tests): a stalled solver
            time.sleep(self.cfg["fault_solver_delay_s"])

    def _planner_tick(self, stamp, x, ref, dt_el, note, events) -> TickOutput:
        """A tick of planner sampling or osc (no SolveInput: gato replay re-runs bsqp ticks)."""
        reset = self._need_reset
        try:
            if reset:
                self.planner.reset(x)
                if self.planner is self._osc:
                    self._osc_x0 = x.copy()
                self._need_reset = False
                self._grace_left = self.cfg["fallback_grace_ticks"]
                dt_el = None
            if self.planner is not self._osc:
                self._fault_delay()
            res = self.planner.step(x, self._window(stamp, ref), dt_el)
        except (ValueError, RuntimeError, FloatingPointError) as e:
            return self._planner_failed(f"planner error: {e}", stamp, x, ref, dt_el, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            return self._planner_failed("planner returned a non-finite command", stamp, x, ref, dt_el, events)
        self._set_state("running", note, events, "info")
        return self._command(stamp, u, self.planner_name, events, res, self.planner_name)

    def _command(self, stamp, u, source, events, res, planner) -> TickOutput:
        """Clamp (counted), stats, emit: the tail of every non-bsqp planner tick."""
        clamped = np.clip(u, -self.effort_limit, self.effort_limit)
        if np.any(clamped != u):
            self.status.clamped += 1
        self._prev_tick_stamp = stamp
        self.status.solve_us = float(res.stats.wall_s) * 1e6
        return self._emit(stamp, clamped[self._cmd_from_solver], source, events, planner_step=res, planner=planner)

    def _fallback_transitions(self, events: list) -> None:
        """Between ticks: back to the planner after fallback_recover_ticks of OSC; into the OSC
        fallback after fallback_after_misses deadline misses in a row (free-running only)."""
        cfg = self.cfg
        if self._fb is not None:
            if self._fb["ticks"] >= cfg["fallback_recover_ticks"]:
                self._leave_fallback(f"after {self._fb['ticks']} OSC ticks")
            return
        k = cfg["fallback_after_misses"]
        if self._fallback_on and k > 0 and not cfg["reference_sync"] \
                and self._miss_run >= k:
            self._fb = {"reason": "deadline", "ticks": 0, "x0": None,
                        "why": f"{self._miss_run} deadline misses in a row (period {self.period_s * 1e3:g} ms)"}
            self._switched()

    def _switched(self) -> None:
        self.status.fallback_switches += 1
        self._need_reset = True            # the planner restarts cold when it takes over again
        self._miss_run = 0
        self._log("warn", f"OSC fallback ({self._fb['reason']}): {self._fb['why']}; the planner is tried again "
                  f"after {self.cfg['fallback_recover_ticks']} ticks")

    def _leave_fallback(self, why: str) -> None:
        self._log("info", f"planner {self.planner_name} back from the OSC fallback ({self._fb['reason']}) {why}")
        self._fb = None
        self._miss_run = 0
        self._need_reset = True

    def _planner_failed(self, why, stamp, x, ref, dt_el, events) -> TickOutput:
        """A solve raised or returned a non-finite command: restart cold next time, and this tick
        switch to the OSC fallback (when on) or hold."""
        self._need_reset = True
        if self._fallback_on:
            return self._enter_fallback("diverged", why, stamp, x, ref, dt_el, events)
        self._set_state("hold", why, events, "error")
        return self._hold(stamp, events)

    def _enter_fallback(self, reason, why, stamp, x, ref, dt_el, events) -> TickOutput:
        """The planner failed this tick: the OSC commands it (and the next fallback_recover_ticks)."""
        self._fb = {"reason": reason, "ticks": 0, "x0": None, "why": why}
        self._switched()
        return self._osc_tick(stamp, x, ref, dt_el, "", events)

    def _osc_tick(self, stamp, x, ref, dt_el, note, events) -> TickOutput:
        fb = self._fb
        try:
            if fb["x0"] is None:               # the OSC starts here: this orientation and posture
                self._osc.reset(x)
                fb["x0"] = x.copy()
            res = self._osc.step(x, self._window(stamp, ref), dt_el)
        except (ValueError, RuntimeError, FloatingPointError) as e:
            self._fb = None
            self._set_state("hold", f"OSC fallback error: {e}", events, "error")
            return self._hold(stamp, events)
        u = np.asarray(res.u, dtype=np.float64)
        if not np.all(np.isfinite(u)):
            self._fb = None
            self._set_state("hold", "OSC fallback returned a non-finite command", events, "error")
            return self._hold(stamp, events)
        fb["ticks"] += 1
        self.status.fallbacks += 1
        self._set_state("fallback", f"OSC fallback ({fb['reason']}): {fb['why']}; planner {self.planner_name} "
                        f"tried again after {self.cfg['fallback_recover_ticks']} OSC ticks"
                        + (f"; {note}" if note else ""), events)
        return self._command(stamp, u, "osc_fallback", events, res, "osc")

    def gravity_hold(self, q: np.ndarray) -> np.ndarray:
        """Gravity compensation rnea(q, 0, 0) (nv,) N*m in SOLVER order, clamped to the effort
        limits (:class:`gato.safety.GravityHold`)."""
        return np.clip(self._gravity(q), -self.effort_limit, self.effort_limit)

    def _hold(self, stamp_ns: int, events: list) -> TickOutput | None:
        if self._good is None:
            return TickOutput(stamp_ns=stamp_ns, effort=None, source="none", tick=self.status.ticks, events=events)
        self._need_reset = True
        self._fb = None                        # a hold ends a fallback: the planner restarts cold after it
        self._miss_run = 0
        tau = self.gravity_hold(self._good[1][:self.nq])
        self.status.holds += 1
        self.status.solve_us = 0.0
        return self._emit(stamp_ns, tau[self._cmd_from_solver], "hold", events)

    def _emit(self, stamp_ns, effort, source, events, step=None, plan=None, solve_input=None, planner_step=None,
              planner="") -> TickOutput:
        self.status.ticks += 1
        self.status.active_planner = planner
        self.status.fallback_reason = self._fb["reason"] if (self._fb is not None and source == "osc_fallback") \
            else ""
        self._last_cmd_stamp = stamp_ns
        out = TickOutput(stamp_ns=stamp_ns, effort=np.asarray(effort, dtype=np.float64), source=source,
                         tick=self.status.ticks, step=step, plan=plan, solve_input=solve_input, events=events,
                         planner_step=planner_step, planner=planner)
        self._last_out = out
        return out

    def record_publish(self, latency_s: float) -> None:
        """The node published a tick's command ``latency_s`` after receiving its trigger
        (joint state, or the timer); counts a deadline miss above 1 / control_rate_hz, and
        the planner ticks' misses in a row (the OSC fallback's trigger). In the first
        ``fallback_grace_ticks`` planner ticks after a cold start only a tick later than two
        periods counts toward that run: those solves start without a warm start and take several
        times longer (5.9-9.6 ms instead of 0.5 ms, 10-26 ms receipt to publish on a loaded
        machine), and counting them sent the planner from the fallback straight back into it; a
        stalled solver (late by more than two periods) still switches as fast as before."""
        self.status.latency_us = float(latency_s) * 1e6
        missed = latency_s > self.period_s
        if missed:
            self.status.deadline_misses += 1
        last = self._last_out
        if last is not None and last.source not in ("osc_fallback", "hold", "none"):
            if self._grace_left > 0:
                self._grace_left -= 1
                missed = latency_s > 2.0 * self.period_s
            self._miss_run = self._miss_run + 1 if missed else 0

    def status_dict(self) -> dict:
        return asdict(self.status)

    # ------------------------------------------------------------------ external-wrench hypotheses
    def on_wrench_estimate(self, wrench, now_ns: int, stamp_ns: int | None = None) -> TickOutput | None:
        """The estimator node's latest wrench (6,) [force N; torque N*m], world axes at the EE
        frame origin, received at node time ``now_ns``; used by the next ticks while
        ``hypotheses`` is ``estimator`` (gato_ros.wrench_hypotheses). ``stamp_ns``: its header
        stamp (the joint state that closed the fitted interval): with ``estimate_sync`` a tick
        waiting for it is completed and returned (else None). ValueError when not 6 finite
        values (the node ignores such a message)."""
        feed = self._estimate_feed()
        feed.set(wrench, now_ns)
        if stamp_ns is None:
            return None
        self._est[int(stamp_ns)] = feed.sampler.estimate.copy()
        if len(self._est) > 64:
            for k in sorted(self._est)[:-32]:
                del self._est[k]
        if self._est_lost:
            self._est_lost = False
            self._log("info", f"wrench estimates back at t={ns_to_sec(int(stamp_ns)):.3f} s: ticks wait for theirs "
                      "again (estimate_sync)")
        return self._complete_pending(now_ns)

    def _estimate_feed(self):
        if self._feed is None:
            from .wrench_hypotheses import EstimateFeed

            self._feed = EstimateFeed(self.solver, robot_info(self.cfg["robot"])["ee_frame"],
                                      spread=self.cfg["hypothesis_spread_n"],
                                      timeout_s=self.cfg["estimate_timeout_s"])
        return self._feed

    def _sync_hypotheses(self, now_ns: int, stamp_ns: int | None = None) -> str:
        """Between ticks: install / remove the estimator's hypothesis batch per ``hypotheses``;
        an expired estimate falls back to zero wrench; switching off zeroes the solver's f_ext.
        estimate_sync: the estimate stamped ``stamp_ns`` (the tick's state) is the one in force.
        Returns a status note ("" when nothing to say)."""
        want = self.cfg.get("hypotheses", "none") == "estimator"
        feed = self._feed
        note = ""
        if want:
            feed = self._estimate_feed()      # zero wrench until the first estimate arrives
            feed.timeout_s = self.cfg["estimate_timeout_s"]
            feed.sampler.spread = self.cfg["hypothesis_spread_n"]
            if self.cfg["estimate_sync"] and stamp_ns in self._est:
                feed.sampler.set_estimate(self._est[stamp_ns])
            elif self._est_lost and self.cfg["estimate_sync"]:
                note = (f"wrench estimates not arriving ({self.estimates_missed} ticks gave up waiting): solving "
                        "under the last one received")
            feed.refresh(now_ns)
            if self.controller.hypotheses is not feed.batch:
                self.controller.hypotheses = feed.batch
                self._log("info", "hypotheses: the estimator's wrench estimate")
        elif feed is not None and self.controller.hypotheses is feed.batch:
            self.controller.hypotheses = None
            nb = int(self.solver.n_bodies()) if callable(getattr(self.solver, "n_bodies", None)) else 1
            self.solver.set_f_ext_B(np.zeros((int(self.solver.batch_size), 6 * nb)))
            self._log("info", "hypotheses: none (robot-only model)")
        return note

    # ------------------------------------------------------------------ helpers for callers
    def ee_position(self, q) -> np.ndarray:
        """(3,) m: the EE position every planner of this node tracks, at joint positions q (nq,)
        rad in solver order (bsqp: the solver's EE; others: the registered EE frame's origin)."""
        return np.asarray(self._ee_pos(np.asarray(q, dtype=np.float64)), dtype=np.float64).copy()

    @property
    def stale(self) -> bool:
        return self._stale

    def last_good_stamp_ns(self):
        return None if self._good is None else self._good[0]

    @property
    def solver_joint_names(self) -> list:
        """The joints in solver order (plans, SolveInput, the posture targets)."""
        return list(self._solver_joints)

    def measured(self):
        """The latest good joint state: ``stamp_ns``, ``q`` (nq,) rad and ``qd`` (nv,) rad/s in
        solver order, ``ee`` (3,) m; None before the first one (issue 31's targets start there)."""
        if self._good is None:
            return None
        from types import SimpleNamespace

        stamp, x, _ = self._good
        return SimpleNamespace(stamp_ns=stamp, q=x[:self.nq].copy(), qd=x[self.nq:].copy(),
                               ee=self.ee_position(x[:self.nq]))

    def _program_posture(self, stamp_ns: int) -> None:
        """Issue 31: the solver's posture term carries target_source's per-knot joint targets (a joint
        trajectory or a joint hold) while it has them, and is off (weight 0) otherwise."""
        post = None if self.target_source is None else self.target_source.posture(stamp_ns)
        if post is None:
            if self._posture_on:
                self.solver.set_q_pos_cost(0.0)
                self.solver.set_q_nom(None)
                self._posture_on = False
            return
        self.solver.set_q_nom(post[0])
        self.solver.set_q_pos_cost(post[1])
        self._posture_on = True


def _ee_position(model, frame: str):
    """``ee_pos(q) -> (3,)`` m: the origin of URDF frame ``frame`` (pinocchio forward kinematics),
    the EE position the planners other than bsqp track (the registered EE frame)."""
    import pinocchio as pin

    data = model.createData()
    fid = model.getFrameId(frame)

    def ee_pos(q):
        pin.forwardKinematics(model, data, np.asarray(q, dtype=np.float64))
        return pin.updateFramePlacement(model, data, fid).translation.copy()
    return ee_pos


def window_from_flat(stamp_ns: int, knot_dt: float, flat_6n) -> ReferenceWindow:
    """A ReferenceWindow from a solver-layout (6N,) reference (orientation slots dropped)."""
    a = np.asarray(flat_6n, dtype=np.float64).reshape(-1, 6)
    return ReferenceWindow(stamp_ns, knot_dt, a[:, :3])

