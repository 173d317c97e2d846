"""The gato ros2_control plugin on hardware without a <joint>/effort state interface for every
joint: it claims position and velocity only and runs as before (the hold torque on the
effort commands), its status says effort_measured false.

Its own launch (test_ros_plugin's, the iiwa14 mock hardware with A1's effort state interface
removed): joint_state_broadcaster still publishes the other joints' mirrored commands, which
the test reads back. Skips only where neither the ROS 2 overlay nor a system ROS 2 exists.
"""
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml

from test_ros_plugin import PLUGIN, ROBOT, Client, _gravity, _initial_positions, _Launch, _params, _xacro

pytestmark = pytest.mark.ros


def _without_a1_effort_state(urdf):
    root = ET.fromstring(urdf)
    joint = next(j for rc in root.iter("ros2_control") for j in rc.iter("joint") if j.get("name") == "A1")
    effort = next(si for si in joint.findall("state_interface") if si.get("name") == "effort")
    joint.remove(effort)
    return ET.tostring(root, encoding="unicode")


def test_without_effort_state_interfaces_the_plugin_reads_position_and_velocity_only(tmp_path, ros_env):
    params = _params()
    urdf = _xacro(ros_env)
    (tmp_path / "robot.urdf").write_text(_without_a1_effort_state(urdf))
    cfg = yaml.safe_load(params.controllers_yaml(ROBOT))
    cfg["controller_manager"]["ros__parameters"]["update_rate"] = 500
    cfg[PLUGIN]["ros__parameters"].update(status_rate_hz=50.0)
    (tmp_path / "controllers.yaml").write_text(yaml.safe_dump(cfg))
    names = cfg[PLUGIN]["ros__parameters"]["joints"]
    q0 = _initial_positions(urdf)
    launch = _Launch(tmp_path, ros_env)
    client = None
    try:
        client = Client()
        client.wait_state("joint_state_broadcaster", "active", timeout=90)
        client.bring_up()
        st = client.wait_status(lambda st: st.ticks > 50)
        assert (st.state, st.reason, st.effort_measured) == ("hold", "no_plan", False), st
        assert st.effort_error_max == 0.0
        g = dict(zip(names, _gravity([q0[n] for n in names])))
        samples = client.efforts_after(client.now_ns(), names, 1.0)
        assert len(samples) >= 5
        others = [n for n in names if n != "A1"]
        for _, eff in samples[-5:]:
            np.testing.assert_allclose([eff[n] for n in others], [g[n] for n in others], atol=1e-6)
        client.switch(deactivate=[PLUGIN])
        client.wait_state(PLUGIN, "inactive")
    finally:
        if client is not None:
            client.close()
        launch.stop()
    assert "position and velocity only" in (tmp_path / "launch.log").read_text()
