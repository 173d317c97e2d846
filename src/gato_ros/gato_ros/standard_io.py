"""The controller node's standard ROS 2 interfaces (a thin shell: the behaviour is in
:mod:`gato_ros.target_logic`, :mod:`gato_ros.plan_view`, :mod:`gato_ros.health` and
:mod:`gato_ros.frames`, each tested without ROS).

Subscribes (node-relative names; QoS reliable, volatile unless stated):
    ~/goal_pose (geometry_msgs/PoseStamped, keep-last 1): a goal pose, reached on a
        minimum-jerk path (the orientation slerped along it with goal_orientation).
    ~/delta_twist_cmds (geometry_msgs/TwistStamped, keep-last 1): servo-style EE velocity
        (MoveIt Servo's topic name), clamped to servo_max_speed_mps / servo_max_angular_rps,
        in force servo_timeout_s; an angular part turns the EE orientation target.
    ~/joint_trajectory (trajectory_msgs/JointTrajectory, keep-last 1): a joint trajectory
        (validated like the action's goals; a refused one is logged and counted).
    /tf (tf2_msgs/TFMessage, keep-last 100), /tf_static (tf2_msgs/TFMessage, transient local):
        the frames a target may be given in.
Action server:
    ~/follow_joint_trajectory (control_msgs/action/FollowJointTrajectory): what MoveIt's simple
        controller manager sends. An invalid goal is accepted and aborted at once with
        INVALID_GOAL and the reason in error_string; a valid one is tracked
        (gato_ros.trajectory_logic, per-knot posture targets) with feedback every tick
        (desired / actual / error, solver order names), and ends SUCCESSFUL,
        PATH_TOLERANCE_VIOLATED or GOAL_TOLERANCE_VIOLATED (aborted: the arm holds the joint
        positions measured then); cancel = hold the joint positions measured at the cancel;
        a new goal (or a JointTrajectory message, pose goal or twist) preempts the running one
        (aborted, INVALID_GOAL, "preempted by ...").
Publishes:
    ~/plan_path (nav_msgs/Path): the published plan's EE path, one pose per knot, stamped at
        the knot's time, at viz_rate_hz.
    ~/reference_path (nav_msgs/Path): the reference window of the same tick.
    ~/batch_paths/row_<b> (nav_msgs/Path): with batch_size > 1, the EE path of batch rows
        b < viz_batch_rows (one topic per row: RViz colours each display; the winner of the
        tick is the row that ~/plan_path repeats, named in ~/batch_paths/best).
    ~/batch_paths/best (std_msgs/Int32): the winning row of the tick the paths are from.
    ~/markers (visualization_msgs/MarkerArray, keep-last 1): the same view for RViz in one
        display (gato_ros.plan_markers: the plan's path and knots, the reference window, the
        batch rows with the winner highlighted, the EE target), at viz_rate_hz.
    /tf (tf2_msgs/TFMessage): the EE target frame ``gato_ee_target`` (child of the base frame)
        at the reference's knot 0, at viz_rate_hz.
    /diagnostics (diagnostic_msgs/DiagnosticArray): the controller's health
        (:mod:`gato_ros.health`) every diagnostics_period_s.
The views (paths, markers, target TF) are published off the tick: after_tick copies the
plan, batch rows and reference and triggers a guard condition; the executor publishes them once
the tick's callback has returned.

While a target is active it owns the controller's reference (ControllerLogic.target_source):
/ee_reference windows are not used. nav_msgs, tf2_msgs and diagnostic_msgs come
from the ROS 2 overlay (or a system ROS 2), visualization_msgs from a system ROS 2 or the
workspace (src/vendor/visualization_msgs); without them the outputs that need them are off
and the node says so once at start-up.
"""
from __future__ import annotations

import numpy as np

from . import conversions as cv
from .frames import FrameTree, urdf_root_link
from .health import Health
from .path_cdr import PathCDR
from .plan_markers import plan_markers
from .plan_view import EEPath, RateLimiter, plan_view
from .target_logic import TargetLogic
from .trajectory_logic import (INVALID_GOAL, SUCCESSFUL, InvalidTrajectory, TrajectoryTracker,
                               knot_posture_supported, parse_trajectory, points_from_msg)

__all__ = ["StandardInterfaces", "EE_TARGET_FRAME"]

EE_TARGET_FRAME = "gato_ee_target"


def _optional(module: str, names: tuple):
    try:
        mod = __import__(module, fromlist=list(names))
        return tuple(getattr(mod, n) for n in names)
    except ImportError:
        return None


class StandardInterfaces:
    """Args: node (the controller node), logic (its ControllerLogic), qos (node_util.qos)."""

    def __init__(self, node, logic, qos):
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        self.node, self.logic = node, logic
        cfg = logic.cfg
        self.base_frame = (cfg["target_frame"] or urdf_root_link(logic.urdf)).lstrip("/")
        self.frames = FrameTree()
        self.targets = TargetLogic(cfg, self.base_frame, self.frames, ee_pos=logic.ee_position)
        self.health = Health(cfg["diagnostics_error_after_s"], cfg["diagnostics_recover_s"],
                             misses_degrade=not cfg["reference_sync"],
                             miss_run=cfg["fallback_after_misses"] or 3)
        self.viz_rate = RateLimiter(cfg["viz_rate_hz"])
        from gato.robots.registry import robot_info

        self.ee_path = EEPath(logic.urdf, robot_info(cfg["robot"])["ee_frame"], logic.solver_joint_names)
        self._cdr: dict = {}            # knots -> gato_ros.path_cdr.PathCDR (serialized Path template)
        # The view is published off the tick: after_tick copies what it needs (a few arrays) and
        # triggers this guard condition; the executor runs _publish_view once the tick's callback
        # has returned (FK, Paths, markers, TF: 0.5-1 ms that no tick waits for).
        self._view_pending = None
        self._view_gc = node.create_guard_condition(self._publish_view)
        # the controller takes its reference (and per-knot posture) from the targets while one is active
        logic.target_source = self.targets
        self._warned: set = set()
        log = node.get_logger()
        node.create_subscription(PoseStamped, "~/goal_pose", self._on_pose, qos(1))
        node.create_subscription(TwistStamped, "~/delta_twist_cmds", self._on_twist, qos(1))
        missing = []
        self._goal = None               # the running FollowJointTrajectory goal: {"gh", "future", "Result"}
        self._joint_limits()
        self.trajectories_rejected = 0
        jt = _optional("trajectory_msgs.msg", ("JointTrajectory",))
        if jt and logic.controller is not None and knot_posture_supported(logic.solver):
            node.create_subscription(jt[0], "~/joint_trajectory", self._on_joint_trajectory, qos(1))
        elif not jt:
            missing.append("trajectory_msgs (~/joint_trajectory)")
        fjt = _optional("control_msgs.action", ("FollowJointTrajectory",))
        if fjt and logic.controller is not None and knot_posture_supported(logic.solver):
            from rclpy.action import ActionServer, CancelResponse, GoalResponse

            self._FJT = fjt[0]
            self.action = ActionServer(node, self._FJT, "~/follow_joint_trajectory", execute_callback=self._execute,
                                       goal_callback=lambda _g: GoalResponse.ACCEPT,
                                       cancel_callback=lambda _g: CancelResponse.ACCEPT)
        elif fjt:
            log.info(f"~/follow_joint_trajectory: not offered (planner {logic.planner_name!r}: the joint "
                     "trajectory is tracked through the BSQP solver's per-knot posture targets, which this one "
                     "lacks)")
        else:
            missing.append("control_msgs (~/follow_joint_trajectory)")
        tf = _optional("tf2_msgs.msg", ("TFMessage",))
        self._TFMessage = tf[0] if tf else None
        if tf:
            static = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL)
            node.create_subscription(self._TFMessage, "/tf", self._on_tf, qos(100))
            node.create_subscription(self._TFMessage, "/tf_static", self._on_tf, static)
            self.pub_tf = node.create_publisher(self._TFMessage, "/tf", qos(100))
        else:
            missing.append("tf2_msgs (/tf, /tf_static, the EE target frame)")
        nav = _optional("nav_msgs.msg", ("Path",))
        self._Path = nav[0] if nav else None
        self.pub_batch_paths = []
        if nav:
            self.pub_plan_path = node.create_publisher(self._Path, "~/plan_path", qos(1))
            self.pub_ref_path = node.create_publisher(self._Path, "~/reference_path", qos(1))
            rows = min(int(cfg["batch_size"]), int(cfg["viz_batch_rows"])) if cfg["batch_size"] > 1 else 0
            self.pub_batch_paths = [node.create_publisher(self._Path, f"~/batch_paths/row_{b}", qos(1))
                                    for b in range(rows)]
            if rows:
                from std_msgs.msg import Int32

                self._Int32 = Int32
                self.pub_batch_best = node.create_publisher(Int32, "~/batch_paths/best", qos(1))
        else:
            missing.append("nav_msgs (~/plan_path, ~/reference_path, ~/batch_paths)")
        vis = _optional("visualization_msgs.msg", ("Marker", "MarkerArray"))
        self._vis = vis
        if vis:
            self.pub_markers = node.create_publisher(vis[1], "~/markers", qos(1))
        else:
            missing.append("visualization_msgs (~/markers)")
        diag = _optional("diagnostic_msgs.msg", ("DiagnosticArray", "DiagnosticStatus", "KeyValue"))
        self._diag = diag
        if diag:
            self.pub_diag = node.create_publisher(diag[0], "/diagnostics", qos(10))
            node.create_timer(cfg["diagnostics_period_s"], self._on_diagnostics_timer)
        else:
            missing.append("diagnostic_msgs (/diagnostics)")
        if missing:
            log.warning("not installed (source the ROS 2 overlay: scripts/activate.sh), these outputs are off: "
                        + "; ".join(missing))
        log.info(f"targets: ~/goal_pose, ~/delta_twist_cmds in frame {self.base_frame!r} (or any frame on /tf)")

    # ------------------------------------------------------------------ inputs
    def _preempt(self, by: str) -> None:
        """A new target ends the running action goal (aborted, INVALID_GOAL, the reason)."""
        g, self._goal = self._goal, None
        if g is not None and not g["future"].done():
            g["gh"].abort()
            g["future"].set_result(self._result(INVALID_GOAL, f"preempted by {by}"))

    def _refused(self, what: str, reason: str) -> None:
        self.node.get_logger().warning(f"{what}: {reason}", throttle_duration_sec=1.0)

    def _on_pose(self, msg):
        m = self.logic.measured()
        if m is None:
            self.targets.counters.goals_rejected += 1
            self._refused("goal pose", "refused: no joint state received yet (the path starts at the measured EE)")
            return
        p, o = msg.pose.position, msg.pose.orientation
        # a tracked orientation slerps from the measured EE's (FK only when it is tracked)
        R = self.ee_path.rotation(m.q) if self.targets.cfg["goal_orientation"] else None
        why = self.targets.on_pose(msg.header.frame_id, [p.x, p.y, p.z], [o.x, o.y, o.z, o.w], m.stamp_ns, m.ee,
                                   ee_rot_now=R)
        if why:
            self._refused("goal pose", why)
        else:
            self._preempt("a pose goal")
            self.node.get_logger().info(f"goal pose accepted: {self.targets._goal[2].round(4).tolist()} m in "
                                        f"{self.base_frame!r}, {self.targets._goal[3]:.2f} s min-jerk path")

    def _on_twist(self, msg):
        m = self.logic.measured()
        if m is None:
            self.targets.counters.twists_rejected += 1
            self._refused("twist", "refused: no joint state received yet")
            return
        v, w = msg.twist.linear, msg.twist.angular
        clamped = self.targets.counters.twists_clamped
        # a turn starts from the measured EE orientation (FK only for a twist that turns)
        R = self.ee_path.rotation(m.q) if (w.x, w.y, w.z) != (0.0, 0.0, 0.0) else None
        why = self.targets.on_twist(msg.header.frame_id, [v.x, v.y, v.z], [w.x, w.y, w.z], m.stamp_ns, m.ee,
                                    ee_rot_now=R)
        if why:
            self._refused("twist", why)
            return
        self._preempt("a twist")
        if self.targets.counters.twists_clamped > clamped:
            self._refused("twist", self.targets.last_reason)

    def _on_tf(self, msg):
        for t in msg.transforms:
            if t.child_frame_id.lstrip("/") == EE_TARGET_FRAME:
                continue                                  # our own output
            tr, r = t.transform.translation, t.transform.rotation
            why = self.frames.set_transform(t.header.frame_id, t.child_frame_id, [tr.x, tr.y, tr.z],
                                            [r.x, r.y, r.z, r.w])
            if why and why not in self._warned and len(self._warned) < 32:
                self._warned.add(why)
                self.node.get_logger().warning(f"/tf: {why}")

    # ------------------------------------------------------------------ outputs
    def rejected_counts(self) -> dict:
        c = self.targets.counters
        return {"goals_rejected": c.goals_rejected, "twists_rejected": c.twists_rejected,
                "unknown_frame": c.unknown_frame, "trajectories_rejected": self.trajectories_rejected}

    def after_tick(self, out) -> None:
        """A tick was published: health accounting; the plan view at viz_rate_hz, published by
        _publish_view after the tick (a copy of its plan, batch and reference: the logic may
        reuse its buffers by then)."""
        now = self.node.get_clock().now().nanoseconds
        self.health.on_tick(now, self.logic.status, out)
        if self._goal is not None:
            self._goal_tick()
        if (self._Path is None and self._TFMessage is None and self._vis is None) or out.plan is None:
            return
        if not self.viz_rate.due(out.stamp_ns):
            return
        self._view_pending = _view_input(out)
        self._view_gc.trigger()

    def _publish_view(self) -> None:
        """The guard condition's callback: the newest pending view's Paths, markers and TF."""
        out, self._view_pending = self._view_pending, None
        if out is None:
            return
        view = plan_view(out, self.ee_path, self.logic.nq, len(self.pub_batch_paths or ()))
        if view is None:
            return
        if self._Path is not None:
            self.pub_plan_path.publish(self._path("plan", view.ee, view.stamp_ns, view.knot_dt))
            if len(view.reference):
                self.pub_ref_path.publish(self._path("ref", view.reference, view.stamp_ns, view.knot_dt))
            if view.rows.shape[0] > 1:
                for b, (pub, row) in enumerate(zip(self.pub_batch_paths, view.rows)):
                    pub.publish(self._path(f"row{b}", row, view.stamp_ns, view.knot_dt))
                self.pub_batch_best.publish(self._Int32(data=int(view.best)))
        if self._TFMessage is not None and len(view.reference):
            self.pub_tf.publish(self._target_tf(view.reference[0], view.stamp_ns))
        if self._vis is not None:
            self.pub_markers.publish(self._markers(view))

    def _markers(self, view):
        """visualization_msgs/MarkerArray of gato_ros.plan_markers(view), stamped at the plan."""
        from geometry_msgs.msg import Point

        Marker, MarkerArray = self._vis
        stamp = cv.ns_to_time(view.stamp_ns)
        arr = MarkerArray()
        for spec in plan_markers(view):
            m = Marker()
            m.header.stamp = stamp
            m.header.frame_id = self.base_frame
            m.ns, m.id, m.type, m.action = spec.ns, int(spec.id), int(spec.type), int(spec.action)
            m.pose.orientation.w = 1.0
            if spec.type == Marker.SPHERE and len(spec.points):
                m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in spec.points[0])
            elif len(spec.points):
                m.points = [Point(x=float(x), y=float(y), z=float(z)) for x, y, z in spec.points]
            m.scale.x, m.scale.y, m.scale.z = (float(v) for v in spec.scale)
            m.color.r, m.color.g, m.color.b, m.color.a = (float(v) for v in spec.color)
            arr.markers.append(m)
        return arr

    def _path(self, key, pts, stamp_ns, knot_dt) -> bytes:
        """nav_msgs/Path of ``pts`` (N, 3), pose k stamped at the knot's time, serialized directly
        (gato_ros.path_cdr: ~0.06 ms against ~0.7 ms through rclpy's message conversion)."""
        cdr = self._cdr.get(len(pts))
        if cdr is None:
            cdr = self._cdr[len(pts)] = PathCDR(self.base_frame, len(pts))
        return cdr(stamp_ns, int(round(knot_dt * 1e9)), pts)

    def _target_tf(self, p, stamp_ns):
        from geometry_msgs.msg import TransformStamped

        t = TransformStamped()
        t.header.stamp = cv.ns_to_time(stamp_ns)
        t.header.frame_id = self.base_frame
        t.child_frame_id = EE_TARGET_FRAME
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = (float(v) for v in p)
        R = None
        Rk = self.targets.orientation_at([stamp_ns])   # the tracked orientation now (a goal's slerp, a servo's)
        if Rk is not None:
            R = Rk[0]
        elif self.targets.mode == "goal":                # an untracked goal's orientation
            R = self.targets.goal_orientation
        q = _matrix_to_quat(R) if R is not None else (0.0, 0.0, 0.0, 1.0)
        t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w = q
        m = self._TFMessage()
        m.transforms.append(t)
        return m

    def _on_diagnostics_timer(self):
        DiagnosticArray, DiagnosticStatus, KeyValue = self._diag
        now = self.node.get_clock().now().nanoseconds
        rep = self.health.report(now, self.logic.status, self.rejected_counts())
        st = DiagnosticStatus()
        st.level = bytes([rep.level])
        st.name = f"{self.node.get_name()}: MPC controller"
        st.message = rep.message
        st.hardware_id = self.logic.cfg["robot"]
        c = self.targets.counters
        extra = [("target_mode", self.targets.mode), ("goals_accepted", str(c.goals_accepted)),
                 ("twists_accepted", str(c.twists_accepted)), ("twists_clamped", str(c.twists_clamped)),
                 ("servo_stops", str(c.servo_stops)), ("trajectory_active", str(self._goal is not None))]
        st.values = [KeyValue(key=k, value=v) for k, v in rep.values + extra]
        m = DiagnosticArray()
        m.header.stamp = cv.ns_to_time(max(now, 0))
        m.status.append(st)
        self.pub_diag.publish(m)


    # ------------------------------------------------------------------ joint trajectories
    def _joint_limits(self):
        """URDF position limits (solver order) for the trajectory validation."""
        import pinocchio as pin

        model = pin.buildModelFromUrdf(str(self.logic.urdf))
        names = list(model.names)[1:]
        idx = [names.index(j) for j in self.logic.solver_joint_names]
        self._lo = np.asarray(model.lowerPositionLimit, dtype=np.float64)[idx]
        self._hi = np.asarray(model.upperPositionLimit, dtype=np.float64)[idx]
        self._vlim = np.asarray(model.velocityLimit, dtype=np.float64)[idx]

    def _parse(self, names, points, path_tol=(), goal_tol=(), goal_time_s=0.0):
        cfg = self.logic.cfg
        return parse_trajectory(names, points, self.logic.solver_joint_names, self._lo, self._hi,
                                path_tolerance=path_tol, goal_tolerance=goal_tol, goal_time_tolerance_s=goal_time_s,
                                defaults={k: cfg[k] for k in ("traj_path_tolerance_rad", "traj_goal_tolerance_rad",
                                                              "traj_goal_time_s")},
                                velocity_limit=self._vlim)

    def _start(self, traj):
        """Track ``traj`` from the latest good joint state; None when there is none yet."""
        m = self.logic.measured()
        if m is None:
            return None
        tracker = TrajectoryTracker(traj, m.stamp_ns, m.q, m.qd)
        self.targets.on_trajectory(tracker)
        return tracker

    def _on_joint_trajectory(self, msg):
        try:
            traj = self._parse(msg.joint_names, points_from_msg(msg.points))
        except InvalidTrajectory as e:
            self.trajectories_rejected += 1
            self._refused("joint trajectory", f"refused: {e}")
            return
        self._preempt("a JointTrajectory message")
        if self._start(traj) is None:
            self.trajectories_rejected += 1
            self._refused("joint trajectory", "refused: no joint state received yet")

    def _result(self, code: int, text: str):
        r = self._FJT.Result()
        r.error_code, r.error_string = int(code), text
        return r

    async def _execute(self, gh):
        from rclpy.task import Future

        g = gh.request
        try:
            traj = self._parse(g.trajectory.joint_names, points_from_msg(g.trajectory.points),
                               [(t.name, t.position, t.velocity) for t in g.path_tolerance],
                               [(t.name, t.position, t.velocity) for t in g.goal_tolerance],
                               cv.time_to_ns(g.goal_time_tolerance) * 1e-9)
        except InvalidTrajectory as e:
            self.trajectories_rejected += 1
            self._refused("follow_joint_trajectory goal", f"INVALID_GOAL: {e}")
            gh.abort()
            return self._result(e.code, str(e))
        self._preempt("a new FollowJointTrajectory goal")
        tracker = self._start(traj)
        if tracker is None:
            self.trajectories_rejected += 1
            gh.abort()
            return self._result(INVALID_GOAL, "no joint state received yet")
        fut = Future()
        self._goal = {"gh": gh, "future": fut, "tracker": tracker}
        self.node.get_logger().info(f"follow_joint_trajectory: {len(traj.t)} points over {tracker.duration_s:.2f} s "
                                    "accepted")
        return await fut

    def _goal_tick(self):
        """After each tick: cancel, feedback, outcome of the running goal."""
        g = self._goal
        m = self.logic.measured()
        if m is None or self.targets.tracker is not g["tracker"]:
            return
        gh, tracker = g["gh"], g["tracker"]
        if gh.is_cancel_requested:
            self.targets.hold_joints(m.q)
            self._goal = None
            gh.canceled()
            g["future"].set_result(self._result(SUCCESSFUL, "canceled: holding the joint positions measured at "
                                                f"{m.stamp_ns * 1e-9:.3f} s"))
            return
        q_des, qd_des = tracker.sample([m.stamp_ns])
        fb = self._FJT.Feedback()
        fb.header.stamp = cv.ns_to_time(m.stamp_ns)
        fb.joint_names = list(self.logic.solver_joint_names)
        fb.desired.positions, fb.desired.velocities = q_des[0].tolist(), qd_des[0].tolist()
        fb.actual.positions, fb.actual.velocities = m.q.tolist(), m.qd.tolist()
        fb.error.positions, fb.error.velocities = (q_des[0] - m.q).tolist(), (qd_des[0] - m.qd).tolist()
        gh.publish_feedback(fb)
        code, text = tracker.check(m.stamp_ns, m.q, m.qd)
        if code is None:
            return
        self._goal = None
        if code == SUCCESSFUL:
            gh.succeed()
        else:
            self.targets.hold_joints(m.q)
            gh.abort()
            self.node.get_logger().warning(f"follow_joint_trajectory aborted: {text}")
        g["future"].set_result(self._result(code, text))

def _view_input(out):
    """What plan_view reads from a TickOutput, copied (plan knots, batch rows, reference)."""
    from types import SimpleNamespace as NS

    p = out.plan
    plan = NS(xu=np.array(p.xu, dtype=np.float64), nx=p.nx, nu=p.nu, n_knots=p.n_knots, stamp_ns=p.stamp_ns,
              knot_dt=p.knot_dt)
    step = getattr(out, "step", None)
    st = None
    if step is not None and step.solve is not None:
        st = NS(best_id=step.best_id, solve=NS(xu=np.array(step.solve.xu, dtype=np.float64)))
    si = getattr(out, "solve_input", None)
    si = None if si is None else NS(reference=np.array(si.reference, dtype=np.float64))
    return NS(plan=plan, step=st, solve_input=si, stamp_ns=out.stamp_ns)


def _matrix_to_quat(R) -> tuple:
    """(x, y, z, w) of a rotation matrix (Shepperd's method, the largest pivot)."""
    R = np.asarray(R, dtype=np.float64)
    tr = np.trace(R)
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = ((R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s)
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        v = [0.0, 0.0, 0.0]
        v[i] = 0.25 * s
        v[j] = (R[j, i] + R[i, j]) / s
        v[k] = (R[k, i] + R[i, k]) / s
        q = (*v, (R[k, j] - R[j, k]) / s)
    return tuple(float(x) for x in q)

