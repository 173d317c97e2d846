"""gato_ros mujoco_startup (the start-up sequence of hardware.launch.xml mujoco:=true) on its own:
its refusals and its exits. The sequence itself (pause, reset to the keyframe, activate both
controllers while paused, in node mode wait for the first command, resume) runs in
test/test_launch_hardware.py against mujoco_ros2_control, and its refusal of controllers that
are already active against the mock-hardware bringup there.

- a bad parameter: exit 1, one line naming the parameter;
- nothing to talk to within timeout_s: exit 1, naming the step it waited in;
- SIGINT / SIGTERM while it waits: exit 0;
- a service answer lost on the way: the call is asked again after call_retry_s.
"""
import os
import signal
import subprocess
import time

import pytest

from conftest import import_or_skip, require_ros2_tools

import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("controller_manager_msgs.srv", "needs the ROS 2 overlay (scripts/setup.sh)")
import_or_skip("mujoco_ros2_control_msgs.srv", "needs the ROS 2 overlay (scripts/setup.sh)")

pytestmark = pytest.mark.ros


def _cmd(*params):
    """The installed executable itself (what launch starts), not `ros2 run`, whose wrapper process
    would receive the signals."""
    require_ros2_tools()
    from ament_index_python.packages import get_package_prefix

    exe = os.path.join(get_package_prefix("gato_ros"), "lib", "gato_ros", "mujoco_startup")
    assert os.access(exe, os.X_OK), f"{exe} is not installed (scripts/setup.sh)"
    args = []
    for p in params:
        args += ["-p", p]
    return [exe, "--ros-args", *args]


def test_bad_parameters_are_named(ros_env):
    out = subprocess.run(_cmd("controllers:=['']"), env=ros_env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "parameter controllers" in out.stderr, (out.returncode, out.stderr)
    out = subprocess.run(_cmd("controllers:=[a]", "timeout_s:=-1.0"), env=ros_env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and "parameter timeout_s" in out.stderr, (out.returncode, out.stderr)
    out = subprocess.run(_cmd("controllers:=[a]", "call_retry_s:=0.0"), env=ros_env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and "parameter call_retry_s" in out.stderr, (out.returncode, out.stderr)
    out = subprocess.run(_cmd("controllers:=[a]", "mujoco_node:=relative"), env=ros_env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and "parameter mujoco_node" in out.stderr, (out.returncode, out.stderr)
    out = subprocess.run(_cmd("controllers:=[a]", "command_topic:=effort_controller/commands"), env=ros_env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "parameter command_topic" in out.stderr, (out.returncode, out.stderr)


def test_timeout_names_the_step(ros_env):
    # a controller manager name nobody has in this private graph
    out = subprocess.run(_cmd("controllers:=[joint_state_broadcaster]", "timeout_s:=2.0",
                              "controller_manager:=/gato_test_no_such_cm"),
                         env=ros_env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "start-up failed at step 'wait_controllers'" in out.stderr and "timeout_s=2.0" in out.stderr, out.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_waiting_exits_0(ros_env, sig):
    proc = subprocess.Popen(_cmd("controllers:=[joint_state_broadcaster]", "controller_manager:=/gato_test_no_such_cm"),
                            env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        # wait until it runs its sequence (the log line), then signal it
        deadline = time.monotonic() + 90
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "waiting for" in line:
                break
        assert any("waiting for" in ln for ln in seen), "".join(seen)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(seen) + rest


def test_an_unanswered_service_call_is_asked_again(ros_env):
    """A controller manager that loses the answer to the first list_controllers request (CI:
    "failed to send response to /controller_manager/list_controllers (timeout)", the start-up
    then waited out its whole timeout_s): after call_retry_s the node asks again and runs its
    sequence to the end against fake controller-manager and simulation services."""
    import threading

    import rclpy
    from controller_manager_msgs.msg import ControllerState
    from controller_manager_msgs.srv import ListControllers, SwitchController
    from mujoco_ros2_control_msgs.srv import ResetWorld, SetPause, StepSimulation
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.task import Future

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("gato_test_fake_cm", context=ctx)
    seen = {"list": 0, "switch": [], "pause": [], "reset": [], "steps": 0}
    lost = Future()                          # never done: the first request's answer is lost

    async def on_list(_req, res):
        seen["list"] += 1
        if seen["list"] == 1:
            await lost
        active = bool(seen["switch"])
        res.controller = [ControllerState(name=n, state="active" if active else "inactive") for n in ("jsb", "eff")]
        return res

    def on_switch(req, res):
        seen["switch"].append(list(req.activate_controllers))
        res.ok = True
        return res

    def on_pause(req, res):
        seen["pause"].append(req.paused)
        res.success = True
        return res

    def on_reset(req, res):
        seen["reset"].append(req.keyframe)
        res.success = True
        return res

    def on_step(_req, res):
        seen["steps"] += 1
        res.success = True
        return res

    # reentrant: the unanswered first request stays suspended while the next ones are answered
    node.create_service(ListControllers, "/gato_test_cm/list_controllers", on_list,
                        callback_group=ReentrantCallbackGroup())
    node.create_service(SwitchController, "/gato_test_cm/switch_controller", on_switch)
    node.create_service(SetPause, "/gato_test_mj/set_pause", on_pause)
    node.create_service(ResetWorld, "/gato_test_mj/reset_world", on_reset)
    node.create_service(StepSimulation, "/gato_test_mj/step_simulation", on_step)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.05)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        out = subprocess.run(_cmd("controllers:=[jsb, eff]", "controller_manager:=/gato_test_cm",
                                  "mujoco_node:=/gato_test_mj", "call_retry_s:=1.0", "timeout_s:=90.0"),
                             env=ros_env, capture_output=True, text=True, timeout=150)
    finally:
        stop.set()
        spinner.join(timeout=5)
        ex.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=ctx)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    assert "step 'wait_controllers': no answer from /gato_test_cm/list_controllers within call_retry_s=1 s: " \
           "asking again" in log, log
    assert seen["list"] >= 2 and seen["switch"] == [["jsb", "eff"]], seen
    assert seen["pause"] == [True, False] and seen["reset"] == ["home"], seen
    assert "resumed after" in log, log
