"""The controller node's standard ROS 2 interfaces over DDS, in the simulation bringup
(gato_bringup/launch/sim.launch.yaml through the launch runner, lockstep MuJoCo world: the run
does not depend on the machine's load; reference node in hold mode, a private ROS domain on
loopback; the targets replace its windows while they are active):

- a geometry_msgs/PoseStamped goal 20 cm away is reached within 5 mm and held (q_cost 20, set
  live: the default 2 leaves a 12 mm gravity sag at rest); a NaN goal and a
  goal in an unknown frame are refused (counted on /diagnostics) and the arm keeps its target;
- a geometry_msgs/TwistStamped stream of 0.1 m/s for 2 s (simulated time: one twist per joint
  state, as a servo loop at the control rate sends them) moves the EE 0.2 m +/- 2 cm and it stops
  (below 10 % of the stream's speed) within 0.2 s of the stream stopping;
- an angular twist stream (0.2 rad/s about z for 1 s) turns the EE 0.2 rad in place and stops;
- with goal_orientation (set live), a goal 20 cm away and turned 20 degrees is reached within
  5 mm and 2 degrees and held;
- with a hypothesis batch (B = 4: hypotheses:=estimator, batch_size 4): each
  ~/batch_paths/row_<b> is the forward kinematics of the tick's StepResult row b, best is its
  best_id, ~/plan_path repeats the winner, the MarkerArray carries the rows, winner highlighted;
- nav_msgs/Path of the plan (~/plan_path) matches the published gato_msgs/Plan through forward
  kinematics, and the EE target frame arrives on /tf; the visualization_msgs/MarkerArray
  (~/markers) carries the same plan path, the reference window and the target, at the same rate;
  /diagnostics reports OK while tracking;

The FollowJointTrajectory action (MoveIt's interface) is tested in test_ros_action_system.py on the
same bringup and Probe. Times are the joint states' stamps (simulated); no wall-clock time is
asserted.
"""
import time
import uuid

import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
import_or_skip("gato_ros.launch_runner", _HINT)
import_or_skip("nav_msgs.msg", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")
import_or_skip("diagnostic_msgs.msg", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")
import_or_skip("tf2_msgs.msg", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")
import_or_skip("visualization_msgs.msg", "build the workspace (scripts/setup.sh builds src/vendor/visualization_msgs)")
from test_ros_system import WAIT_S, assert_clean_exit, stop_launch, share, start_runner  # noqa: E402

pytestmark = pytest.mark.ros
ROBOT = "iiwa14"
NS = 10**9


def _stamp(h) -> int:
    return int(h.stamp.sec) * NS + int(h.stamp.nanosec)


class Probe:
    """Drives the controller's target topics and watches the EE (forward kinematics of
    /joint_states), the plan, its path, /tf and /diagnostics from this process."""

    def __init__(self, domain_id):
        import gato
        import pinocchio as pin
        from diagnostic_msgs.msg import DiagnosticArray
        from gato_msgs.msg import Plan
        from geometry_msgs.msg import PoseStamped, TwistStamped
        from nav_msgs.msg import Path
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage
        from visualization_msgs.msg import MarkerArray

        from gato_ros.node_util import qos

        self.model = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
        self.data = self.model.createData()
        self.fid = self.model.getFrameId(gato.robot_info(ROBOT)["ee_frame"])
        self.names = list(self.model.names)[1:]
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node("gato_test_targets_probe", context=self.ctx)
        self.ee = []                    # (stamp ns, (3,))
        self.ee_R = []                  # (stamp ns, (3, 3)): the EE frame's rotation (what the MPC tracks)
        self.plans, self.paths, self.tf, self.diag, self.markers = {}, {}, [], [], {}
        self.node.create_subscription(JointState, "/joint_states", self._on_js, qos(100))
        self.node.create_subscription(Plan, "/gato_controller/plan", self._on_plan, qos(100))
        self.node.create_subscription(Path, "/gato_controller/plan_path", self._on_path, qos(100))
        self.node.create_subscription(TFMessage, "/tf", lambda m: self.tf.extend(m.transforms), qos(100))
        self.node.create_subscription(MarkerArray, "/gato_controller/markers", self._on_markers, qos(100))
        self.node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.diag.extend(m.status), qos(100))
        self.pub_pose = self.node.create_publisher(PoseStamped, "/gato_controller/goal_pose", qos(1))
        self.pub_twist = self.node.create_publisher(TwistStamped, "/gato_controller/delta_twist_cmds", qos(1))
        self.PoseStamped, self.TwistStamped = PoseStamped, TwistStamped
        from rclpy.parameter_client import AsyncParameterClient

        self.params = AsyncParameterClient(self.node, "gato_controller")
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)

    def set(self, name, value):
        from rclpy.parameter import Parameter

        assert self.params.wait_for_services(timeout_sec=WAIT_S)
        fut = self.params.set_parameters([Parameter(name, value=value)])
        self.spin_until(fut.done, f"setting {name}")
        r = fut.result().results[0]
        assert r.successful, r.reason

    def fk(self, q):
        import pinocchio as pin

        pin.forwardKinematics(self.model, self.data, np.asarray(q, dtype=np.float64))
        return pin.updateFramePlacement(self.model, self.data, self.fid).translation.copy()

    def _on_js(self, m):
        pos = dict(zip(m.name, m.position))
        t = _stamp(m.header)
        self.ee.append((t, self.fk([pos[n] for n in self.names])))
        self.ee_R.append((t, self.data.oMf[self.fid].rotation.copy()))   # the frame fk just placed

    def _on_plan(self, m):
        self.plans[_stamp(m.header)] = m

    def _on_path(self, m):
        self.paths[_stamp(m.header)] = m

    def _on_markers(self, m):
        if m.markers:
            self.markers[_stamp(m.markers[0].header)] = {(k.ns, k.id): k for k in m.markers}

    def close(self):
        self.node.destroy_node()
        self.ctx.try_shutdown()

    def now(self) -> int:
        return self.ee[-1][0] if self.ee else 0

    def spin_until(self, pred, what, timeout=WAIT_S * 3):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.ex.spin_once(timeout_sec=0.01)
            if pred():
                return
        pytest.fail(f"timed out after {timeout} s waiting for {what}")

    def wait_sim(self, seconds):
        t0 = self.now()
        self.spin_until(lambda: self.now() >= t0 + seconds * NS, f"{seconds} s of simulated time")

    def pose(self, p, frame="", xyzw=(0.0, 0.0, 0.0, 1.0)):
        m = self.PoseStamped()
        m.header.frame_id = frame
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in p)
        o = m.pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in xyzw)
        self.pub_pose.publish(m)

    def twist(self, v, w=(0.0, 0.0, 0.0)):
        m = self.TwistStamped()
        m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = (float(x) for x in v)
        m.twist.angular.x, m.twist.angular.y, m.twist.angular.z = (float(x) for x in w)
        self.pub_twist.publish(m)

    def ee_between(self, t0, t1):
        return np.array([p for t, p in self.ee if t0 <= t <= t1])

    def diag_values(self, st):
        return {kv.key: kv.value for kv in st.values}


def _sim_graph(tmp_path, ros_env, *extra_args, probe_class=None):
    """The simulation bringup (iiwa14, no end) with extra launch arguments and a Probe (or
    ``probe_class``) on its topics; yields the probe, then stops the graph with SIGINT and checks
    its clean exit."""
    share()
    marker, report = uuid.uuid4().hex, tmp_path / "report.json"
    proc = start_runner(["gato_bringup", "sim.launch.yaml", f"robot:={ROBOT}", "duration:=0", *extra_args],
                        ros_env, marker, report)
    probe = None
    try:
        probe = (probe_class or Probe)(int(ros_env["ROS_DOMAIN_ID"]))
        yield probe
    finally:
        out = stop_launch(proc, marker, probe)
    assert_clean_exit(proc, out, report, marker)


@pytest.fixture
def bringup(tmp_path, ros_env):
    yield from _sim_graph(tmp_path, ros_env, "reference:=hold")


@pytest.mark.slow
def test_pose_goal_twist_stream_paths_tf_and_diagnostics(bringup):
    p = bringup
    # the controller runs (plans arrive) and the arm rests at the hold reference; q_cost 20: the default 2
    # leaves a 12 mm gravity sag at rest (measured here and in test_ros_targets_closed_loop)
    p.spin_until(lambda: len(p.plans) >= 50 and len(p.ee) > 0, "50 plans")
    p.set("q_cost", 20.0)
    p.wait_sim(1.0)

    # --- a pose goal 20 cm away: reached within 5 mm and held
    goal = check_pose_goal(p, [0.0, 0.2, 0.0])

    # --- bad goals are refused and the arm keeps its target
    p.pose([np.nan, 0.0, 0.5])
    p.wait_sim(0.1)                                  # ~/goal_pose keeps the newest goal only (depth 1)
    p.pose(goal + [0.0, 0.0, 0.1], frame="no_such_frame")
    t_bad = p.now()
    p.wait_sim(1.0)
    err = np.linalg.norm(p.ee_between(t_bad, p.now()) - goal, axis=1)
    assert err.max() <= 0.005, err.max()

    # --- a twist stream of 0.1 m/s for 2 s of simulated time, then nothing
    check_twist_stream(p, [0.0, -0.1, 0.0])
    v = p.diag_values([d for d in p.diag if "gato_controller" in d.name][-1])
    print(f"controller: {v['deadline_misses']} deadline misses, {v['fallbacks']} fallback ticks, {v['holds']} holds")

    # --- an angular twist stream (0.2 rad/s about world z for 1 s): the EE turns in place, then stops
    check_turn_stream(p, [0.0, 0.0, 0.2])

    # --- with goal_orientation: a goal 20 cm away turned 20 degrees about world z (slerped from the
    # orientation the servo left on the min-jerk path): within 5 mm and 2 degrees
    p.set("goal_orientation", True)
    c, s_ = np.cos(np.radians(20.0)), np.sin(np.radians(20.0))
    check_pose_goal(p, [0.0, 0.2, 0.0], rotation=np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]]))

    # --- the plan's EE path matches the published Plan (forward kinematics of its knots)
    common = sorted(set(p.paths) & set(p.plans))
    assert len(common) >= 10, (len(p.paths), len(p.plans))
    for t in common[-5:]:
        plan, path = p.plans[t], p.paths[t]
        nx, nu, n = plan.nx, plan.nu, plan.n_knots
        xu = np.asarray(plan.xu)
        order = [list(plan.joint_names).index(j) for j in p.names]
        for k, ps in enumerate(path.poses):
            q = xu[k * (nx + nu):k * (nx + nu) + nx // 2][order]
            pp = ps.pose.position
            assert np.allclose([pp.x, pp.y, pp.z], p.fk(q), atol=1e-9)
        assert len(path.poses) == n and _stamp(path.poses[1].header) - t == round(plan.knot_dt * NS)
    # rate: viz_rate_hz (10 Hz default) of the plans' 100 Hz
    span = (common[-1] - common[0]) / NS
    assert 0.5 * 10 * span <= len(common) <= 1.5 * 10 * span + 2, (len(common), span)
    assert any(tr.child_frame_id == "gato_ee_target" for tr in p.tf)

    # --- the MarkerArray (~/markers): the plan's path is the same FK of the Plan's knots, with the
    # reference window and the EE target at its knot 0; at the paths' rate
    both = sorted(set(p.markers) & set(p.paths))
    assert len(both) >= 10, (len(p.markers), len(p.paths))
    for t in both[-5:]:
        mk, path = p.markers[t], p.paths[t]
        assert set(mk) == {("plan", 0), ("plan_knots", 0), ("reference", 0), ("target", 0)}, sorted(mk)
        pts = np.array([[q.x, q.y, q.z] for q in mk["plan", 0].points])
        want = np.array([[ps.pose.position.x, ps.pose.position.y, ps.pose.position.z] for ps in path.poses])
        assert mk["plan", 0].header.frame_id == path.header.frame_id and np.array_equal(pts, want)
        ref = np.array([[q.x, q.y, q.z] for q in mk["reference", 0].points])
        tp = mk["target", 0].pose.position
        assert mk["reference", 0].action == 0 and len(ref) == len(pts) and np.allclose([tp.x, tp.y, tp.z], ref[0])
    m_span = (max(p.markers) - min(p.markers)) / NS
    assert 0.5 * 10 * m_span <= len(p.markers) <= 1.5 * 10 * m_span + 2, (len(p.markers), m_span)

    # --- diagnostics: the refused inputs are counted; OK again while holding still
    mine = [s for s in p.diag if "gato_controller" in s.name]
    assert mine, "no /diagnostics from the controller"
    v = p.diag_values(mine[-1])
    assert int(v["goals_rejected"]) == 2 and int(v["unknown_frame"]) == 1, v
    assert any(s.level in (b"\x01", b"\x02") and "goals_rejected +" in s.message for s in mine), \
        [s.message for s in mine]
    n0 = len(mine)
    p.spin_until(lambda: any(s.level == b"\x00" for s in p.diag[n0:] if "gato_controller" in s.name),
                 "an OK diagnostic", timeout=WAIT_S)


def _angle_deg(Ra, Rb):
    """The angle [deg] of the rotation between two (3, 3) rotation matrices."""
    c = (np.trace(np.asarray(Ra).T @ np.asarray(Rb)) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))


def _xyzw(R):
    """(x, y, z, w) unit quaternion of the rotation matrix R (3, 3)."""
    import pinocchio as pin

    return pin.Quaternion(np.asarray(R, dtype=np.float64)).normalized().coeffs().copy()


def check_pose_goal(p, offset, rotation=None, settle_s=1.0, hold_s=0.5):
    """A ~/goal_pose ``offset`` (3,) m from the measured EE (base frame; goal_speed_mps 0.1: a
    min-jerk path of |offset| / 0.1 s) is reached within 5 mm and held: every joint state of
    ``hold_s`` s is within 5 mm of it, a window that begins no later than ``settle_s`` s after the
    path's end. ``rotation`` (3, 3), applied in the world frame to the measured EE orientation,
    gives the goal an orientation (the controller's goal_orientation must be on): the EE frame is
    then within 2 degrees of it over the same window too. Returns the goal position (3,) m."""
    ee0, R0 = p.ee[-1][1], p.ee_R[-1][1]
    goal = ee0 + np.asarray(offset, dtype=np.float64)
    Rg = None if rotation is None else np.asarray(rotation) @ R0
    t_goal = p.now()
    p.pose(goal) if Rg is None else p.pose(goal, xyzw=_xyzw(Rg))
    T = max(float(np.linalg.norm(offset)) / 0.1, 0.5)
    n0 = len(p.ee)
    seen = {"t": [], "pos": [], "ang": []}       # errors of the joint states since the goal, in order

    def update():
        k = len(seen["t"])
        for (t, x), (_, R) in zip(p.ee[n0 + k:], p.ee_R[n0 + k:]):
            seen["t"].append(t)
            seen["pos"].append(float(np.linalg.norm(x - goal)))
            seen["ang"].append(0.0 if Rg is None else _angle_deg(R, Rg))
        return np.array(seen["t"], dtype=np.int64), np.array(seen["pos"]), np.array(seen["ang"])

    def held():
        """Start [ns] of the first window of hold_s s within the bounds that begins between the
        path's end and settle_s s after it, or None."""
        ts, pos, ang = update()
        bad = np.concatenate([[0], np.cumsum((pos > 0.005) | (ang > 2.0))])   # bad samples before index i
        end, h = t_goal + int(T * NS), int(hold_s * NS)
        i = np.flatnonzero((ts >= end) & (ts <= end + int(settle_s * NS)) & (ts + h <= (ts[-1] if len(ts) else 0)))
        j = np.searchsorted(ts, ts[i] + h, side="right")
        ok = i[(j - i >= 20) & (bad[j] == bad[i])]
        return int(ts[ok[0]]) if len(ok) else None

    p.wait_sim(T)
    p.spin_until(lambda: held() is not None or p.now() >= t_goal + int((T + settle_s + hold_s) * NS),
                 "the goal reached and held", timeout=120.0)
    t0 = held()
    at = t0 if t0 is not None else t_goal + int((T + settle_s) * NS)
    ts, pos, ang = update()
    w = (ts >= at) & (ts <= at + int(hold_s * NS))
    msg = (f"pose goal: {'reached' if t0 is not None else 'NOT reached'} {(at - t_goal) / NS - T:.2f} s after "
           f"the {T:.2f} s path; error over the next {hold_s} s max {pos[w].max() * 1e3:.2f} mm")
    if Rg is not None:
        msg += f", orientation {ang[w].max():.3f} deg (the goal turned {_angle_deg(R0, Rg):.1f} deg)"
    print(msg)
    assert t0 is not None, msg
    return goal


def check_twist_stream(p, v, seconds=2.0, still_s=None):
    """A ~/delta_twist_cmds stream of linear velocity ``v`` (3,) m/s for ``seconds`` of simulated
    time (one twist per joint state, as a servo loop at the control rate sends them), then
    nothing: the EE moved |v| seconds +/- 2 cm along v (within 1 cm across it) and stopped
    (below 10 % of the stream's speed) within 0.2 s of the stream's last twist, and stays so for
    the 1.3 s after. ``still_s``: the speed is checked over ``still_s`` s from there only, and
    after that the EE stays within 5 mm of where it stopped (a real-time world on a loaded
    machine: the plugin's holds and resumes when plans come late jolt the wrist by a millimetre
    or so at 25 mm/s)."""
    v = np.asarray(v, dtype=np.float64)
    t0 = p.now()
    start = p.ee[-1][1]
    t_sent = None
    while p.now() < t0 + int(seconds * NS):
        if p.now() != t_sent:                        # one twist per joint state (the servo loop's rate)
            t_sent = p.now()
            p.twist(v)
        p.ex.spin_once(timeout_sec=0.01)
    t_last = t_sent
    p.wait_sim(1.5)
    rest = p.ee_between(t_last + int(0.2 * NS), p.now())
    moved = rest[-1] - start
    # EE speed [m/s] over 50 ms windows from t_last on (joint-state stamps)
    ts = np.array([t for t, _ in p.ee if t >= t_last])
    ps = np.array([x for t, x in p.ee if t >= t_last])
    k = np.searchsorted(ts, ts + int(0.05 * NS))
    ok = k < len(ts)
    speed = np.linalg.norm(ps[k[ok]] - ps[ok], axis=1) / ((ts[k[ok]] - ts[ok]) / NS)
    t_stop = t_last + int(0.2 * NS)
    after = speed[(ts[ok] >= t_stop) & (ts[ok] <= t_stop + (int(still_s * NS) if still_s else ts[-1]))]
    drift = float(np.linalg.norm(rest - rest[0], axis=1).max())
    u = v / np.linalg.norm(v)
    along = float(moved @ u)
    across = float(np.linalg.norm(moved - along * u))
    want = float(np.linalg.norm(v)) * seconds
    print(f"twist: stream {(t_last - t0) / NS:.3f} s, moved {along:.4f} m along it, {across * 1e3:.2f} mm across; "
          f"EE speed at the stream's end {speed[0]:.3f} m/s, from 0.2 s after it at most {after.max():.4f} m/s"
          f"{f' for {still_s} s' if still_s else ''} ({speed[ts[ok] >= t_stop].max():.4f} m/s over the 1.3 s); "
          f"drift from there {drift * 1e3:.2f} mm")
    assert abs(along - want) <= 0.02 and across <= 0.01, moved
    assert after.max() <= 0.1 * float(np.linalg.norm(v)), after.max()   # stopped within 0.2 s
    assert drift <= 0.005, drift



def check_turn_stream(p, w, seconds=1.0):
    """A ~/delta_twist_cmds stream of angular velocity ``w`` (3,) rad/s (base frame, no linear
    part) for ``seconds`` of simulated time, one twist per joint state: the EE frame turned by
    w seconds (rotation vector within 0.03 rad: the last twist's servo_timeout_s adds 0.1 s of
    turn) while its origin stayed within 5 mm, and 0.3 s after the stream it turns below 10 %
    of the stream's rate."""
    import pinocchio as pin

    w = np.asarray(w, dtype=np.float64)
    t0 = p.now()
    start, R_start = p.ee[-1][1], p.ee_R[-1][1]
    t_sent = None
    while p.now() < t0 + int(seconds * NS):
        if p.now() != t_sent:
            t_sent = p.now()
            p.twist(np.zeros(3), w)
        p.ex.spin_once(timeout_sec=0.01)
    t_last = t_sent
    p.wait_sim(1.0)
    n0 = next(i for i, (t, _) in enumerate(p.ee_R) if t >= t0)
    turned = np.asarray(pin.log3(p.ee_R[-1][1] @ R_start.T))
    drift = max(float(np.linalg.norm(x - start)) for t, x in p.ee[n0:])
    # turn rate [rad/s] over 50 ms windows from 0.3 s after the last twist
    Rs = [(t, R) for t, R in p.ee_R if t >= t_last + int(0.3 * NS)]
    ts = np.array([t for t, _ in Rs])
    k = np.searchsorted(ts, ts + int(0.05 * NS))
    rate = [np.linalg.norm(pin.log3(Rs[j][1] @ Rs[i][1].T)) / ((ts[j] - ts[i]) / NS)
            for i, j in enumerate(k) if j < len(ts)]
    print(f"turn: stream {(t_last - t0) / NS:.3f} s at {w.tolist()} rad/s: turned {turned.round(4).tolist()} rad, "
          f"the EE origin within {drift * 1e3:.2f} mm; from 0.3 s after it at most {max(rate):.4f} rad/s")
    assert np.abs(turned - w * seconds).max() <= 0.03, turned
    assert drift <= 0.005, drift
    assert max(rate) <= 0.1 * float(np.linalg.norm(w)), max(rate)

@pytest.fixture
def free_running(tmp_path, ros_env):
    yield from _sim_graph(tmp_path, ros_env, "lockstep:=false")


@pytest.mark.slow
def test_diagnostics_go_ok_warn_error_and_back_to_ok_for_a_stalled_solver(free_running):
    """The existing stalled-solver fault (fault_solver_delay_s: every BSQP step 30 ms late at 100 Hz,
    free-running figure-8): /diagnostics from the controller goes OK -> WARN (the first misses and
    OSC fallback episodes) -> ERROR (degraded for diagnostics_error_after_s) and back to OK once the
    stall is lifted (diagnostics_recover_s without a late or fallback tick)."""
    p = free_running
    levels = []                                      # (level, message) of the controller's reports, in order

    def mine():
        out = [(s.level[0], s.message) for s in p.diag if "gato_controller" in s.name]
        levels[:] = out
        return out

    p.spin_until(lambda: any(lv == 0 for lv, _ in mine()), "an OK diagnostic", timeout=WAIT_S * 3)
    n_ok = len(levels)
    p.set("fault_solver_delay_s", 0.03)
    p.spin_until(lambda: any(lv == 2 for lv, _ in mine()[n_ok:]), "an ERROR diagnostic", timeout=WAIT_S * 2)
    after = levels[n_ok:]
    first_err = next(i for i, (lv, _) in enumerate(after) if lv == 2)
    assert any(lv == 1 for lv, _ in after[:first_err]), after[:first_err + 1]      # WARN before the ERROR
    assert "planner degraded for" in after[first_err][1], after[first_err]
    n_err = len(levels)
    p.set("fault_solver_delay_s", 0.0)
    p.spin_until(lambda: any(lv == 0 for lv, _ in mine()[n_err:]), "OK again", timeout=WAIT_S * 2)
    print("diagnostics:", [lv for lv, _ in levels])



class BatchProbe(Probe):
    """Probe + the batch rows' paths (~/batch_paths/row_<b>, best) and the StepResults (every row's
    plan) of the controller."""

    ROWS = 4

    def __init__(self, domain_id):
        super().__init__(domain_id)
        from gato_msgs.msg import StepResult
        from nav_msgs.msg import Path
        from std_msgs.msg import Int32

        from gato_ros.node_util import qos

        self.steps, self.rows, self.best = {}, {}, []       # stamp -> StepResult; (stamp, b) -> Path; [int]
        self.node.create_subscription(StepResult, "/gato_controller/step_result",
                                      lambda m: self.steps.__setitem__(_stamp(m.header), m), qos(100))
        for b in range(self.ROWS):
            self.node.create_subscription(Path, f"/gato_controller/batch_paths/row_{b}",
                                          lambda m, b=b: self.rows.__setitem__((_stamp(m.header), b), m), qos(100))
        self.node.create_subscription(Int32, "/gato_controller/batch_paths/best",
                                      lambda m: self.best.append(int(m.data)), qos(100))


@pytest.fixture
def batch_bringup(tmp_path, ros_env):
    """The lockstep sim bringup with a hypothesis batch: hypotheses:=estimator (the estimator node;
    rows: the estimate, zero and wrenches hypothesis_spread_n around it) and batch_size 4 through a
    copy of the robot's parameter file (batch_size is read-only: no launch argument sets it)."""
    import yaml

    src = share() / "config" / f"{ROBOT}.yaml"
    cfg = yaml.safe_load(src.read_text())
    cfg["gato_controller"]["ros__parameters"]["batch_size"] = BatchProbe.ROWS
    params = tmp_path / f"{ROBOT}_b{BatchProbe.ROWS}.yaml"
    params.write_text(yaml.safe_dump(cfg))
    yield from _sim_graph(tmp_path, ros_env, "hypotheses:=estimator", f"params_file:={params}",
                          probe_class=BatchProbe)


def test_batch_rows_paths_and_markers_over_dds_match_the_step_result(batch_bringup):
    """B = 4 over DDS (lockstep figure-8): each ~/batch_paths/row_<b> is the forward kinematics of
    row b of the tick's gato_msgs/StepResult (every row's plan), ~/batch_paths/best is its
    best_id, ~/plan_path repeats the winner's row, the rows differ (the hypotheses), and
    ~/markers carries the same rows as ``batch`` markers with the winner highlighted."""
    p = batch_bringup
    R = p.ROWS

    def ticks():
        return sorted(t for t in p.steps if all((t, b) in p.rows for b in range(R)) and t in p.paths
                      and t in p.markers)

    p.spin_until(lambda: len(ticks()) >= 5, "5 views of a B = 4 tick (rows, plan path, markers, StepResult)")
    spread = 0.0
    for t in ticks()[-3:]:
        st = p.steps[t]
        assert st.solve.batch_size == R, st.solve.batch_size
        xu = np.asarray(st.solve.xu, dtype=np.float64).reshape(R, int(st.solve.xu_size))
        plan = p.plans[t]
        nx, nu, n = plan.nx, plan.nu, plan.n_knots
        ee = np.array([[p.fk(xu[b][k * (nx + nu):k * (nx + nu) + nx // 2]) for k in range(n)] for b in range(R)])
        paths = np.array([[[q.pose.position.x, q.pose.position.y, q.pose.position.z] for q in p.rows[t, b].poses]
                          for b in range(R)])
        assert np.allclose(paths, ee, atol=1e-9), np.abs(paths - ee).max()
        best = int(st.best_id)
        plan_path = np.array([[q.pose.position.x, q.pose.position.y, q.pose.position.z] for q in p.paths[t].poses])
        assert np.array_equal(plan_path, paths[best])
        mk = p.markers[t]
        assert {("batch", b) for b in range(R)} <= set(mk), sorted(mk)
        for b in range(R):
            pts = np.array([[q.x, q.y, q.z] for q in mk["batch", b].points])
            assert np.array_equal(pts, paths[b])
        wide = [mk["batch", c].scale.x for c in range(R)]
        assert max(wide) == mk["batch", best].scale.x and sorted(wide)[-2] < wide[best], wide   # the winner
        spread = max(spread, float(np.abs(ee - ee[best]).max()))
    assert best in p.best
    print(f"batch rows over DDS: {len(ticks())} views of B = {R}; rows spread up to {spread * 1e3:.3f} mm from "
          f"the winner; best ids seen {sorted(set(p.best))}")
    assert spread > 1e-6, "the rows are all the same plan: no hypotheses in the batch"
