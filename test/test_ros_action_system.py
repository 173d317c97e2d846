"""The controller node's FollowJointTrajectory action server (MoveIt's interface) over DDS, in the
simulation bringup (gato_bringup/launch/sim.launch.yaml through the launch runner, lockstep MuJoCo
world: the run does not depend on the machine's load; reference node in hold mode, a private ROS
domain on loopback): an rclpy ActionClient as MoveIt's simple controller manager sends it gets
SUCCESSFUL, INVALID_GOAL, cancel and preemption; the run is recorded (record:=true) and gato
replay's engine reproduces every tick of the bag to 1e-9 N*m, those solved with the trajectories'
per-knot posture tables included. The Cartesian targets, paths, TF and /diagnostics of the same
node are in test_ros_targets_system.py (whose Probe this file extends); the same action through
ros2_control + MuJoCo in test_launch_targets_hardware.py.

Times are the joint states' stamps (simulated); no wall-clock time is asserted.
"""
import re
import uuid

import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"

import_or_skip("gato_msgs.msg", _HINT)
import_or_skip("gato_ros.launch_runner", _HINT)
import_or_skip("control_msgs.action", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")
from test_ros_system import WAIT_S, assert_clean_exit, stop_launch, share, start_runner  # noqa: E402
from test_ros_targets_system import NS, ROBOT, Probe, _stamp  # noqa: E402

pytestmark = pytest.mark.ros


def _need_knot_posture():
    """The action is offered where the solver takes per-knot posture tables (gato.BSQP.set_q_nom
    with an (N, nq) array); skip with that reason where the installed gato predates it."""
    from gato_ros.controller_logic import ControllerLogic
    from gato_ros.trajectory_logic import knot_posture_supported

    if not knot_posture_supported(ControllerLogic({"robot": ROBOT, "N": 4}).solver):
        pytest.skip("the installed gato.BSQP takes no per-knot posture targets (set_q_nom (N, nq)): "
                    "~/follow_joint_trajectory is not offered")


class ActionProbe(Probe):
    """Probe + an rclpy ActionClient on ~/follow_joint_trajectory, as MoveIt sends it."""

    def __init__(self, domain_id):
        super().__init__(domain_id)
        from control_msgs.action import FollowJointTrajectory
        from rclpy.action import ActionClient

        self.FJT = FollowJointTrajectory
        self.client = ActionClient(self.node, FollowJointTrajectory, "/gato_controller/follow_joint_trajectory")
        self.q = {}
        self.q_stamp = 0            # ns, the stamp of the joint state self.q was read from
        self.node.create_subscription(__import__("sensor_msgs.msg", fromlist=["JointState"]).JointState,
                                      "/joint_states", self._on_q, 10)

    def _on_q(self, m):
        self.q = dict(zip(m.name, m.position))
        self.q_stamp = _stamp(m.header)

    def q_at(self, t_ns, names):
        """(nq,) joint positions from a joint state stamped ``t_ns`` or later. This client's
        newest sample can lag the graph on a loaded machine (seen in CI: a sample ~1.7 s old read
        as the arm 'after' a trajectory), so the time is asked for, not assumed."""
        self.spin_until(lambda: self.q_stamp >= t_ns, f"a joint state stamped {t_ns * 1e-9:.3f} s or later")
        return np.array([self.q[n] for n in names])

    def goal(self, names, points, goal_tol=0.02, path_tol=0.2):
        """Send a goal: points [(t s, positions)]; returns (goal handle future, feedback list)."""
        from builtin_interfaces.msg import Duration
        from control_msgs.msg import JointTolerance
        from trajectory_msgs.msg import JointTrajectoryPoint

        g = self.FJT.Goal()
        g.trajectory.joint_names = list(names)
        for t, pos in points:
            pt = JointTrajectoryPoint()
            pt.positions = [float(x) for x in pos]
            pt.time_from_start = Duration(sec=int(t), nanosec=int(round((t % 1) * 1e9)))
            g.trajectory.points.append(pt)
        g.goal_tolerance = [JointTolerance(name=n, position=goal_tol) for n in names]
        g.path_tolerance = [JointTolerance(name=n, position=path_tol) for n in names]
        fb = []
        assert self.client.wait_for_server(timeout_sec=WAIT_S)
        fut = self.client.send_goal_async(g, feedback_callback=lambda m: fb.append(m.feedback))
        self.spin_until(fut.done, "the goal response")
        return fut.result(), fb

    def result(self, gh, timeout=WAIT_S * 3):
        fut = gh.get_result_async()
        self.spin_until(fut.done, "the action result", timeout=timeout)
        return fut.result().result


@pytest.fixture
def action_bringup(tmp_path, ros_env):
    """The lockstep sim bringup, recorded (record:=true, the bag at ``probe.bag``), with an
    ActionProbe; ``probe.stop_graph()`` stops the graph (SIGINT, clean exit checked) so the test
    can read the finished bag; otherwise the teardown stops it."""
    share()
    marker, report, bag = uuid.uuid4().hex, tmp_path / "report.json", tmp_path / "fjt_bag"
    proc = start_runner(["gato_bringup", "sim.launch.yaml", f"robot:={ROBOT}", "duration:=0", "reference:=hold",
                         "record:=true", f"bag:={bag}"], ros_env, marker, report)
    probe = None

    def stop_graph():
        out = stop_launch(proc, marker, probe)
        assert_clean_exit(proc, out, report, marker)

    stopped = False
    try:
        probe = ActionProbe(int(ros_env["ROS_DOMAIN_ID"]))
        probe.bag = bag

        def stop():
            nonlocal stopped
            stopped = True
            stop_graph()

        probe.stop_graph = stop
        yield probe
    finally:
        if not stopped:
            stopped = True
            stop_graph()


@pytest.mark.slow
def test_follow_joint_trajectory_succeeds_refuses_cancels_and_preempts(action_bringup):
    """An rclpy ActionClient as MoveIt's simple controller manager: a 5-point trajectory ends
    SUCCESSFUL within its goal tolerance, its path error (feedback) within the path tolerance; a
    wrong joint name is INVALID_GOAL with the reason; a goal cancelled mid-way leaves the arm holding
    within 5 mm of where it was; a new goal preempts the running one."""
    _need_knot_posture()
    p = action_bringup
    p.spin_until(lambda: len(p.plans) >= 50 and p.q, "50 plans")
    check_follow_joint_trajectory(p)
    p.stop_graph()
    check_posture_ticks_replay(p.bag)


def check_posture_ticks_replay(bag):
    """The recorded bag of a run driven by joint targets (trajectories, a cancel's joint hold, a
    preemption) replays to 1e-9 N*m on every tick, the posture ticks included: SolveInput
    carries each tick's posture tables (issue 31), which the replay programs as the node did.
    Replayed in memory with gato.replay.replay_ticks, the engine of ``gato replay`` without its
    report and plots (the streamed replay equals it bit for bit: test_replay_stream.py)."""
    from gato.replay import TOPICS, load_recording, replay_ticks
    from gato.replay.bagio import read_bag

    from gato import robot_urdf
    from gato.planners.controller_setup import urdf_sha256

    rec = load_recording(read_bag(bag, list(TOPICS.values())))
    assert not rec.reconstructed and rec.ticks, rec.problems
    assert rec.config["urdf_sha256"] == urdf_sha256(robot_urdf(ROBOT))        # the replay solves the same model
    N = rec.ticks[0].config["N"]
    rows = [0 if tk.posture_q is None else tk.posture_q.shape[0] for tk in rec.ticks]
    n_post = sum(r > 0 for r in rows)
    rp = replay_ticks(rec)
    compared = int(np.isfinite(rp.du).sum())
    print(f"replay of the action run: {len(rows)} ticks ({compared} compared), {n_post} with posture tables, "
          f"max |du| {np.nanmax(rp.du):.3g} N*m, anchored {int(rp.anchored.sum())}, notes {rp.notes}")
    assert n_post >= 300 and set(rows) == {0, N}, sorted(set(rows))   # trajectories, the hold, and ticks without
    assert compared >= len(rows) - 1, (compared, len(rows))          # the last command may miss the bag
    assert np.nanmax(rp.du) <= 1e-9 and not rp.anchored.any(), (np.nanmax(rp.du), int(rp.anchored.sum()))
    post = np.array(rows) > 0
    assert np.all(np.isfinite(rp.du[post][:-1])) and np.nanmax(rp.du[post]) <= 1e-9

    # Issue 8: the recorded bag opens in rosbags' AnyReader, an independent reader, with every topic's
    # message definition stored (was test_replay_bringup's nominal run: this bag now carries the check)
    import json

    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as reader:
        conns = {c.topic: c for c in reader.connections}
        for topic in ("/joint_states", "/gato_controller/solve_input", "/gato_controller/step_result",
                      "/gato_controller/solver_stats", "/gato_controller/command", "/gato_controller/status",
                      "/gato_recorder/parameter_snapshot"):
            assert topic in conns, topic
            assert conns[topic].msgdef.data, f"{topic}: no message definition stored"
        c = conns["/gato_controller/solve_input"]
        _, _, raw = next(reader.messages(connections=[c]))
        m = reader.deserialize(raw, c.msgtype)
        assert len(m.x_measured) == 14 and json.loads(m.config_json)["robot"] == "iiwa14"


def check_follow_joint_trajectory(p):
    """The action's acceptance (the test above) on a running graph seen by ActionProbe ``p``
    (also run through ros2_control + MuJoCo: test_launch_targets_hardware.py)."""
    names = p.names
    q0 = np.array([p.q[n] for n in names])
    dq = np.array([0.3, 0.2, 0.0, -0.2, 0.0, 0.2, 0.0])
    points = [(0.8 * (k + 1), q0 + dq * (k + 1) / 5) for k in range(5)]

    # --- SUCCESSFUL, within the goal tolerance, path error within the path tolerance
    gh, fb = p.goal(names, points)
    assert gh.accepted
    r = p.result(gh)
    assert r.error_code == p.FJT.Result.SUCCESSFUL, r.error_string
    # the arm 0.2 s after the tick that succeeded (its feedback is the last one, same stamp)
    assert fb, "no feedback before the result"
    q_end = p.q_at(_stamp(fb[-1].header) + int(0.2 * NS), names)
    assert np.abs(q_end - points[-1][1]).max() <= 0.02, q_end - points[-1][1]
    path_err = max(np.abs(f.error.positions).max() for f in fb)
    print(f"trajectory: {len(fb)} feedback messages, path error max {path_err:.4f} rad, final error "
          f"{np.abs(q_end - points[-1][1]).max():.4f} rad ({r.error_string})")
    assert len(fb) >= 100 and path_err <= 0.2

    # --- a wrong joint name: INVALID_GOAL with the reason
    gh, _ = p.goal(["A1", "A2", "A3", "A4", "A5", "A6", "NOPE"], points)
    r = p.result(gh)
    assert r.error_code == p.FJT.Result.INVALID_GOAL and "['NOPE'] not controlled" in r.error_string, r

    # --- cancel mid-way: the arm holds where it was
    back = [(0.8 * (k + 1), q_end - dq * (k + 1) / 5) for k in range(5)]
    gh, _ = p.goal(names, back)
    p.wait_sim(1.5)
    fut = gh.cancel_goal_async()
    p.spin_until(fut.done, "the cancel response")
    r = p.result(gh)
    assert "canceled" in r.error_string, r
    # The hold is the joint state the controller measured at its first tick after the cancel
    # request (stamped in the result), not what this client saw when the response arrived: on a
    # loaded machine those are tens of ms of arm motion apart.
    m = re.search(r"measured at ([0-9.]+) s", r.error_string)
    assert m, r.error_string
    t_hold = int(round(float(m.group(1)) * NS))
    p.wait_sim(1.5)
    t_end = p.now()
    # Where the controller holds: its EE target frame after the cancel (gato_ee_target, the hold
    # window's knot 0 = FK of the held joint positions). This client's own joint-state samples can
    # have holes on a loaded machine (a keep-last queue it did not drain in time), so the sample
    # nearest t_hold may be tenths of a second of arm motion away: it is checked only when it is
    # close in time.
    held = [tr for tr in p.tf if tr.child_frame_id == "gato_ee_target" and t_hold <= _stamp(tr.header) <= t_end]
    near = min(p.ee, key=lambda e: abs(e[0] - t_hold))
    if held:
        tt = held[-1].transform.translation
        ee_hold = np.array([tt.x, tt.y, tt.z])
        if abs(near[0] - t_hold) <= 20 * 10**6:
            off = np.linalg.norm(near[1] - ee_hold)
            print(f"cancel: the hold target is {off * 1e3:.2f} mm from the EE measured at the cancel")
            assert off <= 0.005, off
    else:
        ee_hold = near[1]
    moved = np.linalg.norm(p.ee_between(t_hold, t_end) - ee_hold, axis=1)
    settled = np.linalg.norm(p.ee_between(t_end - int(0.3 * NS), t_end) - ee_hold, axis=1).max()
    print(f"cancel: EE braked within {moved.max() * 1e3:.2f} mm and settled within {settled * 1e3:.2f} mm "
          "of where it was at the cancel")
    assert settled <= 0.005, settled
    assert moved.max() <= 0.025, moved.max()    # braking from a ~0.1 m/s joint trajectory

    # --- a new goal preempts the running one
    q_now = np.array([p.q[n] for n in names])
    gh1, _ = p.goal(names, [(3.0, q_now + dq)])
    p.wait_sim(0.5)
    gh2, _ = p.goal(names, [(1.5, q_now)])
    r1 = p.result(gh1)
    assert r1.error_code == p.FJT.Result.INVALID_GOAL and "preempted" in r1.error_string, r1
    r2 = p.result(gh2)
    assert r2.error_code == p.FJT.Result.SUCCESSFUL, r2.error_string
