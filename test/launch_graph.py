"""launch_pytest helpers for the shipped launch files under the real ROS 2 launch: a launch
description of one file whose processes carry a fresh environment marker, what the launch
reports about them (started / exit codes, by node name), and the clean-exit check (every
process exited 0, none left behind). Used by test/test_launch_sim.py; the hardware tests
can use it too."""
import time
import uuid

import pytest

from conftest import kill_tagged, processes_with_env, require_ros2_tools

MARKER_KEY = "GATO_TEST_MARKER"
_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"


def bringup_file(name: str):
    """gato_bringup/launch/<name> as installed (skips where gato_bringup is not)."""
    from pathlib import Path

    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        return Path(get_package_share_directory("gato_bringup")) / "launch" / name
    except PackageNotFoundError:
        pytest.skip(f"gato_bringup is not installed ({_HINT})")


class Graph:
    """What the launch reports: processes started / exited (by node name) and their codes."""

    def __init__(self, marker):
        self.marker = marker
        self.started: dict = {}
        self.exits: dict = {}

    @staticmethod
    def _name(action):
        name = getattr(action, "node_name", None)
        return name.rsplit("/", 1)[-1] if name and "<node_name_unspecified>" not in name else action.name

    def description(self, path, args: dict):
        from launch import LaunchDescription
        from launch.actions import IncludeLaunchDescription, RegisterEventHandler
        from launch.event_handlers import OnProcessExit, OnProcessStart
        from launch.launch_description_sources import AnyLaunchDescriptionSource
        from launch_pytest.actions import ReadyToTest

        return LaunchDescription([
            RegisterEventHandler(OnProcessStart(on_start=lambda ev, ctx: self.started.__setitem__(
                self._name(ev.action), ev.pid))),
            RegisterEventHandler(OnProcessExit(on_exit=lambda ev, ctx: self.exits.__setitem__(
                self._name(ev.action), ev.returncode))),
            IncludeLaunchDescription(AnyLaunchDescriptionSource(str(path)), launch_arguments=list(args.items())),
            ReadyToTest(),
        ])


def marked_launch(monkeypatch, path, args: dict):
    """(LaunchDescription, Graph) of the launch file ``path`` with ``args``, its processes
    marked through os.environ (launch hands it to every process it starts)."""
    require_ros2_tools()
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_KEY, marker)
    g = Graph(marker)
    return g.description(path, args), g


def assert_clean(g: Graph, expected):
    """The ``expected`` processes started, every started process exited 0, none is left."""
    assert set(expected) <= set(g.started), f"processes started: {sorted(g.started)}"
    assert set(g.exits) == set(g.started), f"started {sorted(g.started)}, exited {g.exits}"
    assert all(rc == 0 for rc in g.exits.values()), f"exit codes: {g.exits}"
    deadline = time.monotonic() + 10.0
    while processes_with_env(MARKER_KEY, g.marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_with_env(MARKER_KEY, g.marker)
    kill_tagged(MARKER_KEY, g.marker)
    assert left == [], f"processes left behind by the launch: {left}"


def sigint_and_wait(proc, timeout):
    """SIGINT to the process group of ``proc`` (started with start_new_session), as Ctrl-C in a
    terminal; SIGKILL after ``timeout`` s. Returns (exit code, its output)."""
    import os
    import signal
    import subprocess

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return proc.returncode, out
