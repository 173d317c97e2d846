"""The nodes' exit guard (gato_ros.node_util.arm_exit_guard / run), a last resort that reports: a
node whose main thread is blocked in native code when SIGINT / SIGTERM arrives is ended after its
grace with a NON-zero exit code (EXIT_GUARD_CODE), an error line with the marker, the blocked
native call (the main thread's native stack) and the Python stacks on stderr, and the line in
$GATO_EXIT_GUARD_REPORT (which test/conftest.py watches: a guard that fires fails its test); a
node that stops normally is not cut short; the recorder runs without a guard (closing its bag
must never be cut)."""
import os
import re
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


def _start(code, env):
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
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
def test_a_node_blocked_in_native_code_is_reported_and_exits_non_zero(ros_env, guard_lib, tmp_path, sig):
    # this test's own report file: the guard firing here is the point, not a fault of the suite
    report = tmp_path / "fired.log"
    proc = _start(_STUCK_NODE.format(grace=1.0), dict(ros_env, **{node_util.EXIT_GUARD_REPORT_ENV: str(report)}))
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
    assert node_util.EXIT_GUARD_CODE != 0
    assert proc.returncode == node_util.EXIT_GUARD_CODE, (proc.returncode, err[-3000:])
    line = (f"{node_util.EXIT_GUARD_MARKER} [stuck_node] error: still running 1.0 s after the stop signal: the main "
            "thread is blocked in native code (for instance a DDS call that does not return); a fault, exiting "
            f"with code {node_util.EXIT_GUARD_CODE}.")
    assert line in err, err[-3000:]
    # the main thread's native stack names the call it is blocked in (ctypes called libc's
    # pthread_mutex_lock), before the Python stacks
    native = err.split("GATO_EXIT_GUARD native stack of the main thread", 1)[1].split("GATO_EXIT_GUARD end of", 1)[0]
    assert "pthread_mutex_lock" in native, err[-3000:]
    # faulthandler's dump names the Python frame the main thread was stuck in
    assert "in block" in err, err[-3000:]
    # the line the suite watches (conftest.no_exit_guard_fires)
    assert report.read_text().startswith(line)


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
    assert "closed" in out and node_util.EXIT_GUARD_MARKER not in err


def test_arm_exit_guard_rejects_a_bad_grace():
    with pytest.raises(ValueError, match=r"grace_s: expected a positive number of seconds, got 0"):
        node_util.arm_exit_guard("x", 0)
    with pytest.raises(ValueError, match=r"grace_s: expected a positive number of seconds, got -1"):
        node_util.arm_exit_guard("x", -1)


# A test that passes by its own checks while a node's guard fires during it: the suite's watch
# (test/conftest.py, no_exit_guard_fires) must fail it anyway.
_TEST_WITH_A_STUCK_NODE = textwrap.dedent('''
    import os, signal, subprocess, sys, time

    def test_looks_fine():
        proc = subprocess.Popen([sys.executable, "-c", {code!r}], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        while "blocking in native code" not in proc.stdout.readline():
            pass
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)              # whatever the exit code: this test checks nothing
''')


def test_the_suite_fails_a_test_in_which_a_guard_fired(ros_env, guard_lib, tmp_path):
    (tmp_path / "test_inner.py").write_text(_TEST_WITH_A_STUCK_NODE.format(code=_STUCK_NODE.format(grace=1.0)))
    env = dict(ros_env, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), ros_env.get("PYTHONPATH", "")]))
    env.pop(node_util.EXIT_GUARD_REPORT_ENV, None)     # the inner session's conftest sets its own
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:rerunfailures", str(tmp_path / "test_inner.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-3000:]
    assert re.search(r"\b1 passed, (\d+ warnings?, )?1 error\b", out), out[-3000:]
    assert "a node's exit guard fired during this test" in out, out[-3000:]
    assert f"{node_util.EXIT_GUARD_MARKER} [stuck_node] error" in out, out[-3000:]
