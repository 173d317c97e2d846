"""The controller node's collision parameters over DDS: the real node (launch runner, private
ROS domain on loopback) started from the generated iiwa14 parameter file (whose empty obstacle
arrays rcl reads as unset: the node starts with the rows off), obstacles set, refused and cleared
at run time through rclpy's parameter client and the set_parameters service (an empty double
array, and the empty byte array `ros2 param set ... "[]"` sends); every parameter answers
get_parameters.
The closed-loop behaviour is test/test_ros_controller_collision.py's (ROS-free)."""
import json
import signal
import uuid

import numpy as np
import pytest

from conftest import import_or_skip, kill_tagged

import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
sysm = import_or_skip("test_ros_system", "the DDS system-test helpers")

pytestmark = pytest.mark.ros
S = 10**9


@pytest.mark.slow
def test_collision_parameters_over_dds(tmp_path, ros_env):
    sysm.share()
    from gato import tasks
    from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    launch = tmp_path / "controller.launch.xml"
    launch.write_text(sysm._CONTROLLER_LAUNCH.replace('<param name="limits" value="off"/>',
                                                      '<param name="limits" value="admm"/>'))
    marker, report = uuid.uuid4().hex, tmp_path / "report.json"
    proc = sysm.start_runner([str(launch)], ros_env, marker, report)
    probe = None
    q0 = tasks.Q_READY[sysm.ROBOT]
    try:
        probe = sysm.Probe(int(ros_env["ROS_DOMAIN_ID"]))
        assert probe.exchange(1 * S, q0).source == "mpc"
        st = probe.status_where(lambda s: s.ticks >= 1, "a status after the first tick")
        p = json.loads(st.params_json)
        assert p["collision_spheres"] == [] and p["collision_planes"] == [] and p["collision_mech"] == "admm"
        assert probe.params.wait_for_services(timeout_sec=sysm.WAIT_S)
        # every parameter answers get_parameters, the empty obstacle arrays too (rclpy answers no value
        # at all for a request naming a statically typed parameter that was never set: the recorder's
        # snapshot, `ros2 param dump` and rqt then saw none)
        fut = probe.params.list_parameters()
        probe.spin_until(fut.done, what="list_parameters")
        names = list(fut.result().result.names)
        assert "collision_spheres" in names and "collision_planes" in names
        fut = probe.params.get_parameters(names)
        probe.spin_until(fut.done, what="get_parameters")
        assert len(fut.result().values) == len(names), (len(fut.result().values), len(names))

        r = probe.set_param("collision_spheres", [0.5, 0.0, 0.5, 0.0])
        assert not r.successful and "collision_spheres: radius must be > 0" in r.reason, r.reason
        r = probe.set_param("collision_spheres", [0.5, 0.0, 0.5])
        assert not r.successful and "collision_spheres: length 3 is not a multiple of 4" in r.reason, r.reason
        r = probe.set_param("collision_spheres", [0.6, 0.3, 0.4, 0.05])
        assert r.successful, r.reason
        c = probe.exchange(2 * S, q0)
        assert c.source == "mpc" and np.all(np.isfinite(c.effort))
        st = probe.status_where(lambda s: s.ticks >= 2, "the status of the tick after the change")
        assert json.loads(st.params_json)["collision_spheres"] == [0.6, 0.3, 0.4, 0.05]
        r = probe.set_param("limits", "off")
        assert not r.successful and "collision rows need a limit mechanism" in r.reason, r.reason

        # clearing: an empty DOUBLE array through the service (ros2 param set types [] as bytes)
        cli = probe.node.create_client(SetParameters, "/gato_controller/set_parameters")
        assert cli.wait_for_service(timeout_sec=sysm.WAIT_S)

        def clear_with(value: ParameterValue, tick: int):
            """Send collision_spheres = value through ~/set_parameters; the next tick solves without
            obstacles and its status reads them back empty."""
            fut = cli.call_async(SetParameters.Request(parameters=[ParameterMsg(name="collision_spheres", value=value)]))
            probe.spin_until(fut.done, what=f"set_parameters(collision_spheres) type {value.type}")
            assert fut.result().results[0].successful, fut.result().results[0].reason
            assert probe.exchange(tick * S, q0).source == "mpc"
            st = probe.status_where(lambda s: s.ticks >= tick, f"the status of tick {tick} after clearing")
            assert json.loads(st.params_json)["collision_spheres"] == []

        clear_with(ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY, double_array_value=[]), 3)
        # and what `ros2 param set /gato_controller collision_spheres "[]"` sends: an empty BYTE array
        assert probe.set_param("collision_spheres", [0.6, 0.3, 0.4, 0.05]).successful
        clear_with(ParameterValue(type=ParameterType.PARAMETER_BYTE_ARRAY), 4)
        r = probe.set_param("collision_spheres", "a string")
        assert not r.successful and "collision_spheres: expected a list of numbers" in r.reason, r.reason
    finally:
        if probe is not None:
            probe.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out = sysm.finish(proc, 120)
        kill_tagged("GATO_TEST_MARKER", marker)
    sysm.assert_clean_exit(proc, out, report, marker)
