"""The standard interfaces in the hardware bringup under the REAL ROS 2 launch (launch_pytest,
the overlay): ``hardware.launch.xml mujoco:=true controller:=node rviz:=true`` (MuJoCo through
ros2_control, sim time, no reference node: the targets drive the arm). A PoseStamped goal 20 cm
away is reached within 5 mm and held (q_cost 20 set live; the default leaves a 12 mm gravity
sag); the plan path and /diagnostics arrive; ``rviz:=true`` where rviz2 is absent starts a process
that says so and exits 0 (the launch goes on); SIGINT ends every process with exit code 0.

Times are the joint states' stamps (simulated); no wall-clock time is asserted."""
import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
launch_pytest = import_or_skip("launch_pytest", "needs the ROS 2 overlay (scripts/setup.sh; source "
                               "scripts/activate.sh)")
rclpy = import_or_skip("rclpy", "install the ROS 2 wheels (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", _HINT)
import_or_skip("nav_msgs.msg", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")

from launch_graph import assert_clean, bringup_file, marked_launch  # noqa: E402
from test_ros_targets_system import NS, Probe  # noqa: E402

pytestmark = pytest.mark.ros
TIMEOUT_S = 180.0


@launch_pytest.fixture
def hw_targets(monkeypatch, ros_env):
    return marked_launch(monkeypatch, bringup_file("hardware.launch.xml"),
                         {"robot": "iiwa14", "mujoco": "true", "controller": "node", "reference": "false",
                          "rviz": "true"})


@pytest.mark.launch(fixture=hw_targets)
def test_pose_goal_through_ros2_control_mujoco(hw_targets, ros_env):
    _, g = hw_targets
    p = Probe(int(ros_env["ROS_DOMAIN_ID"]))
    rviz = []
    try:
        p.spin_until(lambda: "gato_mujoco_startup" in g.exits, "the MuJoCo start-up node", timeout=TIMEOUT_S)
        assert g.exits["gato_mujoco_startup"] == 0, g.exits
        p.spin_until(lambda: len(p.plans) >= 50 and len(p.ee) > 0, "50 plans", timeout=TIMEOUT_S)
        rviz = [k for k in g.exits if k.startswith("rviz")]   # launch numbers executables: rviz-<n>
        assert len(rviz) == 1 and g.exits[rviz[0]] == 0, g.exits   # rviz2 absent here: one line, exit 0
        p.set("q_cost", 20.0)
        p.wait_sim(1.0)
        ee0 = p.ee[-1][1]
        goal = ee0 + np.array([0.0, 0.2, 0.0])
        t_goal = p.now()
        p.pose(goal)
        p.wait_sim(2.0 + 1.5)
        held = p.ee_between(t_goal + int(3.0 * NS), p.now())
        err = np.linalg.norm(held - goal, axis=1)
        print(f"ros2_control + MuJoCo: pose goal held within {err.max() * 1e3:.2f} mm (mean {err.mean() * 1e3:.2f})")
        assert len(held) >= 20 and err.max() <= 0.005, (len(held), err.max())
        assert p.paths, "no ~/plan_path"
        assert any("gato_controller" in s.name for s in p.diag), "no /diagnostics from the controller"
        allowed = {"spawner_joint_state_broadcaster", "spawner_effort_controller", "gato_mujoco_startup", *rviz}
        assert not (set(g.exits) - allowed) and all(rc == 0 for rc in g.exits.values()), g.exits
    finally:
        p.close()
    yield
    assert_clean(g, {"robot_state_publisher", "spawner_joint_state_broadcaster", "spawner_effort_controller",
                     "gato_mujoco_startup", "gato_controller", *rviz})
