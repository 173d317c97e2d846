"""Fuzzing over DDS (issue 38): malformed messages from a foreign node on the controller's own
topics, against the real processes.

- the controller node alone (driven from this process): ~300 malformed JointState, EEReference
  and WrenchStamped messages between good joint states; no command is non-finite or beyond the
  URDF effort limits, ~/status counts every bad message, and the node answers good states with
  MPC commands again afterwards;
- the acceptance scenario: a free-running simulation bringup (``python -m gato_ros.bringup_sim
  --realtime``) with 5 s of malformed JointState and EEReference on /joint_states and
  /ee_reference (50 Hz each, like the report of the issue): it exits 0, writes summary.json and
  the tracking plot, the summary names the skipped references, and the mean tracking error over
  the last 3 s is within 2x of an undisturbed run's.

The standard target topics and set_parameters are fuzzed over DDS against the controller node
(test_standard_targets_and_parameter_values_fuzzed_over_dds), joint states and commands against the
estimator node (test_estimator_node_counts_fuzzed_joint_states_and_commands_over_dds). The plugin's plan intake is fuzzed in
test/test_ros_plugin.py (inside its controller_manager).
No wall-clock time is asserted; timeouts are generous (2 shared cores).
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from conftest import import_or_skip, kill_tagged

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
import_or_skip("gato_ros.launch_runner", _HINT)
from fuzz_messages import NS, Context, malformed  # noqa: E402
from test_ros_system import (_CONTROLLER_LAUNCH, NAMES, ROBOT, WAIT_S, Probe, finish, share,  # noqa: E402
                             start_runner)

pytestmark = pytest.mark.ros
REJECT_COUNTERS = ("dropped_out_of_order", "rejected_nonfinite", "rejected_names", "rejected_range",
                   "rejected_stamps", "rejected_references", "rejected_wrenches")


def _limits():
    import pinocchio as pin

    import gato

    m = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    return dict(zip(list(m.names)[1:], np.asarray(m.effortLimit, dtype=np.float64)))


@contextlib.contextmanager
def _launched(tmp_path, ros_env, launch_text):
    """Run ``launch_text`` (a launch file's XML) through the launch runner with a :class:`Probe`
    on the same domain; yields (probe, the runner's process). On leaving: the probe closed, the
    launch stopped with SIGINT and asserted to exit 0 (unless the body raised)."""
    launch = tmp_path / "node.launch.xml"
    launch.write_text(launch_text)
    marker, report = uuid.uuid4().hex, tmp_path / "report.json"
    proc = start_runner([str(launch)], ros_env, marker, report)
    probe = None
    try:
        probe = Probe(int(ros_env["ROS_DOMAIN_ID"]))
        yield probe, proc
    finally:
        if probe is not None:
            probe.close()
        proc.send_signal(signal.SIGINT)
        finish(proc, 60)
        kill_tagged("GATO_TEST_MARKER", marker)
    assert proc.returncode == 0


@pytest.mark.slow
def test_controller_node_survives_300_malformed_messages_and_counts_them(tmp_path, ros_env):
    share()
    from gato.sim.scenarios import Q_READY
    from gato_msgs.msg import EEReference
    from geometry_msgs.msg import WrenchStamped

    from gato_ros.node_util import qos

    q0 = np.asarray(Q_READY[ROBOT], dtype=np.float64)
    limits = _limits()
    with _launched(tmp_path, ros_env, _CONTROLLER_LAUNCH) as (probe, proc):
        t0 = probe.node.get_clock().now().nanoseconds      # stamps on the node's clock (no sim time here)
        pub_ref = probe.node.create_publisher(EEReference, "/ee_reference", qos())
        pub_w = probe.node.create_publisher(WrenchStamped, "/gato_estimator/wrench", qos(1))
        assert probe.exchange(t0, q0).source == "mpc"
        probe.spin_until(lambda: pub_ref.get_subscription_count() and pub_w.get_subscription_count(),
                         what="the controller's reference and wrench subscriptions")
        rng = np.random.default_rng(38)
        ref = np.array([[0.5, 0.0, 0.6]]) + 0.001 * np.arange(8)[:, None]
        n_bad, stamp = 0, t0
        pubs = {"JointState": probe.pub, "EEReference": pub_ref, "WrenchStamped": pub_w}
        for k in range(60):
            for _ in range(5):
                kind = str(rng.choice(["JointState", "JointState", "EEReference", "EEReference", "WrenchStamped"]))
                ctx = Context(stamp_ns=stamp, names=NAMES, q=q0, qd=np.zeros(7), ref=ref, knot_dt=0.01)
                m, bad, _ = malformed(kind, ctx, rng, only_bad=True)
                pubs[kind].publish(m)
                n_bad += int(bad)
                end = time.monotonic() + 0.015          # paced: the joint-state subscription keeps the newest only
                while time.monotonic() < end:
                    probe.ex.spin_once(timeout_sec=0.005)
            stamp += 10**7
            c = probe.exchange(stamp, q0)                   # a good state after each burst: answered
            assert np.all(np.isfinite(c.effort))

        def counted():
            s = probe.status[-1] if probe.status else None
            return s if s is not None and sum(getattr(s, k) for k in REJECT_COUNTERS) >= n_bad else None

        st = probe.spin_until(counted, what=f"the status counting {n_bad} bad messages")
        total = sum(getattr(st, k) for k in REJECT_COUNTERS)
        assert total == n_bad, {k: getattr(st, k) for k in REJECT_COUNTERS}
        for c in probe.commands:
            e = np.asarray(c.effort)
            assert np.all(np.isfinite(e)) and all(abs(v) <= limits[n] + 1e-9 for n, v in zip(c.joint_names, e)), c
        # recovered: good states are answered by the MPC again
        for j in range(1, 4):
            c = probe.exchange(stamp + j * 10**7, q0)
        assert c.source == "mpc", c.source
        assert proc.poll() is None, "the controller's launch exited during the fuzz"


class _Fuzzer:
    """A foreign node publishing malformed JointState and EEReference messages on the
    controller's topics at ``rate_hz`` each, stamped around the world's /clock."""

    def __init__(self, domain_id, seed=38):
        from gato_msgs.msg import ControllerStatus, EEReference
        from rclpy.context import Context as RclContext
        from rclpy.executors import SingleThreadedExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState

        from gato_ros.node_util import qos

        self.ctx = RclContext()
        rclpy.init(context=self.ctx, domain_id=domain_id)
        self.node = rclpy.create_node("gato_test_fuzzer", context=self.ctx)
        self.pub_js = self.node.create_publisher(JointState, "/joint_states", qos())
        self.pub_ref = self.node.create_publisher(EEReference, "/ee_reference", qos())
        self.clock_ns, self.q, self.ticks = None, None, 0
        self.node.create_subscription(Clock, "/clock", self._on_clock, qos(1))
        self.node.create_subscription(JointState, "/joint_states", self._on_js, qos(1))
        self.node.create_subscription(ControllerStatus, "/gato_controller/status", self._on_status, qos(10))
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.rng = np.random.default_rng(seed)
        self.sent = {"JointState": 0, "EEReference": 0}

    def _on_clock(self, m):
        self.clock_ns = m.clock.sec * NS + m.clock.nanosec

    def _on_js(self, m):
        if list(m.name) == NAMES and len(m.position) == 7 and np.all(np.isfinite(m.position)):
            self.q = np.asarray(m.position, dtype=np.float64)

    def _on_status(self, m):
        self.ticks = max(self.ticks, int(m.ticks))

    def spin_until(self, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and not pred():
            self.ex.spin_once(timeout_sec=0.05)
        return pred()

    def matched(self):
        """Whether the bringup's recorder is up and every subscriber the graph shows on the fuzzed
        topics has matched this node's publishers: a message published before a subscription
        matches never reaches it (DDS discovery of a new participant takes a while on a loaded
        machine: CI once lost the first 45 of 251 messages to the recorder that way)."""
        if "gato_recorder" not in self.node.get_node_names():
            return False
        return all(p.get_subscription_count() >= max(2, self.node.count_subscribers(p.topic_name))
                   for p in (self.pub_js, self.pub_ref))

    def run(self, seconds, rate_hz=50.0):
        """Publish for ``seconds`` of wall clock: one JointState and one EEReference per period."""
        ref = None
        end = time.monotonic() + seconds
        nxt = time.monotonic()
        while time.monotonic() < end:
            self.ex.spin_once(timeout_sec=max(0.0, nxt - time.monotonic()))
            if time.monotonic() < nxt:
                continue
            nxt += 1.0 / rate_hz
            now = self.clock_ns or 0
            if ref is None:
                ref = np.array([[0.5, 0.0, 0.6]]) + 0.001 * np.arange(10)[:, None]
            ctx = Context(stamp_ns=now, names=NAMES, q=self.q if self.q is not None else np.zeros(7),
                          qd=np.zeros(7), ref=ref, knot_dt=0.01)
            for kind, pub in (("JointState", self.pub_js), ("EEReference", self.pub_ref)):
                m, _, _ = malformed(kind, ctx, self.rng, only_bad=True)
                pub.publish(m)
                self.sent[kind] += 1

    def close(self):
        self.node.destroy_node()
        self.ctx.try_shutdown()


def _bringup(tmp_path, env, name, duration, during=None):
    """``python -m gato_ros.bringup_sim --realtime``; ``during(proc)`` runs while it does.
    Returns (exit code, output, out folder)."""
    out = tmp_path / name
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "gato_ros.bringup_sim", "--realtime", "--duration", str(duration),
                             "--out", str(out), "--timeout", "400"], env={**env, "GATO_TEST_MARKER": marker},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        if during is not None:
            during(proc)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_tagged("GATO_TEST_MARKER", marker)
    reader.join(timeout=10)
    return proc.returncode, "".join(lines), out


def _tail_error(summary_path, seconds=3.0):
    """Mean EE tracking error over the last ``seconds`` of simulated time, from the run's bag
    (gato_ros.analysis: the summary's series)."""
    from gato_ros.analysis import summarize_bag

    s = summarize_bag(summary_path.parent / "bag", ROBOT)
    t, err = s["series"]["t"], s["series"]["err"]
    sel = t >= t[-1] - seconds
    return float(np.mean(err[sel])), s


@pytest.mark.slow
def test_free_running_bringup_with_5s_of_malformed_inputs_completes_and_recovers(tmp_path, ros_env):
    """The acceptance scenario of issue 38 (see the module docstring). 11 s of simulated time: the
    fuzz starts once the controller commands and lasts 5 s of wall clock (the free-running world
    keeps wall-clock pace, or lags it under load), so it is over before the last 3 s even when the
    controller's first command comes late (CI on a loaded 2-core machine: t = 1.78 s; 9 s left the
    fuzz running until t = 6.7 s, inside the scored tail)."""
    share()
    duration = 11.0
    fuzz = {}

    def during(proc):
        fz = _Fuzzer(int(ros_env["ROS_DOMAIN_ID"]))
        try:
            assert fz.spin_until(lambda: fz.ticks > 20 and fz.clock_ns is not None or proc.poll() is not None,
                                 timeout=300), "the controller never commanded"
            assert fz.spin_until(lambda: fz.matched() or proc.poll() is not None, timeout=120), \
                "the recorder and the controller never matched the fuzzer's publishers"
            fuzz["start_ns"] = fz.clock_ns
            fz.run(5.0)
            fuzz["end_ns"] = fz.clock_ns
            fuzz["sent"] = dict(fz.sent)
        finally:
            fz.close()

    code, out, folder = _bringup(tmp_path, ros_env, "fuzzed", duration, during)
    assert code == 0, out[-4000:]
    summary = json.loads((folder / "summary.json").read_text())
    assert (folder / "tracking.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    skipped = summary["skipped"]
    print(f"fuzz: sent {fuzz['sent']} between t = {fuzz['start_ns'] / 1e9:.2f} and {fuzz['end_ns'] / 1e9:.2f} s; "
          f"skipped {json.dumps({k: v['count'] for k, v in skipped.items()})}; counters {summary['counters']}")
    assert fuzz["sent"]["EEReference"] >= 200 and fuzz["sent"]["JointState"] >= 200, fuzz
    assert skipped["/ee_reference"]["count"] >= 0.9 * fuzz["sent"]["EEReference"], skipped   # recorder saw them
    assert skipped["/joint_states"]["count"] >= 0.9 * fuzz["sent"]["JointState"], skipped
    assert "/ee_reference" in out and "skipped" in out, out[-3000:]         # named in the printed summary
    assert fuzz["end_ns"] <= (duration - 3.0) * NS, fuzz                    # the fuzz ended before the last 3 s
    tail, _ = _tail_error(folder / "summary.json")

    code0, out0, folder0 = _bringup(tmp_path, ros_env, "calm", duration)
    assert code0 == 0, out0[-4000:]
    tail0, s0 = _tail_error(folder0 / "summary.json")
    assert not s0["skipped"], s0["skipped"]
    print(f"mean tracking error over the last 3 s: fuzzed {tail * 1e3:.1f} mm, undisturbed {tail0 * 1e3:.1f} mm")
    assert tail <= 2.0 * tail0, (tail, tail0)


_TARGETS_LAUNCH = _CONTROLLER_LAUNCH.replace(
    '<param name="joint_state_timeout_s" value="10.0"/>',
    '<param name="joint_state_timeout_s" value="10.0"/>\n    <param name="diagnostics_period_s" value="0.05"/>')
TARGET_TOPICS = {"PoseStamped": ("/gato_controller/goal_pose", "goals_rejected"),
                 "TwistStamped": ("/gato_controller/delta_twist_cmds", "twists_rejected"),
                 "JointTrajectory": ("/gato_controller/joint_trajectory", "trajectories_rejected")}
#: values a foreign node may set any tunable to (rclpy infers the parameter type from the value)
PARAM_JUNK = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, -1.0, 0.0, 1e-300, 3, -7, 2**62, True,
              "", "nan", "a" * 300, [float("nan")] * 7, [1e308] * 7, [1.0] * 3, ["x"], [1, 2], [True]]


@pytest.mark.slow
def test_standard_targets_and_parameter_values_fuzzed_over_dds(tmp_path, ros_env):
    """The controller node's standard target topics and its set_parameters service, from a foreign
    node over DDS: 150 malformed PoseStamped / TwistStamped / JointTrajectory messages (each sent
    once the previous one is counted: the topics keep the newest only) are refused and counted
    exactly on /diagnostics; 30 of the trajectories as FollowJointTrajectory goals, each aborted
    INVALID_GOAL with its reason and counted; 120 junk values for the tunables through rclpy's parameter client
    each get a result (refused with a reason, or taken); between them good joint states are
    answered with finite commands within the URDF effort limits, and the node stays up."""
    share()
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from rclpy.parameter import Parameter
    from trajectory_msgs.msg import JointTrajectory

    from gato.sim.scenarios import Q_READY
    from gato_ros import params as schema
    from gato_ros.node_util import qos

    q0 = np.asarray(Q_READY[ROBOT], dtype=np.float64)
    limits = _limits()
    diag = {}

    def on_diag(m):
        for st in m.status:
            if st.name.startswith("gato_controller"):
                diag.update({kv.key: kv.value for kv in st.values})

    with _launched(tmp_path, ros_env, _TARGETS_LAUNCH) as (probe, proc):
        probe.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, qos(10))
        pubs = {k: probe.node.create_publisher(t, TARGET_TOPICS[k][0], qos())
                for k, t in (("PoseStamped", PoseStamped), ("TwistStamped", TwistStamped),
                             ("JointTrajectory", JointTrajectory))}
        stamp = probe.node.get_clock().now().nanoseconds
        assert probe.exchange(stamp, q0).source == "mpc"
        probe.spin_until(lambda: all(p.get_subscription_count() for p in pubs.values()) and diag,
                         what="the controller's target subscriptions and its /diagnostics")

        def count(key):
            return int(diag.get(key, "0"))

        # --- targets: each bad message refused and counted once
        rng = np.random.default_rng(3839)
        ctx = Context(stamp_ns=stamp, names=NAMES, q=q0, qd=np.zeros(7), lower=np.full(7, -3.0),
                      upper=np.full(7, 3.0), vel_limit=np.full(7, 1.0), frames=("iiwa14_link_0",))
        sent = {key: 0 for _, key in TARGET_TOPICS.values()}
        for i in range(150):
            kind = ("PoseStamped", "TwistStamped", "JointTrajectory")[i % 3]
            key = TARGET_TOPICS[kind][1]
            m, bad, names = malformed(kind, ctx, rng, only_bad=True)
            assert bad
            pubs[kind].publish(m)
            sent[key] += 1
            probe.spin_until(lambda: count(key) >= sent[key], what=f"{key} counting case {i} {names}")
            if i % 15 == 14:
                stamp += 10**7
                c = probe.exchange(stamp, q0)
                e = np.asarray(c.effort)
                assert np.all(np.isfinite(e)) and all(abs(v) <= limits[n] + 1e-9 for n, v in zip(c.joint_names, e))
        assert {k: count(k) for k in sent} == sent
        assert diag["target_mode"] == "none" and diag["goals_accepted"] == "0", diag   # nothing bad was taken

        # --- the same malformed trajectories as FollowJointTrajectory goals (what MoveIt sends):
        # each accepted by the server and aborted at once, INVALID_GOAL with the reason, counted
        from control_msgs.action import FollowJointTrajectory
        from rclpy.action import ActionClient

        client = ActionClient(probe.node, FollowJointTrajectory, "/gato_controller/follow_joint_trajectory")
        assert client.wait_for_server(timeout_sec=WAIT_S)
        for i in range(30):
            m, bad, names = malformed("JointTrajectory", ctx, rng, only_bad=True)
            g = FollowJointTrajectory.Goal()
            g.trajectory = m
            fut = client.send_goal_async(g)
            probe.spin_until(fut.done, what=f"the goal response of case {i}")
            gh = fut.result()
            assert gh.accepted, names
            res = gh.get_result_async()
            probe.spin_until(res.done, what=f"the result of case {i}")
            r = res.result().result
            assert r.error_code == FollowJointTrajectory.Result.INVALID_GOAL and r.error_string, (names, r)
            sent["trajectories_rejected"] += 1
        probe.spin_until(lambda: count("trajectories_rejected") >= sent["trajectories_rejected"],
                         what="the refused goals counted")
        assert count("trajectories_rejected") == sent["trajectories_rejected"]
        assert diag["target_mode"] == "none" and diag["trajectory_active"] == "False", diag
        client.destroy()

        # --- parameters: every value answered, the node keeps commanding
        assert probe.params.wait_for_services(timeout_sec=WAIT_S)
        tunables = [p for p in schema.CONTROLLER if not p.read_only]
        n_refused = 0
        for i in range(120):
            p = tunables[int(rng.integers(len(tunables)))]
            v = PARAM_JUNK[int(rng.integers(len(PARAM_JUNK)))]
            r = probe.set_param(p.name, v)
            if not r.successful:
                n_refused += 1
                assert r.reason, (p.name, v)
            if i % 10 == 9:
                stamp += 10**7
                c = probe.exchange(stamp, q0)
                e = np.asarray(c.effort)
                assert np.all(np.isfinite(e)) and all(abs(v) <= limits[n] + 1e-9 for n, v in zip(c.joint_names, e)), \
                    (p.name, v, c)
        assert n_refused >= 60, n_refused
        print(f"parameters: {n_refused} of 120 junk values refused with a reason; last command from {c.source!r}")
        assert proc.poll() is None, "the controller's launch exited during the fuzz"


_ESTIMATOR_LAUNCH = """\
<launch>
  <node pkg="gato_ros" exec="estimator_node" name="gato_estimator">
    <param from="$(find-pkg-share gato_bringup)/config/iiwa14.yaml"/>
    <param name="effort_source" value="command"/>
  </node>
</launch>
"""


@pytest.mark.slow
def test_estimator_node_counts_fuzzed_joint_states_and_commands_over_dds(tmp_path, ros_env):
    """The estimator node alone (effort_source=command), from a foreign node over DDS: 150 ticks
    of good (joint state, command) pairs with a malformed JointState and a malformed EffortCommand
    in each (all bad: NaN / Inf, sizes, names, stamps): ~/stats counts every one exactly
    (rejected + ignored_stamps), every published wrench is finite, and the node keeps estimating."""
    share()
    from gato_msgs.msg import EffortCommand
    from geometry_msgs.msg import WrenchStamped
    from std_msgs.msg import String

    from gato.sim.scenarios import Q_READY
    from gato_ros import conversions as cv
    from gato_ros.node_util import qos
    from gato_ros.types import JointStateSample

    q0 = np.asarray(Q_READY[ROBOT], dtype=np.float64)
    stats, wrenches = [], []
    with _launched(tmp_path, ros_env, _ESTIMATOR_LAUNCH) as (probe, proc):
        probe.node.create_subscription(String, "/gato_estimator/stats", lambda m: stats.append(json.loads(m.data)),
                                       qos(100))
        probe.node.create_subscription(WrenchStamped, "/gato_estimator/wrench", wrenches.append, qos(100))
        pub_cmd = probe.node.create_publisher(EffortCommand, "/gato_controller/command", qos())
        probe.spin_until(lambda: probe.pub.get_subscription_count() and pub_cmd.get_subscription_count(),
                         what="the estimator's joint-state and command subscriptions")

        def pace():
            end = time.monotonic() + 0.004
            while time.monotonic() < end:
                probe.ex.spin_once(timeout_sec=0.002)

        rng = np.random.default_rng(3843)
        t0 = probe.node.get_clock().now().nanoseconds
        S = 10_000_000
        n_bad = 0
        for k in range(160):
            stamp = t0 + k * S
            probe.send(stamp, q0)
            pace()
            if 3 <= k < 153:
                ctx = Context(stamp_ns=stamp - S, names=NAMES, q=q0, qd=np.zeros(7), upper=np.full(7, 300.0))
                m, bad, _ = malformed("JointState", ctx, rng, only_bad=True)
                probe.pub.publish(m)
                pace()
                ctx.stamp_ns, ctx.q = stamp, np.zeros(7)
                m, bad2, _ = malformed("EffortCommand", ctx, rng, only_bad=True)
                pub_cmd.publish(m)
                pace()
                n_bad += int(bad) + int(bad2)
            pub_cmd.publish(cv.effort_command_to_msg(np.zeros(7), NAMES, stamp, "mpc", k))
            pace()

        def counted():
            return stats and stats[-1]["rejected"] + stats[-1]["ignored_stamps"] >= n_bad
        probe.spin_until(counted, what=f"~/stats counting {n_bad} bad messages")
        st = stats[-1]
        assert st["rejected"] + st["ignored_stamps"] == n_bad, (st, n_bad)
        for w in wrenches:
            v = np.array([w.wrench.force.x, w.wrench.force.y, w.wrench.force.z,
                          w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z])
            assert np.all(np.isfinite(v)), v
        print(f"estimator: {n_bad} bad messages counted ({st['rejected']} rejected, {st['ignored_stamps']} old "
              f"stamps), {len(wrenches)} estimates, all finite")
        assert len(wrenches) >= 20, len(wrenches)
        assert proc.poll() is None, "the estimator's launch exited during the fuzz"
