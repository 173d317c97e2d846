"""The gato recorder (gato_ros.recorder_node, CLI gato_ros.record_cli) over DDS, checked with
an independent reader (rosbags.highlevel.AnyReader).

A publisher process stands in for the controller graph: a node /test_ctrl with declared
parameters publishing /joint_states (sensor_msgs/JointState), /test_ctrl/solver_stats
(gato_msgs/SolverStats), /ee_reference (gato_msgs/EEReference) BEST EFFORT, /extra
(std_msgs/String, recorded without a given type) and a transient-local /robot_description
(std_msgs/String) published once, before the recorder starts. The recorder CLI runs as a
subprocess with --controller /test_ctrl and is stopped with SIGINT / SIGTERM / --duration.

Proves: every topic recorded with its type and the message definition stored (msgdef
non-empty for the gato_msgs type); decoded values equal what was published; the latched
message recorded although published before the recorder started (transient-local QoS
match); the best-effort publisher recorded (QoS adaption); the parameter snapshot holds
every parameter of /test_ctrl and a parameter change made from this test produces a
second snapshot with the new value; the bag is closed cleanly (metadata.yaml) on SIGINT,
SIGTERM and --duration; sqlite3 storage; an existing output folder is refused with the
exact error. No wall-clock time is asserted; timeouts are generous (2 shared cores).
"""
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from conftest import import_or_skip, kill_tagged, start_python

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
import_or_skip("gato_ros.record_cli", _HINT)
import_or_skip("rosbags.highlevel", "pip install rosbags (requirements/lock.txt)")

pytestmark = pytest.mark.ros
WAIT_S = 120.0          # one DDS exchange with a process (start-up and discovery included)
CTRL = "/test_ctrl"

PUBLISHER = r"""
import sys, time
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, DurabilityPolicy, ReliabilityPolicy, HistoryPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from gato_msgs.msg import SolverStats, EEReference

rclpy.init()
n = Node("test_ctrl")
n.declare_parameter("gain", 1.5)
n.declare_parameter("mode", "fast")
n.declare_parameter("limits", [1.0, 2.0])
n.declare_parameter("ints", [3, 4])
n.declare_parameter("names", ["x", "y"])
n.declare_parameter("flags", [True, False])
n.declare_parameter("count", 7)
rel = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.VOLATILE)
latched = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
be = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT,
                durability=DurabilityPolicy.VOLATILE)
p_js = n.create_publisher(JointState, "/joint_states", rel)
p_st = n.create_publisher(SolverStats, "/test_ctrl/solver_stats", rel)
p_ref = n.create_publisher(EEReference, "/ee_reference", be)
p_x = n.create_publisher(String, "/extra", rel)
p_desc = n.create_publisher(String, "/robot_description", latched)
p_desc.publish(String(data="<robot name='latched'/>"))
print("PUBLISHER READY", flush=True)
k = [0]
def tick():
    k[0] += 1
    i = k[0]
    js = JointState(name=["a", "b"], position=[0.1 * i, -0.2 * i], velocity=[1.0, 2.0], effort=[])
    js.header.stamp.sec = i
    p_js.publish(js)
    st = SolverStats(batch_size=1, n_iters=i, solve_time_us=1000 + i, linsys="pcg", sqp_iters=[i, i + 1],
                     final_merit=[0.5 * i])
    st.header.stamp.sec = i
    p_st.publish(st)
    ref = EEReference(n_knots=2, knot_dt=0.03125, positions=[float(i)] * 6)
    ref.header.stamp.sec = i
    p_ref.publish(ref)
    p_x.publish(String(data=f"extra {i}"))
n.create_timer(0.05, tick)
try:
    rclpy.spin(n)
except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
    pass
"""


class Lines:
    """Collect a process's output lines in a thread; wait for a substring."""

    def __init__(self, proc):
        self.proc, self.lines, self.done, self._cv = proc, [], False, threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in iter(self.proc.stdout.readline, ""):
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        with self._cv:
            self.done = True
            self._cv.notify_all()

    def text(self):
        with self._cv:
            return "".join(self.lines)

    def wait_for(self, needle, timeout=WAIT_S, count=1):
        end = time.monotonic() + timeout
        with self._cv:
            while sum(needle in ln for ln in self.lines) < count:
                if time.monotonic() > end or self.done:
                    pytest.fail(f"no {needle!r} (x{count}) within {timeout:g} s (process "
                                f"{'exited' if self.done else 'running'}):\n{''.join(self.lines)[-4000:]}")
                self._cv.wait(0.5)


def stop(proc, sig, timeout=60.0):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"process did not exit within {timeout} s of {sig!r}")


@contextlib.contextmanager
def recording(args, env):
    """The recorder CLI with ``args`` as a subprocess (stdout and stderr piped, text); yields
    (process, marker). On exit every process tagged with the marker (the recorder and what a
    test started with it) is killed, so a failing test leaves none behind."""
    marker = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "gato_ros.record_cli", *args],
                            env={**env, "GATO_TEST_MARKER": marker}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        yield proc, marker
    finally:
        kill_tagged("GATO_TEST_MARKER", marker)


def record_to_the_end(args, env):
    """Run the recorder CLI until it ends by itself (``--duration``); (exit status, output)."""
    with recording(args, env) as (rec, _):
        rc = rec.wait(timeout=WAIT_S)
    return rc, rec.stdout.read()


def record_controller(args, env, controller):
    """Record (``args``) while the stand-in ``controller`` script publishes; it prints
    PUBLISHED when it has sent everything, and 1 s later the recorder is stopped with SIGINT
    (asserted to exit 0). Returns the recorder's output."""
    with recording(args, env) as (rec, marker):
        pub = start_python(controller, {**env, "GATO_TEST_MARKER": marker}, stderr=subprocess.STDOUT)
        try:
            Lines(pub).wait_for("PUBLISHED")
            time.sleep(1.0)                                   # the last messages reach the recorder
            assert stop(rec, signal.SIGINT) == 0
        finally:
            stop(pub, signal.SIGINT, 30)
    return rec.stdout.read()


@pytest.fixture
def publisher(ros_env):
    marker = uuid.uuid4().hex
    proc = start_python(PUBLISHER, {**ros_env, "GATO_TEST_MARKER": marker}, stderr=subprocess.STDOUT)
    lines = Lines(proc)
    lines.wait_for("PUBLISHER READY")
    yield proc
    stop(proc, signal.SIGINT, 30)
    kill_tagged("GATO_TEST_MARKER", marker)


def read_bag(path):
    """{topic: (msgtype, msgdef text, [decoded messages])} through rosbags' AnyReader."""
    from rosbags.highlevel import AnyReader

    from gato_ros.bag import typestore

    out = {}
    with AnyReader([path], default_typestore=typestore()) as reader:
        for c in reader.connections:
            out[c.topic] = (c.msgtype, c.msgdef.data if hasattr(c.msgdef, "data") else c.msgdef, [])
        for conn, _, raw in reader.messages():
            out[conn.topic][2].append(reader.deserialize(raw, conn.msgtype))
    return out


def param_values(ev):
    """{name: python value} of a decoded rcl_interfaces/ParameterEvent's new_parameters."""
    out = {}
    for p in ev.new_parameters:
        v = p.value
        out[p.name] = {1: v.bool_value, 2: v.integer_value, 3: v.double_value, 4: v.string_value,
                       6: [bool(x) for x in v.bool_array_value], 7: [int(x) for x in v.integer_array_value],
                       8: [float(x) for x in v.double_array_value], 9: list(v.string_array_value)
                       }.get(v.type, f"type {v.type}")
    return out


def set_remote_parameter(node_name, name, value):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    rclpy.init()
    try:
        node = rclpy.create_node(f"test_setter_{uuid.uuid4().hex[:8]}")
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        client = AsyncParameterClient(node, node_name)
        end = time.monotonic() + WAIT_S
        while not client.services_are_ready():
            assert time.monotonic() < end, f"parameter services of {node_name} not found"
            ex.spin_once(timeout_sec=0.1)
        fut = client.set_parameters([Parameter(name, value=value)])
        ex.spin_until_future_complete(fut, timeout_sec=WAIT_S)
        assert fut.done() and fut.result().results[0].successful, fut.result()
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_records_controller_graph_qos_definitions_and_parameter_snapshots(tmp_path, ros_env, publisher):
    from gato_ros.recorder_node import SNAPSHOT_TOPIC

    bag = tmp_path / "bag"
    with recording(["-o", str(bag), "--controller", CTRL, "--all-controller-topics", "--topics", "/extra",
                    "--progress", "1"], ros_env) as (rec, _):
        out = Lines(rec)
        out.wait_for("parameter snapshot 1 of /test_ctrl")
        out.wait_for("recording: ")                       # the progress line
        set_remote_parameter(CTRL, "gain", 2.5)
        out.wait_for("parameter snapshot 2 of /test_ctrl")
        time.sleep(1.0)                                   # a few more messages on every topic
        assert stop(rec, signal.SIGINT) == 0, out.text()[-3000:]
    text = out.text()
    assert (bag / "metadata.yaml").is_file(), text[-3000:]
    assert f"bag {bag} (mcap) closed" in text             # the per-topic summary at close
    m = read_bag(bag)
    assert m["/joint_states"][0] == "sensor_msgs/msg/JointState"
    typ, msgdef, stats = m[f"{CTRL}/solver_stats"]
    assert typ == "gato_msgs/msg/SolverStats" and "solve_time_us" in msgdef   # definition stored
    assert m["/extra"][0] == "std_msgs/msg/String"                            # type from discovery
    assert m["/ee_reference"][0] == "gato_msgs/msg/EEReference"
    for topic in ("/joint_states", f"{CTRL}/solver_stats", "/ee_reference", "/extra", "/robot_description",
                  "/parameter_events", SNAPSHOT_TOPIC):
        assert len(m[topic][2]) > 0, (topic, text[-3000:])
    # values decode equal to what was published (each message carries its index i in the stamp)
    for js in m["/joint_states"][2]:
        i = js.header.stamp.sec
        assert list(js.name) == ["a", "b"] and list(js.position) == [0.1 * i, -0.2 * i]
    for st in stats:
        i = st.header.stamp.sec
        assert (st.n_iters, st.solve_time_us, st.linsys, list(st.sqp_iters), list(st.final_merit)) == \
            (i, 1000 + i, "pcg", [i, i + 1], [0.5 * i])
    for ref in m["/ee_reference"][2]:                     # best-effort publisher: recorded
        assert list(ref.positions) == [float(ref.header.stamp.sec)] * 6
    # the latched description, published before the recorder started
    assert [d.data for d in m["/robot_description"][2]] == ["<robot name='latched'/>"]
    # parameter snapshots: every parameter of the stand-in controller, then the change
    snaps = m[SNAPSHOT_TOPIC][2]
    assert m[SNAPSHOT_TOPIC][0] == "rcl_interfaces/msg/ParameterEvent" and len(snaps) >= 2
    first, last = param_values(snaps[0]), param_values(snaps[-1])
    assert all(s.node == CTRL for s in snaps)
    assert {"gain", "mode", "limits", "ints", "names", "flags", "count", "use_sim_time"} <= set(first)
    assert (first["gain"], first["mode"], first["limits"], first["ints"], first["names"], first["flags"],
            first["count"], first["use_sim_time"]) == (1.5, "fast", [1.0, 2.0], [3, 4], ["x", "y"], [True, False], 7,
                                                       False)
    assert (last["gain"], last["mode"]) == (2.5, "fast")
    assert sum(1 for s in snaps if param_values(s)["gain"] == 2.5) >= 1
    # the change itself is in the recorded /parameter_events
    assert any(ev.node == CTRL and any(p.name == "gain" for p in ev.changed_parameters)
               for ev in m["/parameter_events"][2])


def test_sqlite3_storage_and_sigterm(tmp_path, ros_env, publisher):
    bag = tmp_path / "bag_sqlite"
    with recording(["-o", str(bag), "--storage", "sqlite3", "--controller", CTRL], ros_env) as (rec, _):
        out = Lines(rec)
        out.wait_for("parameter snapshot 1 of /test_ctrl")
        time.sleep(1.0)
        assert stop(rec, signal.SIGTERM) == 0, out.text()[-1500:]
    assert (bag / "metadata.yaml").is_file()
    assert "storage_identifier: sqlite3" in (bag / "metadata.yaml").read_text()
    assert list(bag.glob("*.db3"))
    m = read_bag(bag)
    assert len(m["/joint_states"][2]) > 0 and len(m[f"{CTRL}/solver_stats"][2]) > 0
    assert [d.data for d in m["/robot_description"][2]] == ["<robot name='latched'/>"]


def test_duration_ends_the_recording(tmp_path, ros_env, publisher):
    bag = tmp_path / "bag_dur"
    rc, text = record_to_the_end(["-o", str(bag), "--topics", "/joint_states:sensor_msgs/msg/JointState",
                                  "--controller", "", "--duration", "3"], ros_env)
    assert rc == 0, text[-3000:]
    m = read_bag(bag)
    assert set(m) == {"/joint_states"} and len(m["/joint_states"][2]) > 0, text[-3000:]


def test_existing_output_folder_is_refused(tmp_path, ros_env):
    bag = tmp_path / "exists"
    bag.mkdir()
    r = subprocess.run([sys.executable, "-m", "gato_ros.record_cli", "-o", str(bag)], env=ros_env,
                       capture_output=True, text=True, timeout=WAIT_S)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"record: error: bag_path: {bag} exists already; the recorder writes a new bag folder only " \
           "(choose another path or remove it)" in r.stderr
    assert list(bag.iterdir()) == []                      # untouched


def test_help_names_the_default_topics():
    r = subprocess.run([sys.executable, "-m", "gato_ros.record_cli", "--help"], capture_output=True, text=True,
                       timeout=WAIT_S, env=os.environ)
    assert r.returncode == 0
    for word in ("--storage", "--duration", "--controller", "CONTROLLER/solve_input", "/robot_description",
                 "/gato_recorder/parameter_snapshot"):
        assert word in r.stdout


def test_destroying_the_node_closes_the_bag(tmp_path, ros_env):
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from gato_ros.recorder_node import CONTROLLER_GRAPH_TOPICS, SNAPSHOT_TOPIC, RecorderNode

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        with pytest.raises(ValueError, match=r"storage: expected mcap or sqlite3, got 'zip'"):
            RecorderNode(context=ctx, parameter_overrides=[Parameter("bag_path", value=str(tmp_path / "z")),
                                                           Parameter("storage", value="zip")])
        assert not (tmp_path / "z").exists()
        node = RecorderNode(context=ctx, parameter_overrides=[Parameter("bag_path", value=str(tmp_path / "b")),
                                                              Parameter("progress_period_s", value=0.0)])
        assert set(node.counts()) == set(CONTROLLER_GRAPH_TOPICS) | {SNAPSHOT_TOPIC}
        node.destroy_node()
        node.close()                                     # idempotent
    finally:
        rclpy.try_shutdown(context=ctx)
    assert (tmp_path / "b" / "metadata.yaml").is_file()
    m = read_bag(tmp_path / "b")
    assert set(m) == set(CONTROLLER_GRAPH_TOPICS) | {SNAPSHOT_TOPIC}   # every topic declared, types stored
    assert m["/gato_controller/solve_input"][0] == "gato_msgs/msg/SolveInput"
    assert "x_measured" in m["/gato_controller/solve_input"][1]


def test_ros_args_reach_the_node(tmp_path, ros_env, publisher):
    """``--ros-args -p use_sim_time:=true``: with no /clock published, every receipt stamp is 0."""
    from rosbags.highlevel import AnyReader

    bag = tmp_path / "bag_sim"
    rc, text = record_to_the_end(["-o", str(bag), "--topics", "/joint_states:sensor_msgs/msg/JointState",
                                  "--controller", "", "--duration", "3", "--ros-args", "-p", "use_sim_time:=true"],
                                 ros_env)
    assert rc == 0, text[-3000:]
    with AnyReader([bag]) as reader:
        stamps = [t for _, t, _ in reader.messages()]
    assert stamps and set(stamps) == {0}


GAPPY_CONTROLLER = r"""
import time
import rclpy
from gato_msgs.msg import EffortCommand

rclpy.init()
n = rclpy.create_node("test_ctrl")
pub = n.create_publisher(EffortCommand, "/test_ctrl/command", 200)
while pub.get_subscription_count() == 0:
    rclpy.spin_once(n, timeout_sec=0.05)
time.sleep(1.0)
for tick in range(1, 81):
    if 30 <= tick <= 34 or tick == 60:
        continue          # lost between the controller and the recorder
    m = EffortCommand()
    m.header.stamp.sec = tick
    m.joint_names, m.effort, m.source, m.tick = ["a"], [0.0], "mpc", tick
    pub.publish(m)
    time.sleep(0.005)
print("PUBLISHED", flush=True)
time.sleep(60)
"""


def test_lost_ticks_are_reported_by_the_recorder_and_the_bag_is_split(tmp_path, ros_env):
    """A controller whose commands 30-34 and 60 never reach the recorder (tick counter jumps):
    the recorder names both gaps, in its log and its closing summary; the bag, split by
    duration into several zstd-compressed files, holds the 74 commands that arrived."""
    from gato.bagio import read_bag as bagio_read

    bag = tmp_path / "gappy"
    text = record_controller(["-o", str(bag), "--controller", "/test_ctrl", "--topics",
                              "/test_ctrl/command:gato_msgs/msg/EffortCommand", "--max-bag-duration", "0.1"],
                             ros_env, GAPPY_CONTROLLER)
    assert "/test_ctrl/command: 5 ticks missing between" in text and "(ticks 30..34;" in text, text[-3000:]
    assert "/test_ctrl/command: 1 tick missing between" in text and "(ticks 60..60;" in text, text[-3000:]
    assert "6 ticks missing on /test_ctrl/command" in text, text[-3000:]
    got = bagio_read(bag)
    assert got.counts["/test_ctrl/command"] == 74 and got.complete, got.problems
    assert len(list(bag.glob("gappy_*.mcap"))) >= 2


GAPPY_TICKS = r"""
import time
import rclpy
from gato_msgs.msg import ControlTicks

rclpy.init()
n = rclpy.create_node("test_plugin")
pub = n.create_publisher(ControlTicks, "/test_plugin/ticks", 200)
while pub.get_subscription_count() == 0:
    rclpy.spin_once(n, timeout_sec=0.05)
time.sleep(1.0)
for b in range(10):                       # batches of 10 ticks: seq 1..100
    seqs = [s for s in range(10 * b + 1, 10 * b + 11) if not 25 <= s <= 31]   # 25..31 lost before the ring
    m = ControlTicks()
    m.seq = seqs
    m.stamp_ns = [1000 * s for s in seqs]
    if b == 7:
        m.stamp_ns = m.stamp_ns[:4]        # malformed: 10 numbers, 4 stamps
    m.ring_dropped = 7
    pub.publish(m)
    time.sleep(0.01)
print("PUBLISHED", flush=True)
time.sleep(60)
"""


def test_control_ticks_gaps_and_a_malformed_batch_are_reported(tmp_path, ros_env):
    """A ControlTicks publisher (the plugin's ~/ticks) whose ticks 25..31 never reach the ring, and
    one batch whose stamps do not match its sequence numbers: the recorder names the gap, stores
    every batch, and says that one batch was stored without being checked (its 10 ticks are not
    counted as received, and make no gap)."""
    from gato.bagio import read_bag as bagio_read

    bag = tmp_path / "ticks"
    text = record_controller(["-o", str(bag), "--controller", "", "--topics",
                              "/test_plugin/ticks:gato_msgs/msg/ControlTicks"], ros_env, GAPPY_TICKS)
    assert "/test_plugin/ticks: 7 ticks missing between" in text and "(ticks 25..31;" in text, text[-3000:]
    assert ("7 ticks missing on /test_plugin/ticks (sequence numbers of 83 ticks received; the publisher's "
            "ring dropped 7; 1 messages stored unchecked)") in text, text[-3000:]
    assert "a ControlTicks batch could not be checked (10 sequence numbers but 4 stamps)" in text, text[-3000:]
    got = bagio_read(bag)
    assert got.counts["/test_plugin/ticks"] == 10 and got.complete, got.problems


SOLVING_CONTROLLER = r"""
import time
import numpy as np
import rclpy
from gato_msgs.msg import SolveInput

rclpy.init()
n = rclpy.create_node("test_ctrl")
pub = n.create_publisher(SolveInput, "/test_ctrl/solve_input", 300)
while pub.get_subscription_count() == 0:
    rclpy.spin_once(n, timeout_sec=0.05)
time.sleep(1.0)
rng = np.random.default_rng(7)
for tick in range(1, 251):
    if tick in (150, 151):
        continue          # hold ticks: no SolveInput; the next one follows a jump of the counter
    m = SolveInput()
    m.header.stamp.sec = tick
    m.tick, m.joint_names, m.reset = tick, ["a"], tick in (1, 152)
    m.x_measured = [float(tick), -float(tick)]
    m.xu_warm = rng.standard_normal(5).tolist()
    m.warm_rows, m.config_json = 1, '{"robot": "test"}'
    m.solver_state_rows, m.solver_state = 1, rng.standard_normal(40).tolist()
    m.capped_out = tick % 7 == 0
    pub.publish(m)
    time.sleep(0.004)
print("PUBLISHED", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("period", [100, 1])
def test_solver_state_is_kept_on_key_ticks_only(tmp_path, ros_env, period):
    """--solver-state-period 100: the SolveInputs keep their solver state on the first one,
    ticks 100 and 200, after the jump of the tick counter (a hold: 150-151 not published) and
    on reset ticks; the others are stored without it, every other field as published (100 is
    the default). Period 1: every solver state kept. The summary counts them."""
    from gato.bagio import read_bag as bagio_read

    bag = tmp_path / "thin"
    text = record_controller(["-o", str(bag), "--controller", "/test_ctrl", "--topics",
                              "/test_ctrl/solve_input:gato_msgs/msg/SolveInput", "--solver-state-period",
                              str(period)], ros_env, SOLVING_CONTROLLER)
    got = bagio_read(bag)
    msgs = [m for _, m in got.messages["/test_ctrl/solve_input"]]
    assert [int(m.tick) for m in msgs] == [t for t in range(1, 251) if t not in (150, 151)], got.problems
    rng = np.random.default_rng(7)
    kept = []
    for m in msgs:
        warm, state = rng.standard_normal(5), rng.standard_normal(40)
        np.testing.assert_array_equal(m.xu_warm, warm)
        assert list(m.x_measured) == [m.tick, -m.tick] and m.config_json == '{"robot": "test"}'
        assert bool(m.capped_out) == (m.tick % 7 == 0) and bool(m.reset) == (m.tick in (1, 152))
        if int(m.solver_state_rows):
            np.testing.assert_array_equal(m.solver_state, state)
            kept.append(int(m.tick))
        else:
            assert len(m.solver_state) == 0
    want = [t for t in range(1, 251) if t not in (150, 151)] if period == 1 else [1, 100, 152, 200]
    assert kept == want
    line = f"solver state kept on {len(want)} of 248 SolveInputs on /test_ctrl/solve_input"
    assert (line in text) if period > 1 else ("solver state kept on" not in text), text[-3000:]
