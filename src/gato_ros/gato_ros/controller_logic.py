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
- **Runaway** (:mod:`gato_ros.controller_runaway`, the closed loop's guard): a plausible state
  whose joint is beyond ``runaway_factor`` x its velocity limit at two ticks in a row (beyond
  max(10, ``runaway_factor``) x at one) or 0.5 rad beyond its position limits: a damped joint
  hold at the positions of the trip (``source="runaway_hold"``, status ``runaway`` with the
  reason, ``fallback_reason`` "runaway", logged as an error) for ``runaway_hold_s`` and until
  every joint is under its limit; then the planner restarts cold.
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

import time
from dataclasses import asdict

import numpy as np

from gato.core.bsqp import robot_info, robot_urdf
from gato.planners import controller_setup as setup
from gato.planners import planner as planners
from gato.planners.controller_setup import COST_KEYS, SOLVER_KEYS
from gato.planners.safety import GravityHold
from gato.core.state import MeasuredState, StateError

from . import inputs
from . import params as schema
from .controller_fallback import OscFallback
from .controller_gating import REFERENCE_LOST_RESENDS, TickGating
from .controller_params import ControllerParameters
from .controller_runaway import RunawayWatch
from .controller_reference import ReferenceTracker, window_from_flat  # noqa: F401 - window_from_flat: its old path
from .controller_ticks import PlannerTicks
from .controller_types import Status, TickOutput
from .controller_wrench import WrenchSync
from .ee_kinematics import EERotation, ee_position as _ee_position
from .inputs import Rejected
from .joint_order import JointOrder
from .types import JointStateSample, ReferenceWindow, ns_to_sec

__all__ = ["ControllerLogic", "TickOutput", "Status", "COST_KEYS", "SOLVER_KEYS", "REFERENCE_LOST_RESENDS"]


#: What ControllerLogic._admit_state returns for a state that ticks now (the caller ticks).
_TICK = object()

class ControllerLogic(ControllerParameters, TickGating, PlannerTicks, OscFallback, RunawayWatch, WrenchSync):
    """MPC controller with the node's safety rules; no ROS.

    Args:
        config: parameter values by name (the controller schema of gato_ros.params);
            missing names take their defaults for ``config["robot"]``. Validated like a
            parameter file (read-only parameters allowed).
        log: optional ``log(level, text)`` callback, level in {"info", "warn", "error"},
            called on state changes (entering / leaving hold, refusals), not every tick.
        clock: optional ``clock() -> int`` node time [ns], read by :meth:`on_joint_state_msg`
            when it is called without ``now_ns`` (as the node's subscription callback).
        sink: optional ``sink(out, t_recv)``: every output of :meth:`on_joint_state_msg` (None
            included) with ``time.perf_counter()`` at its receipt; the node publishes there.

    Raises ValueError on an invalid configuration (the reason names the parameter).

    The jobs of a tick live in one module each, mixed in here: parameter changes
    (:mod:`gato_ros.controller_params`), tick gating (:mod:`gato_ros.controller_gating`), the
    bsqp / sampling / osc ticks (:mod:`gato_ros.controller_ticks`), the OSC fallback
    (:mod:`gato_ros.controller_fallback`), wrench sync (:mod:`gato_ros.controller_wrench`); the
    EE reference is a collaborator (``references``, :class:`gato_ros.controller_reference.ReferenceTracker`).
    """

    def __init__(self, config: dict, *, log=None, clock=None, sink=None):
        robot = config.get("robot", "iiwa14")
        cfg = schema.resolve_config(schema.CONTROLLER, config, "controller")
        self.cfg = cfg
        self._log = log or (lambda level, text: None)
        self._clock, self._sink = clock, sink
        self.urdf = robot_urdf(robot)
        self.period_s = 1.0 / cfg["control_rate_hz"]
        self.planner_name = cfg["planner"]
        if self.planner_name != "bsqp" and not cfg["publish_commands"]:
            raise ValueError(f"publish_commands: false (plans only, for the ros2_control plugin) needs planner "
                             f"bsqp; planner {self.planner_name!r} has no plan the plugin executes")
        if self.planner_name == "bsqp":
            # The controller replay rebuilds (controller_setup), behind the registry's bsqp planner,
            # whose steps carry what replay re-solves them from (StepResult.replay)
            self.controller = setup.build_controller(cfg, urdf=self.urdf)
            self.planner = planners.planner_class("bsqp").from_controller(self.controller)
            self.planner.record_replay = True
            self.solver = self.controller.solver
            model = self.solver.model
            solver_joints = list(self.solver.joint_names)
            self.effort_limit = np.asarray(self.solver.limits["u"], dtype=np.float64)  # solver order
            self._ee_pos = self.solver.ee_pos
            ee_fid = int(self.solver.ee_frame_id)
        else:
            import pinocchio as pin

            self.controller = self.solver = None
            self.planner = planners.make(self.planner_name, robot, self._planner_config(cfg))
            model = pin.buildModelFromUrdf(str(self.urdf))
            solver_joints = list(model.names)[1:]
            self.effort_limit = np.asarray(model.effortLimit, dtype=np.float64)
            self._ee_pos = _ee_position(model, robot_info(robot)["ee_frame"])
            ee_fid = int(model.getFrameId(robot_info(robot)["ee_frame"]))
        self._ee_rot = EERotation(model, ee_fid)     # the status's EE orientation error (issue 30)
        self._order = JointOrder(cfg["joint_names"], solver_joints, robot)
        self.joint_names, self._solver_joints = self._order.names, self._order.model_joints
        self._cmd_from_solver = self._order.to_names  # command order <- solver order
        self.nq, self.nv = int(model.nq), int(model.nv)
        self._x_lo, self._x_hi = inputs.state_bounds(model)   # plausible [q; qd], solver order
        self._reject_logged: dict = {}  # what -> node time [ns] of its last rejection log (1 per second)
        self._gravity = GravityHold(model, self.effort_limit)
        self._build_runaway_guard(model)
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
        self._good = None              # (stamp_ns, MeasuredState (nx,) solver order, recv now_ns): last good state
        self._stale = False
        self._need_reset = True        # next MPC tick resets the warm start at its state
        self._last_out: TickOutput | None = None
        # the EE reference windows and each tick's reference from them (stale, start-up hold, resume blend)
        self.references = ReferenceTracker(cfg, self.period_s, self._ee_pos, self.nq,
                                           lambda level, text: self._log(level, text))
        self._pending_resends = 0      # reference_sync: re-sends of the state waiting for its window
        self._pending_tick_stamp = None  # reference_sync: a state waiting for its reference
        self._prev_tick_stamp = None
        self._plan_seq = 0             # plans emitted (gato_msgs/Plan seq)
        self._sync_plan_gains()        # issue 33: plan_gains -> the bsqp planner's gains per step
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
        self._posture = None           # (q (N, nq), weights (N, nq)) programmed for this tick (SolveInput), or None
        self.status.params_json = self.params_json()
        self._config_json = self._make_config_json()


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
    def on_joint_state_msg(self, msg, now_ns: int | None = None) -> TickOutput | None:
        """A sensor_msgs/JointState message (rclpy's, or anything with its fields), validated
        once (:func:`gato_ros.inputs.joint_state`), then :meth:`on_joint_state`. Refused there:
        a stamp before the epoch or more than ``inputs.FUTURE_TOLERANCE_S`` ahead of ``now_ns``
        is dropped (``rejected_stamps``; no hold: a foreign publisher's stamp says nothing about
        the robot), and so is one more than that ahead of the last accepted state while the stream
        is live (stamps on a clock other than the node's); arrays that do not match the names (or repeated names) are a joint-name
        mismatch (``rejected_names``, HOLD), or out of order when stamped before the last
        accepted state (``dropped_out_of_order``). Each refused message is counted once.

        The node subscribes this method itself: ``now_ns`` None reads the constructor's ``clock``,
        and the output goes to its ``sink`` too. So a joint state reaches the C++ solver in five
        Python frames from the node's callback (issue 29, test/test_tick_path.py)."""
        t_recv = time.perf_counter()
        if now_ns is None:
            now_ns = self._clock()
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
            out = self._refused_msg(e, msg, now_ns)
        else:
            events: list = []
            out = self._admit_state(js, now_ns, events)
            if out is _TICK:           # the tick right here, not through on_joint_state: one frame less
                out = self._tick(now_ns, events)
        if self._sink is not None:
            self._sink(out, t_recv)
        return out

    def _refused_msg(self, e: Rejected, msg, now_ns: int) -> TickOutput | None:
        """A joint-state message :meth:`on_joint_state_msg` refused: counted; a HOLD for a name
        mismatch, nothing for a stamp refused or out of order."""
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
        out = self._admit_state(js, now_ns, events)
        return self._tick(now_ns, events) if out is _TICK else out

    def _admit_state(self, js: JointStateSample, now_ns: int, events: list):
        """The checks and bookkeeping of a joint state (:meth:`on_joint_state`): the output to
        return (a HOLD, a duplicate's, None), or :data:`_TICK` when this state ticks now. The
        caller ticks, so the solve is five Python frames below the message entry (issue 29,
        test/test_tick_path.py)."""
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
        try:    # finite, plausible: the one check of this state (the planners take it as it is)
            state = MeasuredState(x, x.size, name="joint state", bounds=(self._x_lo, self._x_hi))
        except StateError as e:
            bad = e.index
            kind = "position" if bad < self.nq else "velocity"
            jn = self._solver_joints[bad % self.nq]
            if e.reason == "nonfinite":
                st.rejected_nonfinite += 1
                why = f"non-finite joint state ({kind} of {jn} = {x[bad]})"
            else:
                st.rejected_range += 1
                why = (f"implausible joint state ({kind} of {jn} = {x[bad]:.6g}, plausible "
                       f"[{self._x_lo[bad]:.4g}, {self._x_hi[bad]:.4g}])")
            self._set_state("hold", f"{why} at stamp {ns_to_sec(js.stamp_ns):.6f} s", events)
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
        self._good = (js.stamp_ns, state, int(now_ns))
        self.references.hold_at(js.stamp_ns, state.x)
        if self.cfg["trigger"] != "state":
            return None
        wait_ref = self._waits_for_reference(js.stamp_ns)
        if wait_ref or self._waits_for_estimate(js.stamp_ns):
            self._pending_resends = 0
            self._pending_tick_stamp = js.stamp_ns
            if wait_ref and self.references.latest is None:
                self._set_state("waiting", "no EE reference received yet (reference_sync waits for the window "
                                "stamped at each joint state's time)", events, "info")
            return None
        return _TICK

    def on_reference(self, w: ReferenceWindow, now_ns: int) -> TickOutput | None:
        """An EE reference window arrived. With reference_sync, completes a tick that waited
        for it (returns its output); otherwise it is only stored."""
        self.references.add(w)
        return self._complete_pending(now_ns)

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
    def _tick(self, now_ns: int, events: list) -> TickOutput | None:
        self._apply_pending()
        est_note = self._sync_hypotheses(now_ns, None if self._good is None else self._good[0])
        self._pending_tick_stamp = None
        if self._good is None:
            return None
        if self._is_stale(now_ns, events):
            return self._hold(self._good[0], events)
        stamp, state, _ = self._good     # the MeasuredState the planners take as it is (checked once)
        x = state.x
        guarded = self._runaway_tick(stamp, x, events)     # a lost arm: the joint hold, not the planner
        if guarded is not None:
            return guarded
        self._fallback_transitions(events)
        ref, note = self.references.for_tick(stamp, x, self.target_source)
        # A cold start of the planner blends its reference in; the OSC fallback tracks the live one
        # (a blend restarted on every fallback tick would pin it to the measured EE position).
        refs = self.references
        ref, blend_note = refs.blend(stamp, x, ref, (self._need_reset and self._fb is None) or refs.ramp_pending)
        refs.ramp_pending = False
        note = "; ".join(n for n in (blend_note, note, est_note) if n)
        dt_el = None
        if self._prev_tick_stamp is not None and stamp > self._prev_tick_stamp:
            dt_el = ns_to_sec(stamp - self._prev_tick_stamp)
        if self._fb is not None:
            return self._osc_tick(stamp, state, ref, dt_el, note, events)
        # Every planner on one path, the step called here (not in a helper): the joint state reaches
        # the C++ solver in five Python frames (test/test_tick_path.py)
        reset = self._need_reset
        try:
            self._prepare_step(stamp, state, ref, reset)
            if reset:
                dt_el = None
            res = self.planner.step(state, ref, dt_el, self._step_budget())
        except (ValueError, RuntimeError, FloatingPointError) as e:
            word = "solver" if self._records else "planner"
            return self._planner_failed(f"{word} error: {e}", stamp, state, ref, dt_el, events)
        return self._planner_result(res, reset, stamp, state, ref, dt_el, note, events)

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
        tau = self.gravity_hold(self._good[1].x[:self.nq])
        self.status.holds += 1
        self.status.solve_us = 0.0
        return self._emit(stamp_ns, tau[self._cmd_from_solver], "hold", events)

    def _emit(self, stamp_ns, effort, source, events, step=None, plan=None, solve_input=None, planner_step=None,
              planner="") -> TickOutput:
        self.status.ticks += 1
        self.status.active_planner = planner
        if planner_step is None:       # hold and runaway-hold ticks: no reference tracked
            self.status.ee_position_error = self.status.ee_orientation_error = float("nan")
        self.status.fallback_reason = "runaway" if source == "runaway_hold" else (
            self._fb["reason"] if (self._fb is not None and source == "osc_fallback") else "")
        self._last_cmd_stamp = stamp_ns
        if plan is not None:
            # issue 33: the winning row's feedback gains (N-1, nu, nx) the bsqp planner attached to its
            # step's plan under plan_gains (BSQP.feedback_gains(best_id)); None: off, or none exist
            plan.K = getattr(getattr(planner_step, "plan", None), "K", None) if self.cfg["plan_gains"] else None
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
        if last is not None and last.source not in ("osc_fallback", "runaway_hold", "hold", "none"):
            if self._grace_left > 0:
                self._grace_left -= 1
                missed = latency_s > 2.0 * self.period_s
            self._miss_run = self._miss_run + 1 if missed else 0

    def status_dict(self) -> dict:
        return asdict(self.status)

    def _track(self, x, ref: ReferenceWindow) -> None:
        """The status's EE tracking of a planner or OSC tick (issue 30): the measured EE at ``x``
        (solver order) against knot 0 of ``ref``, the window the tick solved on: position
        distance [m] and, when the window carries orientations, the angle of R_ref^T R_ee [rad]
        (NaN on a position-only window)."""
        q = np.asarray(x, dtype=np.float64)[:self.nq]
        self.status.ee_position_error = float(np.linalg.norm(self.ee_position(q) - ref.positions[0]))
        self.status.ee_orientation_error = float("nan") if ref.orientations is None else \
            self._ee_rot.angle_to(q, ref.orientations[0])

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

        stamp, state, _ = self._good
        x = state.x
        return SimpleNamespace(stamp_ns=stamp, q=x[:self.nq].copy(), qd=x[self.nq:].copy(),
                               ee=self.ee_position(x[:self.nq]))
