"""Shared helpers for the system tests: a private ROS 2 graph per test session,
and Python subprocesses that run in the workspace environment."""
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

# Fast DDS maps a domain id to UDP ports; 0..232 are valid. scripts/env.sh gives
# interactive shells 1..100, so test sessions take 101..200.
_TEST_DOMAIN_BASE = 101


#: Test files whose tests run a graph of ROS 2 processes talking over DDS on this (shared) machine.
#: Their measurements (ticks received, tracking during a fault, a service answered in time) depend
#: on scheduling and DDS transport under whatever load the host has, so each such test gets one
#: rerun, as ROS 2's own CI does (colcon test --retest-until-pass). A rerun is reported, never
#: silent: "R" in the progress line, "N rerun" in the summary and, with -rR, the first failure.
#: A test that fails twice fails the run. launch_pytest tests are not rerun (see below).
DDS_GRAPH_TEST_FILES = frozenset({
    "test_fuzz_dds.py", "test_launch_hardware.py", "test_launch_parity.py", "test_launch_sim.py", "test_mujoco_startup.py",
    "test_replay_bringup.py", "test_replay_cut.py", "test_ros2_bag_compat.py", "test_ros_collision_system.py",
    "test_ros_estimator_system.py", "test_ros_hardware_faults.py", "test_ros_hardware_plugin.py",
    "test_ros_planners_system.py", "test_ros_plugin.py", "test_ros_plugin_no_effort.py",
    "test_ros_process_faults.py", "test_ros_recorder.py", "test_ros_system.py", "test_ros_targets_system.py",
    "test_ros_action_system.py", "test_ros_go2_system.py",
})
DDS_GRAPH_RERUNS = 1


def pytest_collection_modifyitems(config, items):
    """One rerun for each test of DDS_GRAPH_TEST_FILES (pytest-rerunfailures, in the lock)."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        # launch_pytest tests (@pytest.mark.launch) are not rerun: launch_pytest closes the
        # launch's event loop after the first attempt, so a rerun can only fail with "Event loop
        # is closed" (CI saw it) and would hide the real first failure
        if item.path.name in DDS_GRAPH_TEST_FILES and item.get_closest_marker("flaky") is None \
                and item.get_closest_marker("launch") is None:
            item.add_marker(pytest.mark.flaky(reruns=DDS_GRAPH_RERUNS, reruns_delay=2))


#: The nodes' exit guard (gato_ros.node_util.arm_exit_guard) appends its error line to the file
#: $GATO_EXIT_GUARD_REPORT when it ends a node that did not stop within its grace (blocked in
#: native code at shutdown). Every process of this session inherits the variable from
#: os.environ (ros_env, launch runs, start_python), so a guard that fires anywhere in a test is
#: seen here and fails that test (issue 32: the last resort must never pass as a clean exit).
#: The variable is written out here rather than imported: gato_ros may not be built.
EXIT_GUARD_REPORT_ENV = "GATO_EXIT_GUARD_REPORT"
_EXIT_GUARD_REPORT = os.path.join(tempfile.mkdtemp(prefix="gato_exit_guard_"), "fired.log")
os.environ[EXIT_GUARD_REPORT_ENV] = _EXIT_GUARD_REPORT


def _exit_guard_report_size():
    try:
        return os.path.getsize(_EXIT_GUARD_REPORT)
    except FileNotFoundError:
        return 0


@pytest.fixture(autouse=True)
def no_exit_guard_fires():
    """Fail the test (at teardown) during which a node's exit guard fired: a node blocked at
    shutdown is a fault even when the test's own checks did not notice it."""
    before = _exit_guard_report_size()
    yield
    if _exit_guard_report_size() > before:
        with open(_EXIT_GUARD_REPORT, "rb") as f:
            f.seek(before)
            fired = f.read().decode(errors="replace")
        pytest.fail("a node's exit guard fired during this test (blocked in native code at shutdown; its "
                    f"native and Python stacks are in that node's stderr):\n{fired}", pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    """A guard that fired fails the session too, even if a rerun of its test then passed."""
    if _exit_guard_report_size() > 0:
        with open(_EXIT_GUARD_REPORT, errors="replace") as f:
            fired = f.read()
        sys.stderr.write(f"\nexit guard fired in this session (a node blocked at shutdown):\n{fired}")
        if session.exitstatus == 0:
            session.exitstatus = 1
    shutil.rmtree(os.path.dirname(_EXIT_GUARD_REPORT), ignore_errors=True)


def import_or_skip(module, hint):
    """Import `module`, or skip the calling test module if it is not installed.

    Only a missing module skips; a module that is present but broken fails.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        pytest.skip(f"{module} not importable ({exc}); {hint}", allow_module_level=True)


@pytest.fixture(scope="session")
def ros_env():
    """Environment (dict) for every ROS process of this session, this one included.

    A ROS_DOMAIN_ID unique to this pytest process keeps parallel sessions apart,
    and discovery stays on loopback. Also applied to os.environ, so rclpy in the
    test process joins the same private graph.
    """
    overrides = {
        "ROS_DOMAIN_ID": str(_TEST_DOMAIN_BASE + os.getpid() % 100),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in overrides.items():
            mp.setenv(key, value)
        yield dict(os.environ)


def start_python(code, env, **popen_kwargs):
    """Start `python -c code` with this interpreter (the workspace venv) and `env`.

    stdout is a text pipe unless overridden. Stop it with stop_process().
    """
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("text", True)
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, start_new_session=True, **popen_kwargs
    )


def stop_process(proc, grace_s=5.0):
    """Terminate `proc` (SIGTERM, then SIGKILL after grace_s); return its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def processes_with_env(key, value):
    """PIDs of live processes (not zombies) whose environment has key=value (Linux /proc).

    Tag the processes a test starts with a unique environment marker, then check that
    none is left over: this also finds grandchildren that a pid list would miss.
    """
    needle = f"{key}={value}".encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != b"Z":
            found.append(int(d))
    return found


def kill_tagged(key, value, sig=9):
    """Send `sig` to every process processes_with_env(key, value) finds (test clean-up)."""
    import signal as _signal

    for pid in processes_with_env(key, value):
        try:
            os.kill(pid, sig if sig else _signal.SIGKILL)
        except OSError:
            pass


def ros2_overlay_expected():
    """True where scripts/setup.sh must have provided the ROS 2 tools: the project's
    overlay sits beside the checkout (../shared/ros2_sdk: dev machines and CI) or a
    system ROS 2 is sourced (ROS_DISTRO with /opt/ros/<distro>)."""
    import glob

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if glob.glob(os.path.join(root, "..", "shared", "ros2_sdk", "ros2-control-sdk-*.tar.xz")):
        return True
    distro = os.environ.get("ROS_DISTRO", "")
    return bool(distro) and os.path.isdir(f"/opt/ros/{distro}")


def require_ros2_tools(*executables):
    """Skip the calling test where neither the ROS 2 overlay nor a system ROS 2 exists;
    fail (never skip) where one should be there but the `ros2` CLI or a named executable
    (e.g. "ros2_control_node" as package/executable is checked by the test itself) is missing,
    so CI, which has the overlay, always runs these tests."""
    import shutil

    have = shutil.which("ros2") is not None
    if not have and not ros2_overlay_expected():
        pytest.skip("needs the ROS 2 tools (ros2 CLI, launch, ros2_control): no overlay at ../shared/ros2_sdk "
                    "and no sourced system ROS 2")
    if not have:
        pytest.fail("the ROS 2 overlay is beside the checkout but `ros2` is not on PATH: run scripts/setup.sh "
                    "and source scripts/activate.sh")
    for exe in executables:
        if shutil.which(exe) is None:
            pytest.fail(f"`{exe}` not found on PATH although the ROS 2 tools are present")


def build_core_consumer(name, build_dir):
    """Configure and build test/cpp/<name>, a C++ consumer of find_package(gato_core) (the
    CMake package pip installed into the venv: scripts/setup.sh), in ``build_dir`` (Release,
    one job); returns the path of its executable ``build_dir/<name>``. Fails the test, with
    the tail of CMake's or the compiler's output, where a step fails."""
    import shutil
    from pathlib import Path

    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.fail("cmake and a C++ compiler are needed (scripts/setup.sh checks for both)")
    prefix = Path(sys.prefix)
    assert (prefix / "lib/cmake/gato_core/gato_coreConfig.cmake").is_file(), \
        "gato_core's CMake package is not installed in the venv (scripts/setup.sh builds it)"
    src, build = Path(__file__).parent / "cpp" / name, Path(build_dir)
    env = dict(os.environ, CMAKE_PREFIX_PATH=f"{prefix}{os.pathsep}{os.environ.get('CMAKE_PREFIX_PATH', '')}")
    cfg = subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert cfg.returncode == 0, cfg.stdout[-3000:] + cfg.stderr[-3000:]
    bld = subprocess.run(["cmake", "--build", str(build), "-j", "1"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert bld.returncode == 0, bld.stdout[-3000:] + bld.stderr[-3000:]
    return build / name
