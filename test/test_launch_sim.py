"""The shipped simulation bringup (gato_bringup/launch/sim.launch.yaml) under the REAL ROS 2
launch, driven by launch_pytest (the overlay's, or a system ROS 2's): the same file users
start with ``ros2 launch gato_bringup sim.launch.yaml``.

- lockstep: every process comes up, joint states / commands / references flow, the world
  ends the run after its simulated duration (on_exit: shutdown) and every process exits 0;
- free-running: the graph runs at wall-clock pace until the launch is shut down (SIGINT to
  every process, as Ctrl-C on ``ros2 launch``); every process exits 0.

Both: no process started by the launch is left behind (each carries a marker in its
environment). Runs are a few simulated seconds; no wall-clock time is asserted.
"""
import time

import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
launch_pytest = import_or_skip("launch_pytest", "needs the ROS 2 overlay (scripts/setup.sh; source "
                               "scripts/activate.sh)")
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
from launch_graph import assert_clean, bringup_file, marked_launch  # noqa: E402

pytestmark = pytest.mark.ros
EXPECTED = {"gato_controller", "gato_reference", "gato_sim"}
TOPIC_TIMEOUT_S = 180.0    # process start-up (pinocchio, MuJoCo imports) and discovery on 2 shared cores
RUN_TIMEOUT_S = 300.0
# Simulated seconds of the lockstep run. A 3 s run lasts about a wall-clock second, shorter than
# Fast DDS takes to match a late endpoint when its first discovery message is lost (the resend
# comes with the next heartbeat, seconds later): CI saw 300 joint states and 0 references, 2 of
# 5 local runs too. 20 s (about 7 s of wall clock) leaves the match time to happen.
LOCKSTEP_S = "20.0"


@pytest.fixture
def counter(ros_env):
    """The test's subscriber, in the graph before the launch starts (it does not delay the run:
    the world starts once the controller subscribes)."""
    c = Counter()
    yield c
    c.close()


@launch_pytest.fixture
def sim_lockstep(monkeypatch, ros_env, counter):
    return marked_launch(monkeypatch, bringup_file("sim.launch.yaml"),
                         {"lockstep": "true", "duration": LOCKSTEP_S, "world": "mujoco"})


@launch_pytest.fixture
def sim_free_running(monkeypatch, ros_env, counter):
    return marked_launch(monkeypatch, bringup_file("sim.launch.yaml"),
                         {"lockstep": "false", "duration": "0", "world": "mujoco"})


class Counter:
    """Counts messages on the graph's topics from this process (rclpy, own context)."""

    def __init__(self):
        from gato_msgs.msg import EEReference, EffortCommand
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx)
        self.node = rclpy.create_node("gato_test_launch_sim", context=self.ctx)
        self.n = {"/joint_states": 0, "/gato_controller/command": 0, "/effort_controller/commands": 0,
                  "/ee_reference": 0}
        for topic, typ in (("/joint_states", JointState), ("/gato_controller/command", EffortCommand),
                           ("/effort_controller/commands", Float64MultiArray), ("/ee_reference", EEReference)):
            self.node.create_subscription(typ, topic, lambda m, t=topic: self.n.__setitem__(t, self.n[t] + 1), 50)
        self.ex = rclpy.executors.SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)

    def spin_until(self, pred, timeout):
        end = time.monotonic() + timeout
        while not pred() and time.monotonic() < end:
            self.ex.spin_once(timeout_sec=0.1)
        return pred()

    def close(self):
        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


@pytest.mark.launch(fixture=sim_lockstep)
def test_sim_launch_lockstep_runs_its_duration_and_exits_cleanly(sim_lockstep, counter):
    _, g = sim_lockstep
    c = counter
    # Topics flow: the lockstep loop closes (commands answer joint states) and references come.
    flowing = c.spin_until(lambda: c.n["/joint_states"] >= 20 and c.n["/gato_controller/command"] >= 20
                           and c.n["/ee_reference"] >= 20, TOPIC_TIMEOUT_S)
    assert flowing, f"messages seen: {c.n}; processes started {sorted(g.started)}, exited {g.exits}"
    # The world ends the run after its simulated duration and takes the launch down with it.
    ended = c.spin_until(lambda: "gato_sim" in g.exits and set(g.exits) >= set(g.started), RUN_TIMEOUT_S)
    assert ended, f"the run did not end: exited {g.exits}, started {sorted(g.started)}"
    assert g.exits["gato_sim"] == 0
    # 20 s at 100 Hz: 2000 ticks; this subscriber may miss some of a fast lockstep burst (keep-last
    # history) on a loaded machine, so it only checks that the run went on well beyond start-up.
    assert c.n["/gato_controller/command"] >= 100, c.n
    yield
    assert_clean(g, EXPECTED)


@pytest.mark.launch(fixture=sim_free_running)
def test_sim_launch_free_running_flows_and_stops_on_sigint(sim_free_running, counter):
    _, g = sim_free_running
    c = counter
    flowing = c.spin_until(lambda: c.n["/joint_states"] >= 100 and c.n["/effort_controller/commands"] >= 100
                           and c.n["/ee_reference"] >= 50, TOPIC_TIMEOUT_S)
    assert flowing, f"messages seen: {c.n}; processes started {sorted(g.started)}, exited {g.exits}"
    assert g.exits == {}, f"a process exited while running: {g.exits}"
    yield   # launch_pytest shuts the launch down here: SIGINT to every process
    assert_clean(g, EXPECTED)
