"""`ros2 launch gato_bringup hardware.launch.xml robot:=iiwa14 controller:=plugin` under the real
ros2 launch with the mock hardware (its own module: test_ros_plugin.py's controller_manager must be
gone, both would be /controller_manager on this session's domain). Skips only where neither the
ROS 2 overlay nor a system ROS 2 exists."""
import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import processes_with_env, require_ros2_tools, start_python

pytestmark = pytest.mark.ros

ROBOT = "iiwa14"
PLUGIN = "gato_plugin"


@pytest.mark.parametrize("mode", ["follow", "embedded"])
def test_hardware_launch_with_the_plugin(ros_env, tmp_path, mode):
    """`ros2 launch gato_bringup hardware.launch.xml robot:=iiwa14 controller:=plugin mode:=<mode>`
    with the mock hardware: joint_state_broadcaster and the gato plugin come up active; follow: the
    controller node's plans reach the plugin; embedded: no controller node, the plugin's own solver
    feeds it; either way it follows plans. SIGINT ends everything (no orphans)."""
    plugin = PLUGIN if mode == "follow" else PLUGIN + "_embedded"
    require_ros2_tools("xacro")
    tag = uuid.uuid4().hex
    env = dict(ros_env, GATO_PLUGIN_TEST_TAG=tag, PYTHONUNBUFFERED="1", ROS_LOG_DIR=str(tmp_path / "log"))
    log_path = tmp_path / "launch.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(["ros2", "launch", "gato_bringup", "hardware.launch.xml", f"robot:={ROBOT}",
                             "controller:=plugin", f"mode:={mode}"], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        listing, want = "", {"joint_state_broadcaster", plugin}
        end = time.monotonic() + 120
        while time.monotonic() < end:
            r = subprocess.run(["ros2", "control", "list_controllers"], env=env, capture_output=True, text=True,
                               timeout=60)
            listing = r.stdout
            active = {line.split()[0] for line in listing.splitlines() if line.split() and "active" in line.split()}
            if want <= active:
                break
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(1.0)
        assert want <= active, f"list_controllers:\n{listing}\n{log_path.read_text()[-3000:]}"
        assert "effort_controller" not in active
        # The node publishes plans only; the plugin executes them.
        probe = start_python(
            "import rclpy, time\n"
            "from gato_msgs.msg import ControllerStatus\n"
            "rclpy.init(); n = rclpy.create_node('gato_plugin_probe'); got = []\n"
            f"n.create_subscription(ControllerStatus, '/{plugin}/status', got.append, 10)\n"
            "end = time.time() + 60\n"
            "while time.time() < end and not any(m.state == 'follow' and m.plans_accepted > 0 for m in got):\n"
            "    rclpy.spin_once(n, timeout_sec=0.1)\n"
            "m = got[-1] if got else None\n"
            "print('STATUS', m.state if m else None, m.plans_accepted if m else 0, m.reason if m else '')\n",
            env)
        out, _ = probe.communicate(timeout=90)
        assert "STATUS follow" in out, out + log_path.read_text()[-3000:]
        nodes = subprocess.run(["ros2", "node", "list"], env=env, capture_output=True, text=True, timeout=60).stdout
        assert ("/gato_controller" in nodes.split()) == (mode == "follow"), nodes
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                rc = proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
        log.close()
        # `ros2 control` may have started the ros2 daemon with this environment: stop it like a user would.
        subprocess.run(["ros2", "daemon", "stop"], env=env, capture_output=True, timeout=60)
        time.sleep(1.0)
    assert rc is not None, "ros2 launch did not exit within 40 s of SIGINT"
    left = processes_with_env("GATO_PLUGIN_TEST_TAG", tag)
    assert not left, f"leftover processes after SIGINT: {left}"
