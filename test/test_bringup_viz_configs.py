"""The shipped viewer and MoveIt configs name what the stack really offers (issue 31).

RViz, Foxglove and MoveIt are not installed here, so what they would show is checked through
the graph: every topic that gato_bringup/config/gato.rviz and gato.foxglove.json display is
published by the real controller node (created in this process with four batch rows, so the
batch paths exist; its publishers listed by rclpy's graph API) or by the bringup's
robot_state_publisher (/robot_description); every <robot>_moveit_controllers.yaml sends MoveIt's
FollowJointTrajectory goals to an action server that node really offers, for exactly the joints
that robot's controller parameters name, in their order.
"""
import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import import_or_skip

rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace (scripts/setup.sh; source scripts/activate.sh)")
import_or_skip("control_msgs.action", "source the ROS 2 overlay (scripts/activate.sh)")

pytestmark = pytest.mark.ros

CONFIG = Path(__file__).resolve().parents[1] / "src" / "gato_bringup" / "config"
# published by robot_state_publisher in every bringup (hardware.launch.xml, sim.launch.yaml)
FROM_OTHER_NODES = {"/robot_description"}


def _rviz_topics() -> set:
    """Every display's topic in gato.rviz (the `Topic: {Value: ...}` and `Description Topic` forms)."""
    topics = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("Topic", "Description Topic") and isinstance(v, dict) and "Value" in v:
                    topics.add(v["Value"])
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(yaml.safe_load((CONFIG / "gato.rviz").read_text()))
    return topics


def _foxglove_topics() -> set:
    """Every topic path the Foxglove layout's panels name."""
    text = json.dumps(json.loads((CONFIG / "gato.foxglove.json").read_text()))
    return set(re.findall(r'"(/[A-Za-z0-9_/]+?)(?:\.[A-Za-z_]|")', text))


@pytest.fixture(scope="module")
def controller_graph(ros_env):
    """(topics the controller node publishes, its action servers), from a node with batch_size 4."""
    from rclpy.action import get_action_server_names_and_types_by_node
    from rclpy.parameter import Parameter

    from gato_ros.controller_node import ControllerNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = None
    try:
        node = ControllerNode(context=ctx, parameter_overrides=[Parameter("batch_size", value=4)])
        pubs = {name for name, _ in node.get_publisher_names_and_types_by_node("gato_controller", "/")}
        actions = {name: types for name, types in
                   get_action_server_names_and_types_by_node(node, "gato_controller", "/")}
        return pubs, actions
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=ctx)


def test_every_topic_rviz_and_foxglove_show_is_published(controller_graph):
    pubs, _ = controller_graph
    rviz, fox = _rviz_topics(), _foxglove_topics()
    assert {"/gato_controller/plan_path", "/gato_controller/markers"} <= rviz, rviz      # the parser found them
    assert "/gato_controller/status" in fox, fox
    offered = pubs | FROM_OTHER_NODES
    assert rviz - offered == set(), f"gato.rviz shows topics nobody publishes: {sorted(rviz - offered)}"
    assert fox - offered == set(), f"gato.foxglove.json shows topics nobody publishes: {sorted(fox - offered)}"


def test_the_foxglove_plots_read_fields_the_status_message_has():
    """The layout's plot series (``/topic.field``) name fields of the topic's message."""
    from gato_msgs.msg import ControllerStatus

    text = (CONFIG / "gato.foxglove.json").read_text()
    fields = set(re.findall(r'"/gato_controller/status\.([A-Za-z_][A-Za-z0-9_]*)', text))
    assert fields, "the layout plots no status field"
    missing = {f for f in fields if f not in ControllerStatus.get_fields_and_field_types()}
    assert not missing, f"gato.foxglove.json plots fields ControllerStatus lacks: {sorted(missing)}"


@pytest.mark.parametrize("robot", sorted(p.name.split("_moveit")[0] for p in CONFIG.glob("*_moveit_controllers.yaml")))
def test_moveit_controllers_name_the_action_server_and_the_robots_joints(robot, controller_graph):
    _, actions = controller_graph
    cfg = yaml.safe_load((CONFIG / f"{robot}_moveit_controllers.yaml").read_text())
    assert cfg["moveit_controller_manager"] == "moveit_simple_controller_manager/MoveItSimpleControllerManager"
    mgr = cfg["moveit_simple_controller_manager"]
    (name,) = mgr["controller_names"]
    c = mgr[name]
    assert c["type"] == "FollowJointTrajectory" and c["default"] is True, c
    # MoveIt's simple controller manager sends goals to /<controller name>/<action_ns>
    action = f"/{name}/{c['action_ns']}"
    assert actions.get(action) == ["control_msgs/action/FollowJointTrajectory"], (action, actions)
    params = yaml.safe_load((CONFIG / f"{robot}.yaml").read_text())
    joints = params["gato_controller"]["ros__parameters"]["joint_names"]
    assert c["joints"] == joints, (c["joints"], joints)
