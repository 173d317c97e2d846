"""The nodes' exit guard (gato_ros.node_util.arm_exit_guard / run): a node whose main thread is
blocked in native code when SIGINT / SIGTERM arrives still exits 0 within its grace, says why on
stderr with the Python stacks; a node that stops normally is not cut short; the recorder runs
without a guard (closing its bag must never be cut)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import import_or_skip

import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
node_util = import_or_skip("gato_ros.node_util", "build the ROS packages (scripts/setup.sh)")

pytestmark = pytest.mark.ros

# A node whose timer callback blocks its main thread for good in native code: it locks a pthread
# mutex it already holds (a mutex left locked, as by a peer that died holding it; signals do not
# interrupt pthread_mutex_lock) through ctypes.PyDLL, which keeps the interpreter lock: neither
# Python's signal handler nor any Python thread can run again (what a DDS call that never
# returns does to a node).
_STUCK_NODE = textwrap.dedent("""
    import ctypes, sys
    import rclpy.node
    from gato_ros.node_util import run

    def make():
        node = rclpy.node.Node("stuck_node")
        def block():
            libc = ctypes.PyDLL(None)
            mutex = ctypes.create_string_buffer(64)      # zeroed: PTHREAD_MUTEX_INITIALIZER (glibc)
            libc.pthread_mutex_lock(mutex)
            print("blocking in native code", flush=True)
            libc.pthread_mutex_lock(mutex)               # never returns
        node.create_timer(0.2, block)
        return node

    sys.exit(run(make, ["stuck", "--ros-args", "-r", "__node:=stuck_node"], exit_grace_s={grace}))
""")

# The same node stopping normally: its callback returns, the loop ends, close() runs.
_CLEAN_NODE = textwrap.dedent("""
    import sys, time
    import rclpy.node
    from gato_ros.node_util import run

    class Node(rclpy.node.Node):
        def __init__(self):
            super().__init__("clean_node")
            self.create_timer(0.05, lambda: print("tick", flush=True))
        def close(self):
            time.sleep(0.5)          # a close that takes a while, well inside the grace
            print("closed", flush=True)

    sys.exit(run(Node, ["clean", "--ros-args", "-r", "__node:=clean_node"], exit_grace_s=3.0))
""")


def _start(code, ros_env):
    return subprocess.Popen([sys.executable, "-c", code], env=ros_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_line(proc, text, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"no {text!r} from the node: {proc.stderr.read()[-2000:]}")


def _library_installed():
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    try:
        return os.path.isfile(os.path.join(get_package_prefix("gato_ros"), "lib", "libgato_exit_guard.so"))
    except PackageNotFoundError:
        return False


@pytest.fixture
def guard_lib():
    if not _library_installed():
        pytest.skip("libgato_exit_guard.so is not installed (colcon build of gato_ros: scripts/setup.sh)")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_node_blocked_in_native_code_exits_0_after_its_grace(ros_env, guard_lib, sig):
    proc = _start(_STUCK_NODE.format(grace=1.0), ros_env)
    try:
        _wait_line(proc, "blocking in native code")
        time.sleep(0.3)
        proc.send_signal(sig)
        second = sig                       # a second signal changes nothing: the thread is armed once
        proc.send_signal(second)
        # the callback never returns; the guard ends the process after its 1 s grace
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-2000:]
    assert "[stuck_node] still running 1.0 s after the stop signal: the main thread is blocked in native code (for instance a DDS call" in err
    assert "exiting without it (exit code 0)" in err
    # faulthandler's dump names the Python frame the main thread was stuck in
    assert "in block" in err, err[-2000:]


def test_a_node_that_stops_normally_is_not_cut_short(ros_env, guard_lib):
    proc = _start(_CLEAN_NODE, ros_env)
    try:
        _wait_line(proc, "tick")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-2000:]
    assert "closed" in out and "still running" not in err


def test_arm_exit_guard_rejects_a_bad_grace():
    with pytest.raises(ValueError, match=r"grace_s: expected a positive number of seconds, got 0"):
        node_util.arm_exit_guard("x", 0)
    with pytest.raises(ValueError, match=r"grace_s: expected a positive number of seconds, got -1"):
        node_util.arm_exit_guard("x", -1)
